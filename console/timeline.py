"""The run page's timeline: each journal event said as what happened, like an event history
("reverse_credit failed: card refused", "issue_refund: sent, no answer"), with whether it went
well, badly or is in doubt, so a failure reads as one. Drawn from the rows the page already
loaded (handover.HandoverRows): no query of its own. What each event says is chosen
here as a code (handover.codes.TimelineSays) with its facts; handover.words says it.

The same call (tool and canonical arguments) failing the same way several times in a row is one
entry, "refund tried 7 times: the downstream system refused it for good", not fourteen: a loop
reads as a loop (handover.attempts counts it)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from handover import HandoverRows, why_words, words
from handover.codes import TimelineSays
from journal.keys import canonical_json
from journal.models import IntentStatus, JournalEvent, OutcomeReason


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
    # How many attempts of one call the entry stands for (repeated failures said once).
    attempts: int = 1


@dataclass(frozen=True)
class Said:
    """What an event says, as a code and the facts its words name (handover.words.timeline_text)."""

    says: TimelineSays
    outcome: str
    call: str = ""  # the call's tool by its label, "the undo of <label>" for an undo (words.call_words)
    undo: bool = False
    how: str = ""  # how a settlement was learnt: "asked" (a lookup), "marked" (a person), ""
    who_marked: str = ""
    detail: str = ""  # a reason, the tool's message or an error, as stored
    label: str = ""  # the event kind's label


# A settlement's status: what it says, and how it reads.
SETTLED_SAYS: dict[str, tuple[TimelineSays, str]] = {
    IntentStatus.PERFORMED: (TimelineSays.DONE, Outcome.DONE),
    IntentStatus.FAILED: (TimelineSays.FAILED, Outcome.FAILED),
    IntentStatus.NOT_PERFORMED: (TimelineSays.DID_NOT_HAPPEN, Outcome.FAILED),
    IntentStatus.ALREADY_SO: (TimelineSays.ALREADY_SO, Outcome.DONE),
    IntentStatus.UNKNOWN: (TimelineSays.UNKNOWN, Outcome.UNKNOWN),
}


def _reason(event: JournalEvent, status: str) -> str:
    """Why a call ended as it did: the tool's own summary when it is this settlement's, else its
    error class in words."""
    intent = event.intent
    summary = intent.outcome_summary.strip() if intent is not None and intent.status == status else ""
    error_class = str(event.data.get("error_class") or (intent.error_class if intent else "") or "")
    reason = words.ERROR_CLASS_REASONS.get(error_class)
    return summary or str(reason if reason is not None else words.NO_REASON_GIVEN)


def _settled(event: JournalEvent, data: dict[str, Any], call: str) -> Said:
    """An outcome recorded or found by a lookup: what became of the call, and who said so."""
    status = str(data.get("status") or "")
    how = ""
    if event.kind == JournalEvent.Kind.INTENT_RECONCILED:
        how = "asked"
    elif event.actor_kind == "user":
        how = "marked"
    says, outcome = SETTLED_SAYS.get(status, (TimelineSays.SETTLED_OTHERWISE, Outcome.NOTE))
    if says == TimelineSays.FAILED:
        detail = _reason(event, status)
    elif says == TimelineSays.UNKNOWN:
        # A verdict's code and facts; an event written before verdicts existed has its words.
        verdict = data.get("verdict")
        detail = why_words.verdict_words(verdict) if verdict else str(data.get("reason") or "")
    else:
        detail = status if says == TimelineSays.SETTLED_OTHERWISE else ""
    return Said(says, outcome, call=call, how=how, who_marked=event.actor_name, detail=detail)


def event_said(event: JournalEvent, compensations: set[int]) -> Said:
    """What one event says, and how it reads."""
    data: dict[str, Any] = event.data or {}
    tool = event.intent.tool if event.intent is not None else str(data.get("tool") or "")
    call = words.call_words(tool, undo=event.intent_id in compensations) if tool else ""
    kind = event.kind
    if kind == JournalEvent.Kind.INTENT_RECORDED:
        return Said(TimelineSays.ABOUT_TO_SEND, Outcome.NOTE, call=call)
    if kind in (JournalEvent.Kind.OUTCOME_RECORDED, JournalEvent.Kind.INTENT_RECONCILED):
        return _settled(event, data, call)
    if kind == JournalEvent.Kind.DISPATCH_AMBIGUOUS:
        # answered: the agent's report that the tool answered with an error
        says = TimelineSays.TOOL_ERROR_AMBIGUOUS if data.get("answered") else TimelineSays.SENT_NO_ANSWER
        return Said(says, Outcome.UNKNOWN, call=call, detail=str(data.get("message") or ""))
    if kind == JournalEvent.Kind.LOOKUP_FAILED:
        return Said(
            TimelineSays.LOOKUP_FAILED, Outcome.UNKNOWN, call=call, detail=str(data.get("error") or "")
        )
    if kind == JournalEvent.Kind.RUN_ESCALATED:
        reason = data.get("reason")
        label = str(OutcomeReason(reason).label) if reason in OutcomeReason.values else ""
        return Said(TimelineSays.ESCALATED, Outcome.UNKNOWN, detail=label)
    if kind in (JournalEvent.Kind.RUN_COMPLETED, JournalEvent.Kind.RUN_COMPENSATED):
        return Said(TimelineSays.RUN_ENDED, Outcome.DONE, label=str(event.get_kind_display()))
    return Said(TimelineSays.OTHER, Outcome.NOTE, call=call, label=str(event.get_kind_display()))


def _failed_attempt(events: list[JournalEvent], i: int, compensations: set[int]) -> tuple[Any, ...] | None:
    """What identifies a failed attempt starting at events[i] (its intent recorded, then its failure
    recorded), to group it with the same attempt repeated; None when events[i] starts none."""
    if i + 1 >= len(events):
        return None
    recorded, settled = events[i], events[i + 1]
    intent = recorded.intent
    if (
        intent is None
        or recorded.kind != JournalEvent.Kind.INTENT_RECORDED
        or settled.kind != JournalEvent.Kind.OUTCOME_RECORDED
        or settled.intent_id != recorded.intent_id
        or (settled.data or {}).get("status") != IntentStatus.FAILED
    ):
        return None
    return (
        intent.tool,
        canonical_json(intent.args),
        recorded.intent_id in compensations,
        _reason(settled, IntentStatus.FAILED),
    )


def _repeats(events: list[JournalEvent], i: int, compensations: set[int]) -> int:
    """How many failed attempts of the same call, failing the same way, follow in a row from events[i]."""
    first = _failed_attempt(events, i, compensations)
    if first is None:
        return 0
    count = 1
    while _failed_attempt(events, i + 2 * count, compensations) == first:
        count += 1
    return count


def _entry(event: JournalEvent, said: Said) -> TimelineEntry:
    return TimelineEntry(
        at=event.at,
        kind=event.kind,
        text=words.timeline_text(said),
        outcome=said.outcome,
        who=words.actor_words(event.actor_kind, event.actor_name),
        step_id=event.intent.step_id if event.intent is not None else "",
    )


def _tried(events: list[JournalEvent], count: int, compensations: set[int]) -> TimelineEntry:
    """`count` failed attempts of one call as one entry, at the last failure."""
    last = events[-1]
    said = event_said(last, compensations)
    return replace(
        _entry(last, said),
        text=words.tried_text(call=said.call, count=count, detail=said.detail),
        attempts=count,
    )


def timeline_of(rows: HandoverRows) -> list[TimelineEntry]:
    """Every event of the run, oldest first, as the page says it; the same call failing the same
    way more than once in a row as one entry."""
    entries = []
    events = rows.events
    compensations = rows.compensation_intent_ids
    i = 0
    while i < len(events):
        count = _repeats(events, i, compensations)
        if count > 1:
            entries.append(_tried(events[i : i + 2 * count], count, compensations))
            i += 2 * count
            continue
        entries.append(_entry(events[i], event_said(events[i], compensations)))
        i += 1
    return entries
