"""The run page's timeline: each journal event said as what happened, like an event history
("reverse_credit failed: card refused", "issue_refund: sent, no answer"), with whether it went
well, badly or is in doubt, so a failure reads as one. Drawn from the rows the page already
loaded (handover.handover.HandoverRows): no query of its own."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from journal.models import IntentStatus, JournalEvent, OutcomeReason

from .handover import HandoverRows

# A failed call's error class, in words, for when the tool gave no summary of its own.
ERROR_WORDS = {
    "invalid_input": "the downstream system refused the arguments",
    "conflict": "it conflicts with what the downstream system holds",
    "transient": "a temporary error; it may work if tried again",
    "ambiguous": "no answer after sending, so it may or may not have happened",
    "permanent": "the downstream system refused it for good",
    "bug": "the answer was not what the tool expects",
}


class Outcome:
    """How an entry reads: its CSS class on the page."""

    DONE = "done"
    FAILED = "failed"
    UNKNOWN = "unknown"
    NOTE = ""


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: str
    text: str
    outcome: str
    who: str
    step_id: str = ""


def _reason(event: JournalEvent, status: str) -> str:
    """Why a call ended as it did: the tool's own summary when it is this settlement's, else its
    error class in words."""
    intent = event.intent
    summary = intent.outcome_summary.strip() if intent is not None and intent.status == status else ""
    error_class = str(event.data.get("error_class") or (intent.error_class if intent else "") or "")
    words = summary or ERROR_WORDS.get(error_class, "")
    return words or "no reason was given"


def _said(event: JournalEvent, compensations: set[int]) -> tuple[str, str]:
    """(words, outcome) of one event."""
    data: dict[str, Any] = event.data or {}
    tool = event.intent.tool if event.intent is not None else str(data.get("tool") or "")
    undo = event.intent_id in compensations
    call = f"undo {tool}" if undo else tool
    kind = event.kind
    if kind == JournalEvent.Kind.INTENT_RECORDED:
        return f"{call}: about to be sent", Outcome.NOTE
    if kind in (JournalEvent.Kind.OUTCOME_RECORDED, JournalEvent.Kind.INTENT_RECONCILED):
        status = str(data.get("status") or "")
        by_lookup = " (the downstream system, asked)" if kind == JournalEvent.Kind.INTENT_RECONCILED else ""
        by_person = f" (marked by {event.actor_name})" if event.actor_kind == "user" else ""
        how = by_lookup or by_person
        if status == IntentStatus.PERFORMED:
            return f"{call} done{how}", Outcome.DONE
        if status == IntentStatus.FAILED:
            return f"{call} failed{how}: {_reason(event, status)}", Outcome.FAILED
        if status == IntentStatus.NOT_PERFORMED:
            return f"{call} did not happen{how}", Outcome.FAILED
        if status == IntentStatus.ALREADY_SO:
            return f"{call} was already so before the run{how}", Outcome.DONE
        if status == IntentStatus.UNKNOWN:
            reason = str(data.get("reason") or "")
            return f"{call}: whether it happened is unknown{how}" + (
                f": {reason}" if reason else ""
            ), Outcome.UNKNOWN
        return f"{call}: {status or 'settled'}{how}", Outcome.NOTE
    if kind == JournalEvent.Kind.DISPATCH_AMBIGUOUS:
        message = str(data.get("message") or "")
        if data.get("answered"):  # the agent's report: the tool answered with an error
            return (
                f"{call}: the tool answered with an error, whether it acted is unknown"
                + (f" ({message})" if message else ""),
                Outcome.UNKNOWN,
            )
        return f"{call}: sent, no answer" + (f" ({message})" if message else ""), Outcome.UNKNOWN
    if kind == JournalEvent.Kind.LOOKUP_FAILED:
        error = str(data.get("error") or "")
        return f"{call}: asking the downstream system failed" + (
            f": {error}" if error else ""
        ), Outcome.UNKNOWN
    if kind == JournalEvent.Kind.RUN_ESCALATED:
        reason = OutcomeReason(data["reason"]).label if data.get("reason") in OutcomeReason.values else ""
        return "Run escalated to a person" + (f": {reason}" if reason else ""), Outcome.UNKNOWN
    if kind in (JournalEvent.Kind.RUN_COMPLETED, JournalEvent.Kind.RUN_COMPENSATED):
        return event.get_kind_display(), Outcome.DONE
    label = event.get_kind_display()
    return (f"{label}: {call}" if tool else label), Outcome.NOTE


def _who(event: JournalEvent) -> str:
    """Who: a person by name; the agent; Seam's own workers as Seam."""
    if event.actor_kind == "user":
        return event.actor_name
    return "the agent" if event.actor_kind == "agent" else "Seam"


def timeline_of(rows: HandoverRows) -> list[TimelineEntry]:
    """Every event of the run, oldest first, as the page says it."""
    entries = []
    for event in rows.events:
        text, outcome = _said(event, rows.compensation_intent_ids)
        entries.append(
            TimelineEntry(
                at=event.at,
                kind=event.kind,
                text=text,
                outcome=outcome,
                who=_who(event),
                step_id=event.intent.step_id if event.intent is not None else "",
            )
        )
    return entries
