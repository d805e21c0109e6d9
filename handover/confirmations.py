"""What each staff action's confirmation says before the click: its effects, what cannot be
taken back, what stops it now, and the inputs it needs. One function per run action, named for
it and given to its entry of the registry (handover.staff_actions), so no code chooses the words
by the action's name. Each is called as `confirm(run, rows, step_id)` with the rows the page
already loaded (one load per request); one that needs every step reads them again only when the
page's were cut to their first items."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from compensations.mapping import MappingError, compensation_args
from compensations.selectors import catalogue_entry_for
from journal.models import Intent, IntentStatus, Run, RunStatus

from .actions import resume_preview
from .handover import (
    HandoverRows,
    ReversibilityNow,
    handover_build,
    handover_rows,
    reversibility,
    undo_unbuildable,
    warnings_for,
)


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
    button: str = "Confirm"


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


def _undo_words(intent: Intent) -> tuple[str, list[str]]:
    """The compensating call a step's undo will send, and its warnings."""

    entry = catalogue_entry_for(tenant_id=intent.run.tenant_id, tool=intent.tool)
    reversible = reversibility(entry, intent, timezone.now())
    if entry is None or not reversible.can_undo:
        notes = entry.staff_notes if entry and entry.staff_notes else "a person must put it right by hand"
        return f"nothing undoes {intent.tool}: {notes}", [f"irreversible: {intent.tool}"]
    try:
        args = compensation_args(entry, intent.args, intent.receipt)
    except MappingError as exc:
        return f"{entry.compensating_tool} cannot be built: {exc}", [str(exc)]
    words = ", ".join(f"{k}={v}" for k, v in args.items())
    warnings = [reversible.sentence] if reversible.loses else []
    warnings += _high_value(intent.args)
    when = f" (reversible {reversible.sentence})" if reversible.conditional else ""
    return f"send {entry.compensating_tool}({words}) to undo {intent.tool}{when}", warnings


# --- one per run action -----------------------------------------------------------------------


def assign_to_me(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    return Confirmation("Assign to me", ["you become the run's assignee"], button="Assign to me")


def assign_to_colleague(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    return Confirmation(
        "Assign to a colleague",
        ["the colleague you choose becomes the run's assignee; the audit says you assigned them"],
        button="Assign",
    )


def resume(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    preview = resume_preview(run, whole_rows(run, rows))
    effects = [
        f"{s['action']} {s['tool']}"
        + (f" ({s['detail']})" if s["detail"] else "")
        + f" — key {s['key'][:16]}…: {s['why']}"
        for s in preview.steps
    ]
    warnings = list(preview.warnings)
    for planned in preview.steps:
        if planned["action"] == "send":
            plan_entry: dict[str, Any] = next((p for p in run.plan if p.get("tool") == planned["tool"]), {})
            amount = (plan_entry.get("args") or {}).get("amount")
            if amount is not None:
                high = _high_value(plan_entry.get("args") or {})
                warnings.append(f"{'high value' if high else 'moves money'}: {planned['tool']} {amount}")
    return Confirmation("Resume the run", effects, warnings, list(preview.blockers), button="Resume")


def compensate_run(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    rows = whole_rows(run, rows)
    steps = [
        i
        for i in reversed(rows.intents)
        if i.status == IntentStatus.PERFORMED and i.pk not in rows.compensation_intent_ids
    ]
    effects, warnings = [], []
    for performed_step in steps:
        effect, more = _undo_words(performed_step)
        effects.append(effect)
        warnings += more
    blockers = [] if steps else ["nothing this run did is left to undo"]
    return Confirmation(
        "Compensate the whole run, newest step first", effects, warnings, blockers, button="Compensate all"
    )


def customer_told(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    return Confirmation(
        "Record what the customer was told",
        ["added to the customer-told list every later handover shows"],
        needs_message=True,
        button="Record",
    )


def resolve(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    handover = handover_build(whole_rows(run, rows))
    warnings = [f"not done: {n.tool}" for n in handover.not_done] + [
        f"still uncertain: {u.tool}" for u in handover.uncertain
    ]
    effect = (
        "the run is ended as cancelled and leaves the queue"
        if run.status == RunStatus.RUNNING
        else "the escalation is closed and the run leaves the queue"
    )
    return Confirmation("Resolve", [effect], warnings, needs_note=True, button="Resolve")


def compensate_step(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    rows = whole_rows(run, rows)
    intent = _step(rows, step_id)
    if intent is None:
        return Confirmation("Compensate a step", blockers=[f"no step {step_id!r}"])
    effect, warnings = _undo_words(intent)
    step_words = f"{intent.tool} ({intent.step_id})"
    blockers = [] if intent.status == IntentStatus.PERFORMED else [f"{step_words} is {intent.status}"]
    entry = rows.catalogue.get(intent.tool)
    unbuildable = undo_unbuildable(entry, intent) if entry and entry.compensating_tool else ""
    if unbuildable:
        # Sent anyway (the API, a page drawn before), it would end as a dead letter.
        blockers.append(f"the undo cannot be built: {unbuildable}")
    return Confirmation(
        f"Compensate {intent.tool}", [effect], warnings, blockers, step_id=step_id, button="Compensate"
    )


def retry_lookup(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
    intent = _step(whole_rows(run, rows), step_id)
    if intent is None:
        return Confirmation("Retry the lookup", blockers=[f"no step {step_id!r}"])
    return Confirmation(
        f"Ask again whether {intent.tool} happened",
        [f"the downstream is asked whether {intent.tool} happened; nothing is sent to it"],
        step_id=step_id,
        button="Ask again",
    )


def mark(*, performed: bool) -> Confirm:
    """The confirmation of a person's judgement of an uncertain step: it happened, or it did not."""
    said = "performed" if performed else "not performed"

    def confirm(run: Run, rows: HandoverRows, step_id: str) -> Confirmation:
        intent = _step(whole_rows(run, rows), step_id)
        if intent is None:
            return Confirmation("Settle a step", blockers=[f"no step {step_id!r}"])
        step_words = f"{intent.tool} ({intent.step_id})"
        effect = (
            f"{step_words} is recorded as performed: it counts as done, and can then be compensated"
            if performed
            else f"{step_words} is recorded as not performed: resuming will send it with its key"
        )
        return Confirmation(
            f"Mark {intent.tool} {said}",
            [effect, "reconciliation will not ask about it again"],
            ["this is your judgement, recorded with your name and note"],
            step_id=step_id,
            needs_note=True,
            button=f"Mark {said}",
        )

    return confirm
