"""The handover's rules: the next action a person should take, and whether the run's reason for
needing one still holds. Each rule chooses a code with the facts it rests on (handover.codes);
handover.words says it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compensations.models import CompensationStatus
from journal.models import JournalEvent, OutcomeReason, Run, RunStatus

from . import words
from .codes import NextActionAdvice, NextActionCode, ReasonAnswer, UndoOffer
from .objects import AvailableUndo, CompletedStep, NextAction, NotDoneStep, StandingStep, UncertainStep
from .rows import HandoverRows

type Step = CompletedStep | StandingStep


@dataclass(frozen=True)
class _Standing:
    """The completed steps sorted by what became of them, for the rules."""

    available: list[AvailableUndo]
    failed_undo: list[Step]
    undone: list[Step]
    pending_undo: list[Step]
    by_hand: list[Step]
    standing: list[Step]
    undoable: list[Step]
    irreversible: list[Step]
    partly: list[Step]

    @classmethod
    def of(cls, completed: Sequence[Step]) -> _Standing:
        standing = [c for c in completed if not c.undone and not c.settled_by_hand]
        undoable, irreversible = _undoable_or_not(standing)
        undone = [c for c in completed if c.undone]
        return cls(
            available=_available_undos(completed),
            failed_undo=[c for c in completed if c.undo_failed],
            undone=undone,
            pending_undo=[c for c in completed if c.undo_pending],
            # A failed undo whose dead letter a person resolved is settled: undone by hand, or left
            # standing on purpose (their note says which). It is neither undoable nor still owed.
            by_hand=[c for c in completed if c.settled_by_hand],
            standing=standing,
            undoable=undoable,
            irreversible=irreversible,
            partly=[
                c for c in undone if c.compensation and c.compensation.status == CompensationStatus.PARTIAL
            ],
        )


def _undoable_or_not(standing: list[Step]) -> tuple[list[Step], list[Step]]:
    """What still stands, split into what can still be undone and what nothing undoes (its undo
    `not_possible`, or no compensating tool); a partial undo leaves its loss standing. A step
    whose undo is under way or failed is in neither."""
    undoable = [c for c in standing if c.undo_tool and c.compensation is None]
    # By identity: comparing the dataclasses by value made this quadratic (10,000 steps: minutes).
    undoable_ids = {id(c) for c in undoable}
    irreversible = [
        c for c in standing if id(c) not in undoable_ids and not (c.undo_pending or c.undo_failed)
    ]
    return undoable, irreversible


def _available_undos(completed: Sequence[Step]) -> list[AvailableUndo]:
    """The undos a person may ask for now: a compensating tool, a call it can be built for, and
    no undo asked for yet."""
    return [
        AvailableUndo(step_id=c.step_id, tool=c.tool, undo_tool=c.undo_tool, reversibility=c.reversibility)
        for c in completed
        if c.undo_tool and not c.undo_blocked and c.compensation is None
    ]


def _tools(steps: Sequence[Step]) -> tuple[str, ...]:
    return tuple(c.tool for c in steps)


def _after_undo(steps: _Standing) -> NextActionAdvice | None:
    """The advice once something was undone or settled by hand, if it applies."""
    undone = _tools(steps.undone)
    if steps.by_hand and not steps.standing and not steps.partly:
        return NextActionAdvice(
            NextActionCode.TELL_CUSTOMER_SETTLED,
            undone=undone,
            settled_by_hand=tuple(
                (c.tool, c.compensation.settled_by_hand) for c in steps.by_hand if c.compensation
            ),
        )
    if steps.undone and not steps.standing and not steps.partly:
        return NextActionAdvice(NextActionCode.TELL_CUSTOMER_UNDONE)
    if steps.undone:
        # Something remains: a step only partly taken back, one nothing undoes, or one still
        # undoable. Only the last is offered as an undo.
        return NextActionAdvice(
            NextActionCode.FINISH_BY_HAND,
            undone=undone,
            partly=tuple((c.tool, c.compensation.not_undone) for c in steps.partly if c.compensation),
            irreversible=_tools(steps.irreversible),
            undoable=_tools(steps.undoable),
        )
    return None


def next_action_advice(
    *,
    run: Run,
    steps: _Standing,
    not_done: list[NotDoneStep],
    uncertain: list[UncertainStep],
    stuck: bool = False,
) -> NextActionAdvice:
    """The rules, in order: settle what is uncertain first (nothing else is safe until then); a
    failed undo goes to its dead letter; wait for an undo under way; a run that ended with nobody
    waiting on it needs nothing; then finish what was not done or undo what was; a run that did
    everything only needs closing."""
    if uncertain:
        return NextActionAdvice(NextActionCode.SETTLE_UNCERTAIN, tools=(uncertain[0].tool,))
    if steps.failed_undo:
        return NextActionAdvice(NextActionCode.FINISH_FAILED_UNDO, tools=_tools(steps.failed_undo))
    if steps.pending_undo:
        return NextActionAdvice(NextActionCode.WAIT_FOR_UNDO, tools=_tools(steps.pending_undo))
    if run.status != RunStatus.RUNNING and not run.awaiting_person:
        # Ended, and no escalation is open: advice to resume or resolve would name buttons the
        # page no longer offers. Undoing a step stays possible (a customer may change their mind).
        return NextActionAdvice(
            NextActionCode.NOTHING_WAITING,
            run_status=run.status,
            undone=_tools(steps.undone),
            can_still_undo=bool(steps.available),
        )
    after_undo = _after_undo(steps)
    if after_undo is not None:
        return after_undo
    if not_done and run.status == RunStatus.RUNNING and not stuck:
        return NextActionAdvice(NextActionCode.WAIT_FOR_AGENT)
    if not_done:
        return NextActionAdvice(
            NextActionCode.RESUME,
            todo=tuple((n.tool, n.detail) for n in not_done),
            offers=tuple(UndoOffer(a.undo_tool, a.tool, a.reversibility) for a in steps.available),
        )
    if steps.standing or steps.by_hand:
        return NextActionAdvice(NextActionCode.CHECK_AND_RESOLVE)
    return NextActionAdvice(NextActionCode.RESUME_OR_RESOLVE)


def next_action(
    *,
    run: Run,
    completed: Sequence[Step],
    not_done: list[NotDoneStep],
    uncertain: list[UncertainStep],
    stuck: bool = False,
) -> NextAction:
    """A concrete suggestion, by rules (next_action_advice), in words (handover.words). A run
    that ended with nobody waiting on it waits on nobody (`waiting` is false) unless work comes
    before anything else: an uncertain step, an undo failed or under way. `stuck`: the running
    run's agent went quiet."""
    steps = _Standing.of(completed)
    advice = next_action_advice(run=run, steps=steps, not_done=not_done, uncertain=uncertain, stuck=stuck)
    ended_unattended = run.status != RunStatus.RUNNING and not run.awaiting_person
    waiting = bool(uncertain or steps.failed_undo or steps.pending_undo) or not ended_unattended
    return NextAction(
        code=advice.code,
        text=words.next_action_text(advice),
        compensations_available=steps.available,
        waiting=waiting,
    )


