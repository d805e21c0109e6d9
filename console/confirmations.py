"""What each staff action's confirmation says before the click: its effects, what cannot be
taken back, what stops it now, and the inputs it needs. One function per run action, named for
it and given to its entry of the registry (console.staff_actions), so no code chooses the words
by the action's name. Each is called as `confirm(run, rows, step_id)` with the rows the page
already loaded (one load per request); one that needs every step reads them again only when the
page's were cut to their first items. The words are handover.words'."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from compensations.mapping import MappingError, compensation_args
from compensations.selectors import catalogue_entry_for, steps_to_undo
from handover import (
    HandoverRows,
    ReversibilityNow,
    handover_build,
    handover_rows,
    reversibility,
    undo_unbuildable,
    warnings_for,
    words,
)
from handover.attempts import is_looping
from journal import attempts
from journal.models import Intent, IntentStatus, JournalEvent, Run, RunStatus

from .actions import resume_preview


@dataclass(frozen=True)
class Confirmation:
    """What an action will do, in words, before the click: its effects, what cannot be taken
    back, and the inputs it needs."""

    title: str
    effects: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    step_id: str = ""
    needs_note: bool = False
    needs_message: bool = False
    button: str = field(default_factory=lambda: str(words.CONFIRM))
    # The raw facts behind the sentences (step ids, keys, arguments), which the dialog keeps
    # inside a closed "Details" disclosure, never in the sentences themselves.
    details: list[str] = field(default_factory=list)


# A run action's confirmation: `confirm(run, rows, step_id)`.
type Confirm = Callable[[Run, HandoverRows, str], Confirmation]


def whole_rows(run: Run, rows: HandoverRows | None) -> HandoverRows:
    """The page's rows, unless they were cut to its first items: a step past them, or every
    step, is asked about here."""
    if rows is None or not rows.complete:
        return handover_rows(run)
    return rows


def _step(rows: HandoverRows, step_id: str) -> Intent | None:
    return next((i for i in rows.intents if i.step_id == step_id), None) if step_id else None


def _high_value(args: dict[str, Any]) -> list[str]:
    """'high value: …' when the call moves at least settings.SEAM_HIGH_VALUE_AMOUNT."""

    return warnings_for(tool="", args=args, reversible=ReversibilityNow.yes())


def _undo_words(intent: Intent) -> tuple[str, list[str], list[str]]:
    """The compensating call a step's undo will send, its warnings, and its raw details (the
    step's id, the undo's arguments)."""

    entry = catalogue_entry_for(tenant_id=intent.run.tenant_id, tool=intent.tool)
    reversible = reversibility(entry, intent, timezone.now())
    tool = words.tool_words(intent.tool)
    details = words.step_details(step_id=intent.step_id)
    if entry is None or not reversible.can_undo:
        notes = entry.staff_notes if entry and entry.staff_notes else str(words.PUT_RIGHT_BY_HAND)
        return (
            words.say(words.NOTHING_UNDOES, tool=tool, notes=notes),
            [words.say(words.IRREVERSIBLE_STEP, tool=tool)],
            details,
        )
    try:
        args = compensation_args(entry, intent.args, intent.receipt)
    except MappingError as exc:
        undo_tool = words.tool_words(entry.compensating_tool)
        return words.say(words.UNDO_CANNOT_BE_BUILT, undo_tool=undo_tool, error=exc), [str(exc)], details
    warnings = [reversible.sentence] if reversible.loses else []
    warnings += _high_value(intent.args)
    effect = words.undo_call_words(undo_tool=entry.compensating_tool, tool=intent.tool, reversible=reversible)
    return effect, warnings, words.step_details(step_id=intent.step_id, args=args)


# --- one per run action -----------------------------------------------------------------------


def assign_to_me(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    title, effect, button = words.ASSIGN_TO_ME
    return Confirmation(str(title), [str(effect)], button=str(button))


def assign_to_colleague(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    title, effect, button = words.ASSIGN_TO_COLLEAGUE
    return Confirmation(str(title), [str(effect)], button=str(button))


def resume(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    preview = resume_preview(run, whole_rows(run, rows))
    effects = [words.resume_step_words(s) for s in preview.steps]
    effects += edited_args_words(run, preview.steps)
    details = [
        f"{words.tool_label(s['tool'])}: " + "; ".join(words.step_details(key=s["key"]))
        for s in preview.steps
        if s.get("key")
    ]
    warnings = list(preview.warnings)
    for planned in preview.steps:
        if planned["action"] == "send":
            plan_entry: dict[str, Any] = next((p for p in run.plan if p.get("tool") == planned["tool"]), {})
            amount = (plan_entry.get("args") or {}).get("amount")
            if amount is not None:
                high = _high_value(plan_entry.get("args") or {})
                template = words.HIGH_VALUE_STEP if high else words.MOVES_MONEY
                warnings.append(words.say(template, tool=words.tool_words(planned["tool"]), amount=amount))
    title, button = words.RESUME_RUN
    return Confirmation(
        str(title), effects, warnings, list(preview.blockers), button=str(button), details=details
    )


def compensate_run(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    rows = whole_rows(run, rows)
    steps = steps_to_undo(
        reversed(rows.intents),
        compensation_intent_ids=rows.compensation_intent_ids,
        compensations=rows.compensations,
    )
    effects, warnings, details = [], [], []
    for performed_step in steps:
        effect, more, raw = _undo_words(performed_step)
        effects.append(effect)
        warnings += more
        details.append(f"{words.tool_label(performed_step.tool)}: " + "; ".join(raw))
    blockers = [] if steps else [str(words.NOTHING_LEFT_TO_UNDO)]
    title, button = words.COMPENSATE_RUN
    return Confirmation(str(title), effects, warnings, blockers, button=str(button), details=details)


def customer_told(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    title, effect, button = words.CUSTOMER_TOLD
    return Confirmation(str(title), [str(effect)], needs_message=True, button=str(button))


def resolve(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    handover = handover_build(whole_rows(run, rows))
    warnings = [
        words.say(words.NOT_DONE_WARNING, tool=words.tool_words(n.tool)) for n in handover.not_done
    ] + [words.say(words.STILL_UNCERTAIN_WARNING, tool=words.tool_words(u.tool)) for u in handover.uncertain]
    effect = words.RESOLVE_CANCELS if run.status == RunStatus.RUNNING else words.RESOLVE_CLOSES
    title, button = words.RESOLVE
    return Confirmation(str(title), [str(effect)], warnings, needs_note=True, button=str(button))


def compensate_step(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    rows = whole_rows(run, rows)
    intent = _step(rows, step_id)
    if intent is None:
        return Confirmation(str(words.COMPENSATE_A_STEP), blockers=[words.no_step_words(step_id)])
    effect, warnings, details = _undo_words(intent)
    step = words.step_named(intent.tool, intent.step_id)
    blockers = (
        []
        if intent.status == IntentStatus.PERFORMED
        else [words.say(words.STEP_IS, step=step, status=intent.status)]
    )
    entry = rows.catalogue.get(intent.tool)
    unbuildable = undo_unbuildable(entry, intent) if entry and entry.compensating_tool else ""
    if unbuildable:
        # Sent anyway (the API, a page drawn before), it would end as a dead letter.
        blockers.append(words.say(words.UNDO_BLOCKED, why=unbuildable))
    title, button = words.COMPENSATE_STEP
    return Confirmation(
        words.say(title, tool=words.tool_words(intent.tool)),
        [effect],
        warnings,
        blockers,
        step_id=step_id,
        button=str(button),
        details=details,
    )


def retry_lookup(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    intent = _step(whole_rows(run, rows), step_id)
    if intent is None:
        return Confirmation(str(words.RETRY_LOOKUP), blockers=[words.no_step_words(step_id)])
    title, effect, button = words.ASK_AGAIN
    tool = words.tool_words(intent.tool)
    return Confirmation(
        words.say(title, tool=tool),
        [words.say(effect, tool=tool)],
        step_id=step_id,
        button=str(button),
        details=words.step_details(step_id=intent.step_id, key=intent.idempotency_key, args=intent.args),
    )


def mark(*, performed: bool) -> Confirm:
    """The confirmation of a person's judgement of an uncertain step: it happened, or it did not."""
    title, effect, button = words.MARK[performed]

    def confirm(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
        intent = _step(whole_rows(run, rows), step_id)
        if intent is None:
            return Confirmation(str(words.SETTLE_A_STEP), blockers=[words.no_step_words(step_id)])
        step = words.step_named(intent.tool, intent.step_id)
        return Confirmation(
            words.say(title, tool=words.tool_words(intent.tool)),
            [words.say(effect, step=step), str(words.NOT_ASKED_AGAIN)],
            [str(words.YOUR_JUDGEMENT)],
            step_id=step_id,
            needs_note=True,
            button=str(button),
            details=words.step_details(step_id=intent.step_id, key=intent.idempotency_key, args=intent.args),
        )

    return confirm


def allow_again(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    rows = whole_rows(run, rows)
    intent = _step(rows, step_id)
    if intent is None:
        return Confirmation(str(words.ALLOW_A_CALL), blockers=[words.no_step_words(step_id)])
    title, effect, button = words.ALLOW_AGAIN
    failed = [i for i in rows.intents if i.status == IntentStatus.FAILED and i.tool == intent.tool]
    code = attempts.allowable_steps(run, failed).get(step_id)
    blockers = (
        [] if code is not None else [words.say(words.ALLOW_NOT_REFUSED, step=words.step_words(step_id))]
    )
    warnings = [str(words.ALLOW_FIX_FIRST)]
    if is_looping(run.outcome_why) and run.status != RunStatus.RUNNING:
        warnings.append(str(words.ALLOW_LOOPING_STAYS))
    return Confirmation(
        words.say(title, tool=words.tool_words(intent.tool)),
        [words.say(effect, tool=words.tool_words(intent.tool), failed=words.ALLOW_FAILED.get(code, ""))]
        if code is not None
        else [],
        warnings,
        blockers,
        step_id=step_id,
        button=str(button),
        details=words.step_details(step_id=intent.step_id, key=intent.idempotency_key, args=intent.args),
    )


def _args_said(args: dict[str, Any]) -> str:
    return ", ".join(f"{name} {value}" for name, value in args.items()) or "no arguments"


def edited_args_words(run: Run, steps: list[dict[str, Any]]) -> list[str]:
    """For each step a resume sends with arguments a person edited (journal.step_edits), the
    arguments it is sent with and what they were: read from the edits' events, one query."""
    edits = {
        event.data.get("new_key"): event
        for event in run.events.filter(kind=JournalEvent.Kind.STEP_ARGS_EDITED).order_by("id")
    }
    said = []
    for step in steps:
        event = edits.get(step["key"])
        if event is None or step["action"] != "send":
            continue
        old, new = event.data.get("old_args", {}), event.data.get("new_args", {})
        changed = [
            f"{name} was {old.get(name, '—')}" for name in {**old, **new} if old.get(name) != new.get(name)
        ]
        said.append(
            f"{words.tool_words(step['tool'])} is sent with the arguments {words.who(event.actor_name)} edited: "
            f"{_args_said(new)} ({'; '.join(changed)})"
        )
    return said
