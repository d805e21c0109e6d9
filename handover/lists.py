"""The handover's lists, derived from its rows: completed (with whether and how far each step
can still be undone), not done, uncertain, already so, and what the customer was told. Their
sentences come from handover.words."""

from __future__ import annotations

from datetime import datetime, tzinfo
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from compensations.mapping import MappingError, ParsedMapping
from compensations.models import CompensationStatus
from compensations.reversibility import may_undo, reads_receipt, reversibility_now
from journal.channels import CustomerChannel
from journal.models import ActorKind, ErrorClass, Intent, IntentStatus, JournalEvent, RunStatus
from tools.registry import all_tools, find_tool

from . import why_words, words
from .codes import NotDoneWhy
from .objects import (
    UNDONE,
    AlreadySoStep,
    CompletedStep,
    Contradiction,
    ContradictionCode,
    CustomerTold,
    CustomerToldSource,
    NotDoneStep,
    ReversibilityNow,
    StandingStep,
    StepCompensation,
    UncertainStep,
)
from .rows import HandoverRows, PerformedStep


def _when(value: Any) -> str:
    """A receipt's date or datetime as a person reads it; anything else as it is."""
    # Only a value starting YYYY- is parsed: most receipt values are ids, and parsing each one
    # cost a long run's page a third of its time.
    if isinstance(value, str) and value[:4].isdigit() and value[4:5] == "-":
        # A plain date first: Python's ISO parser would read "2026-12-01" as a naive midnight.
        # Dates and moments are written the one way every page writes them (words.when_words).
        day = parse_date(value) if len(value) == 10 else None
        if day is not None:
            return day.isoformat()
        moment = parse_datetime(value)
        if moment is not None and timezone.is_aware(moment):
            return words.when_words(moment)
    return str(value)


def receipt_detail(intent: Intent) -> str:
    """The receipt in words: the tool's own sentence for it, else its fields."""
    readable = {k: _when(v) if isinstance(v, str) else v for k, v in (intent.receipt or {}).items()}
    spec = find_tool(intent.tool)  # not get_tool: an exception per unregistered step is slow
    if spec is not None:
        return spec.describe_receipt(readable)
    return ", ".join(f"{k} {v}" for k, v in readable.items())


def reversibility(entry: Any, intent: Intent | PerformedStep, now: datetime) -> ReversibilityNow:
    """How far the performed step can still be taken back at `now` (compensations.reversibility),
    with its words."""
    return ReversibilityNow.of(reversibility_now(entry, intent.receipt, now))


# --- the lists --------------------------------------------------------------------------------


def _money(args: dict[str, Any]) -> Decimal:
    try:
        return Decimal(str(args.get("amount", "0")))
    except InvalidOperation:
        return Decimal(0)


def warnings_for(*, tool: str, args: dict[str, Any], reversible: ReversibilityNow) -> list[str]:
    """What a person must know before the click: money above the high-value threshold, and
    effects nothing (or only part) can take back."""
    warnings = []
    amount = _money(args)
    if amount >= Decimal(str(settings.SEAM_HIGH_VALUE_AMOUNT)):
        warnings.append(words.high_value_words(amount, args.get("currency", "")))
    if not reversible.can_undo:
        warnings.append(words.say(words.IRREVERSIBLE, tool=words.tool_words(tool)))
    elif reversible.loses:
        warnings.append(reversible.sentence)
    return warnings


def _step_compensation(compensation: Any, *, tool: str) -> StepCompensation | None:
    if compensation is None:
        return None
    dead_letter = getattr(compensation, "dead_letter", None)
    settled = ""
    if dead_letter is not None and dead_letter.resolved_at is not None:
        who = dead_letter.resolved_by.get_username() if dead_letter.resolved_by else ""
        settled = words.settled_by_hand_words(who, dead_letter.resolution_note)
    return StepCompensation(
        id=compensation.pk,
        status=CompensationStatus(compensation.status),
        not_undone=why_words.not_undone_words(
            status=compensation.status, not_undone=compensation.not_undone, tool=tool
        ),
        dead_letter=dead_letter.pk if dead_letter is not None else None,
        settled_by_hand=settled,
        dead_letter_resolved=dead_letter is not None and dead_letter.resolved_at is not None,
        undone_at=compensation.intent.settled_at
        if compensation.status in UNDONE and compensation.intent is not None
        else None,
    )