def _escalated_at(rows: HandoverRows) -> int:
    """The id of the event that last handed the run to a person (0: none did)."""
    return max(
        (
            e.pk
            for e in rows.events
            if e.kind == JournalEvent.Kind.RUN_ESCALATED
            or (e.kind == JournalEvent.Kind.RUN_COMPENSATED and "reason" in e.data)
        ),
        default=0,
    )


def _ended_answer(rows: HandoverRows, later: list[JournalEvent]) -> str:
    """What answered the reason of a run nobody waits on: who resolved it, or how it ended."""
    resolved = next((e for e in reversed(later) if e.kind == JournalEvent.Kind.ESCALATION_RESOLVED), None)
    if resolved is not None:
        return words.resolved_words(
            who_resolved=resolved.actor_name, at=resolved.at, note=resolved.data.get("note", "")
        )
    status = rows.run.get_status_display().lower()
    return words.reason_answered_words(ReasonAnswer.NOBODY_WAITS, status=status)


def _uncertain_answer(rows: HandoverRows, later: list[JournalEvent]) -> str:
    """What settled the run's unknown outcomes: each lookup's or person's answer since."""
    settled = [
        words.settled_step_words(
            tool=e.intent.tool,
            judged=bool(e.data.get("judged_by")),
            status=e.data.get("status", e.intent.status),
            who_settled=e.actor_name,
            at=e.at,
            note=e.data.get("note") or "",
        )
        for e in later
        if e.intent is not None
        and e.intent_id not in rows.compensation_intent_ids
        and e.kind in (JournalEvent.Kind.OUTCOME_RECORDED, JournalEvent.Kind.INTENT_RECONCILED)
    ]
    if not settled:
        return words.reason_answered_words(ReasonAnswer.NOTHING_UNCERTAIN)
    return words.reason_answered_words(ReasonAnswer.SETTLED, settled)


def _undo_answer(completed: Sequence[Step]) -> str:
    """What settled the run's failed undos: a person's resolution, or a retry that went through."""
    settled = [
        words.undo_settled_words(
            tool=c.tool, by_hand=c.compensation.settled_by_hand if c.settled_by_hand else ""
        )
        for c in completed
        if c.compensation is not None and c.compensation.dead_letter is not None
    ]
    if not settled:
        return words.reason_answered_words(ReasonAnswer.NO_UNDO_FAILING)
    return words.reason_answered_words(ReasonAnswer.UNDO_SETTLED, settled)


def reason_now(
    rows: HandoverRows,
    *,
    reason: str,
    completed: Sequence[Step],
    uncertain: list[UncertainStep],
) -> tuple[bool, str]:
    """Whether the run's reason for needing a person is still true, and if not what answered it,
    from the rows: an escalation resolved answers any reason; an unknown outcome is answered
    once nothing is uncertain, a failed undo once no dead letter of the run is open. Other
    reasons (policy, a death mid-sequence, versions, a deadline) hold while the escalation is open."""
    run = rows.run
    if not reason or (run.status == RunStatus.RUNNING and reason == "run_stuck"):
        return True, ""
    escalated_at = _escalated_at(rows)
    later = [e for e in rows.events if e.pk > escalated_at]
    if not run.awaiting_person and run.status != RunStatus.RUNNING:
        return False, _ended_answer(rows, later)
    if reason == OutcomeReason.UNKNOWN_OUTCOME and not uncertain:
        return False, _uncertain_answer(rows, later)
    if reason == OutcomeReason.COMPENSATION_FAILED and not any(c.undo_failed for c in completed):
        return False, _undo_answer(completed)
    return True, ""