def undo_unbuildable(entry: Any, intent: Intent | PerformedStep, parsed: ParsedMapping | None = None) -> str:
    """Why the compensating call cannot be built from this step (a step a person marked
    performed has no receipt to take the downstream's identifiers from); '' when it can.
    `parsed`: the entry's mapping, parsed once for the many steps of its tool."""
    args, receipt = intent.args or {}, intent.receipt or {}
    try:
        mapping = parsed or ParsedMapping.of(entry)
        if not mapping.builds(args, receipt):
            mapping.build(args, receipt)  # raises, with the words for why
    except MappingError as exc:
        return str(exc)
    return ""


def _parsed_mapping(entry: Any) -> ParsedMapping | None:
    """The entry's mapping parsed, or None when it is malformed (undo_unbuildable then says why)."""
    try:
        return ParsedMapping.of(entry)
    except MappingError:
        return None


def _settled_how(rows: HandoverRows) -> dict[int, tuple[str, str]]:
    """intent id → how its performed outcome was learnt ("found", "marked") and by whom; the
    call's own answer ("happened") is the default."""
    how: dict[int, tuple[str, str]] = {}
    for event in rows.events:
        if event.intent_id is None or event.data.get("status") != IntentStatus.PERFORMED:
            continue
        if event.kind == JournalEvent.Kind.OUTCOME_RECORDED and event.data.get("judged_by"):
            how[event.intent_id] = ("marked", str(event.data["judged_by"]))
        elif event.kind == JournalEvent.Kind.INTENT_RECONCILED:
            how[event.intent_id] = ("found", event.actor_name)
    return how


class _UndoNow(NamedTuple):
    """Whether and how a performed step can still be undone, for either list: the reversibility
    now, its compensating tool ('' when nothing undoes it now) and why that call cannot be built
    ('' when it can)."""

    reversible: ReversibilityNow
    undo_tool: str
    undo_blocked: str


def _undo_now(
    entry: Any,
    intent: Intent | PerformedStep,
    now: datetime,
    cannot_undo: ReversibilityNow,
    known: ReversibilityNow | None = None,
    parsed: ParsedMapping | None = None,
) -> _UndoNow:
    """`known`: the tool's reversibility when it does not depend on the step (reads_receipt);
    `parsed`: its mapping, parsed once per tool."""
    if known is not None:
        reversible = known
    else:
        reversible = reversibility(entry, intent, now) if may_undo(entry) else cannot_undo
    undo_tool = entry.compensating_tool if entry and reversible.can_undo else ""
    return _UndoNow(reversible, undo_tool, undo_unbuildable(entry, intent, parsed) if undo_tool else "")


def completed_steps(
    rows: HandoverRows, plan_detail: dict[str, str], now: datetime, limit: int | None = None
) -> tuple[list[CompletedStep], list[CompletedStep | StandingStep]]:
    """The completed steps as CompletedSteps (every one, or with `limit` the first `limit` and
    every one an undo was asked for), and every step in order, those others as StandingSteps,
    for the next action."""
    completed: list[CompletedStep] = []
    every: list[CompletedStep | StandingStep] = []
    zone = timezone.get_current_timezone()  # once: looking it up per step is slow
    settled_how = _settled_how(rows)
    cannot_undo = ReversibilityNow.none()  # one value for every step nothing undoes
    # A tool nothing undoes gives every step of it the same answer, and most undoable tools the
    # same reversibility: worked out once per tool, not per step.
    never_undone = _UndoNow(cannot_undo, "", "")
    undo_of = {tool: entry for tool, entry in rows.catalogue.items() if may_undo(entry)}
    same_for_all = {
        tool: ReversibilityNow.of(reversibility_now(entry, None, now))
        for tool, entry in undo_of.items()
        if not reads_receipt(entry)
    }
    parsed = {tool: _parsed_mapping(entry) for tool, entry in undo_of.items()}
    for intent in rows.steps:
        if intent.status != IntentStatus.PERFORMED or intent.pk in rows.compensation_intent_ids:
            continue
        entry = undo_of.get(intent.tool)
        undo = (
            never_undone
            if entry is None
            else _undo_now(
                entry, intent, now, cannot_undo, same_for_all.get(intent.tool), parsed[intent.tool]
            )
        )
        compensation = rows.compensations.get(intent.pk)
        if isinstance(intent, PerformedStep) or (
            limit is not None and compensation is None and len(every) >= limit
        ):
            every.append(
                StandingStep(
                    step_id=intent.step_id,
                    tool=intent.tool,
                    undo_tool=undo.undo_tool,
                    undo_blocked=undo.undo_blocked,
                    reversibility=undo.reversible,
                )
            )
            continue
        step = _completed_step(
            intent,
            undo,
            compensation=compensation,
            plan_detail=plan_detail,
            how=settled_how.get(intent.pk, ("happened", "")),
            zone=zone,
        )
        completed.append(step)
        every.append(step)
    return completed, every


def _completed_step(
    intent: Intent,
    undo: _UndoNow,
    *,
    compensation: Any,
    plan_detail: dict[str, str],
    how: tuple[str, str],
    zone: tzinfo,
) -> CompletedStep:
    """A completed step as the handover shows it: when it settled, its receipt in words (else the
    plan's words for it), how its outcome was learnt and by whom, and its undo; warnings only
    while no undo was asked for."""
    settled_at = intent.settled_at or intent.intended_at
    return CompletedStep(
        step_id=intent.step_id,
        tool=intent.tool,
        at=timezone.localtime(settled_at, zone).strftime("%H:%M:%S"),
        settled_at=settled_at,
        detail=receipt_detail(intent) or plan_detail.get(intent.idempotency_key, ""),
        reversibility=undo.reversible,
        receipt=intent.receipt,
        undo_tool=undo.undo_tool,
        undo_blocked=undo.undo_blocked,
        intended_at=intent.intended_at,
        settled_how=how[0],
        settled_by=how[1],
        compensation=_step_compensation(compensation, tool=intent.tool),
        warnings=[]
        if compensation is not None
        else warnings_for(tool=intent.tool, args=intent.args, reversible=undo.reversible),
    )


# Why a planned step is not done, by the status of its intent (None: it has none).
NOT_DONE_WHY: dict[str | None, NotDoneWhy] = {
    None: NotDoneWhy.NEVER_ATTEMPTED,
    IntentStatus.NOT_PERFORMED: NotDoneWhy.NOT_PERFORMED,
    IntentStatus.FAILED: NotDoneWhy.FAILED,
}


def not_done_steps(rows: HandoverRows, planned: list[dict[str, Any]]) -> list[NotDoneStep]:
    by_key = {i.idempotency_key: i for i in rows.intents}
    performed_tail = rows.tail_keys
    not_done = []
    for step in planned:
        if step["key"] in performed_tail:
            continue
        intent = by_key.get(step["key"])
        status = intent.status if intent is not None else None
        if status not in NOT_DONE_WHY:
            continue  # performed, or in doubt (listed as uncertain)
        why = words.not_done_words(
            NOT_DONE_WHY[status],
            error_class=intent.error_class if intent is not None else "",
            summary=intent.outcome_summary if intent is not None else "",
        )
        not_done.append(
            NotDoneStep(
                tool=step["tool"],
                detail=step.get("detail", ""),
                args=step.get("args", {}),
                idempotency_key=step["key"],
                why=why,
                step_id=intent.step_id if intent is not None else "",
            )
        )
    return not_done


def uncertain_steps(rows: HandoverRows, plan_detail: dict[str, str]) -> list[UncertainStep]:
    """Rows whose outcome is unknown, and rows still open on a run nobody is running."""
    run_alive = rows.run.status == RunStatus.RUNNING and not rows.stuck
    uncertain = []
    for intent in rows.intents:
        if intent.status == IntentStatus.UNKNOWN or (
            intent.status == IntentStatus.INTENDED and not run_alive
        ):
            uncertain.append(
                UncertainStep(
                    step_id=intent.step_id,
                    tool=intent.tool,
                    args=intent.args,
                    detail=plan_detail.get(intent.idempotency_key, ""),
                    idempotency_key=intent.idempotency_key,
                    status=IntentStatus(intent.status),
                    why=_uncertain_why(intent),
                    lookup_attempts=intent.lookup_attempts,
                    compensation=intent.pk in rows.compensation_intent_ids,
                )
            )
    return uncertain


def tool_error_words(intent: Intent) -> str:
    """What the agent reported of a call whose tool answered with an error that may not mean
    nothing happened (ok=false, error_class=ambiguous), or "" for any other row."""
    if intent.status != IntentStatus.INTENDED or intent.error_class != ErrorClass.AMBIGUOUS:
        return ""
    return words.tool_error_words(intent.outcome_summary)


def _uncertain_why(intent: Intent) -> str:
    if intent.verdict or intent.unknown_reason:
        return why_words.call_verdict_words(intent)
    if intent.status != IntentStatus.INTENDED:
        return ""
    return words.still_asking_words(tool_error_words(intent))


def _contradiction(rows: HandoverRows, intent: Intent | PerformedStep) -> Contradiction | None:
    """What contradicts a message reporting `intent`, if the rows prove something does: its undo
    went through (wholly or partly), or the step turned out not to have happened. A step still in
    doubt or with its undo under way proves nothing yet."""
    if intent.status in (IntentStatus.NOT_PERFORMED, IntentStatus.FAILED):
        return Contradiction(
            code=ContradictionCode.NOT_PERFORMED,
            step_id=intent.step_id,
            tool=intent.tool,
            undone_by="",
            why=words.contradiction_words(
                tool=intent.tool, status=intent.status, partly=False, undo_tool="", not_undone=""
            ),
        )
    compensation = rows.compensations.get(intent.pk)
    if intent.status != IntentStatus.PERFORMED or compensation is None or compensation.status not in UNDONE:
        return None
    undo = compensation.intent
    partly = compensation.status == CompensationStatus.PARTIAL
    why = words.contradiction_words(
        tool=intent.tool,
        status="",
        partly=partly,
        undo_tool=undo.tool if undo is not None else "",
        not_undone=why_words.not_undone_words(
            status=compensation.status, not_undone=compensation.not_undone, tool=intent.tool
        ),
    )
    return Contradiction(
        code=ContradictionCode.PARTLY_UNDONE if partly else ContradictionCode.UNDONE,
        step_id=intent.step_id,
        tool=intent.tool,
        undone_by=undo.step_id if undo is not None else "",
        why=why,
    )


def _contradicted(
    rows: HandoverRows, by_step: dict[str, Intent | PerformedStep], about: list[str]
) -> list[Contradiction]:
    found = (_contradiction(rows, by_step[s]) for s in about if s in by_step)
    return [c for c in found if c is not None]


def _recorded_messages(rows: HandoverRows, by_step: dict[str, Intent | PerformedStep]) -> list[CustomerTold]:
    """The messages the agent or a person recorded, each with who recorded it."""
    told_event = {
        e.data.get("message_id"): e for e in rows.events if e.kind == JournalEvent.Kind.CUSTOMER_TOLD
    }
    told = []
    for message in rows.messages:
        recorded = told_event.get(message.pk)
        staff = recorded is not None and recorded.actor_kind == ActorKind.USER
        about = list(message.about_steps or [])
        told.append(
            CustomerTold(
                at=message.told_at,
                channel=CustomerChannel(message.channel),
                body=message.body,
                source=CustomerToldSource.STAFF if staff else CustomerToldSource.AGENT,
                told_by=recorded.actor_name if recorded is not None else "",
                step_id="",
                tool="",
                about_steps=about,
                contradicted_by=_contradicted(rows, by_step, about),
            )
        )
    return told


def _tool_messages(rows: HandoverRows, by_step: dict[str, Intent | PerformedStep]) -> list[CustomerTold]:
    """The performed calls of tools declared customer-facing, each with the earlier performed
    steps of the tools it declares it announces."""
    first_event = _first_event_of_each_intent(rows)
    facing_of = {name: spec.customer_facing for name, spec in all_tools().items()}  # once, not per step
    told = []
    for intent in rows.steps:
        facing = facing_of.get(intent.tool)
        if facing is None or intent.status != IntentStatus.PERFORMED:
            continue
        if intent.pk in rows.compensation_intent_ids:
            continue
        about = _announced(rows, announces=facing.announces, before=_sent_at(intent))
        sent = first_event.get(intent.pk)
        told.append(
            CustomerTold(
                at=_settled_at(intent),
                channel=CustomerChannel(facing.channel),
                body=facing.describe(intent.args or {}, intent.receipt or {}),
                source=CustomerToldSource.TOOL,
                told_by=sent.actor_name if sent is not None else "",
                step_id=intent.step_id,
                tool=intent.tool,
                about_steps=about,
                contradicted_by=_contradicted(rows, by_step, about),
            )
        )
    return told


def _first_event_of_each_intent(rows: HandoverRows) -> dict[int, JournalEvent]:
    """intent id → the first event recorded of it: who sent the call."""
    first_event: dict[int, JournalEvent] = {}
    for event in rows.events:
        if event.intent_id is not None:
            first_event.setdefault(event.intent_id, event)
    return first_event


def _sent_at(step: Intent | PerformedStep) -> datetime:
    """When the step's call was recorded. A PerformedStep of a customer-facing tool, or of one
    such a tool announces, has its times read (handover.rows._detailed_tools)."""
    if step.intended_at is None:
        raise ValueError(f"the times of step {step.step_id} were not read")
    return step.intended_at


def _settled_at(step: Intent | PerformedStep) -> datetime:
    """When the step settled (when it was recorded, if that is not known)."""
    return step.settled_at or _sent_at(step)


def _announced(rows: HandoverRows, *, announces: tuple[str, ...], before: datetime) -> list[str]:
    """The step ids of the performed steps (not undos) of the tools in `announces` that had
    settled by `before`: what a customer-facing call sent then tells the customer about."""
    return [
        i.step_id
        for i in rows.steps
        if i.tool in announces
        and i.status == IntentStatus.PERFORMED
        and i.pk not in rows.compensation_intent_ids
        and _settled_at(i) <= before
    ]


def customer_told_list(rows: HandoverRows) -> list[CustomerTold]:
    """Everything the customer received: the messages the agent or a person recorded, and every
    performed call of a tool declared customer-facing (in the run or in a resumption). A message
    is flagged only through a link someone declared (the message's `about_steps`, the tool's
    `announces`), never one guessed from its words."""
    by_step = {i.step_id: i for i in rows.steps}
    told = _recorded_messages(rows, by_step) + _tool_messages(rows, by_step)
    return sorted(told, key=lambda t: t.at)


def already_so_steps(rows: HandoverRows, plan_detail: dict[str, str]) -> list[AlreadySoStep]:
    # Settled already_so by reconciliation's lookup, or by the send's own answer (its outcome).
    settling = (JournalEvent.Kind.INTENT_RECONCILED, JournalEvent.Kind.OUTCOME_RECORDED)
    evidence = {
        e.intent_id: e.data.get("evidence") or {}
        for e in rows.events
        if e.kind in settling and e.data.get("status") == IntentStatus.ALREADY_SO
    }
    return [
        AlreadySoStep(
            step_id=intent.step_id,
            tool=intent.tool,
            args=intent.args,
            detail=plan_detail.get(intent.idempotency_key, ""),
            idempotency_key=intent.idempotency_key,
            evidence_at=parse_datetime(str(evidence.get(intent.pk, {}).get("at") or "")),
            why=why_words.call_verdict_words(intent),
        )
        for intent in rows.intents
        if intent.status == IntentStatus.ALREADY_SO
    ]
