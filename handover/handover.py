"""The handover: what a person needs to finish a run the agent could not, generated from the rows
(intent rows and their receipts, the plan, the compensation catalogue, what the customer was
told), never summarised by a model. The REST endpoint and the run page show the same object.

    completed      every write that happened, with what the downstream said and whether (and
                   until when) it can still be taken back
    not_done       planned writes that never happened
    uncertain      writes nobody can say happened or not, with the key to ask about
    customer_told  what the customer already knows
    next_action    a concrete suggestion, by rules, from the four lists above
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.db.models import Max
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from compensations.models import CatalogueEntry, Compensation, Reversibility
from fanout.selectors import run_coverage
from journal.models import CustomerMessage, Intent, IntentStatus, JournalEvent, Run, RunStatus
from journal.selectors import compensation_intent_ids_in, plan_with_keys
from tools.registry import UnknownTool, get_tool

from .models import AuditEntry

HANDOVER_VERSION = "1"


@dataclass
class HandoverRows:
    """Everything the handover is generated from, loaded in a fixed number of queries."""

    run: Run
    intents: list[Intent]
    messages: list[CustomerMessage]
    events: list[JournalEvent]
    audit: list[AuditEntry]
    compensations: dict[int, Any]  # original intent id → its live Compensation
    catalogue: dict[str, Any]  # tool → CatalogueEntry
    compensation_intent_ids: set[int] = field(default_factory=set)
    coverage: dict[str, Any] | None = None


def handover_rows(run: Run) -> HandoverRows:
    """Load a run's rows for its handover: intents, messages, journal events (with who), audit
    entries, compensations (with dead letters) and the catalogue entries of its tools."""

    intents = list(run.intents.order_by("intended_at", "id"))
    messages = list(run.customer_messages.order_by("told_at", "id"))
    events = list(run.events.select_related("intent").order_by("at", "id"))
    audit = list(run.audit_entries.order_by("seq"))
    # The newest compensation of each step wins: a `not_possible` record followed by a live one
    # (after an admin fixed the catalogue) shows the live one.
    compensations = {
        c.original_id: c
        for c in Compensation.objects.filter(original__run=run)
        .select_related("dead_letter__owner")
        .order_by("id")
    }
    tools = {i.tool for i in intents} | {step.get("tool", "") for step in run.plan}
    catalogue = {e.tool: e for e in CatalogueEntry.objects.filter(tool__in=tools)}
    compensation_intent_ids = compensation_intent_ids_in(events)
    return HandoverRows(
        run=run,
        intents=intents,
        messages=messages,
        events=events,
        audit=audit,
        compensations=compensations,
        catalogue=catalogue,
        compensation_intent_ids=compensation_intent_ids,
        coverage=_coverage(run),
    )


def _coverage(run: Run) -> dict[str, Any] | None:
    """A fan-out's coverage, when the run had one."""
    result: dict[str, Any] | None = run_coverage(run)
    return result


# --- reading receipts and the catalogue -------------------------------------------------------


def _when(value: Any) -> str:
    """A receipt's date or datetime as a person reads it; anything else as it is."""
    if isinstance(value, str):
        # A plain date first: Python's ISO parser would read "2026-12-01" as a naive midnight.
        day = parse_date(value) if len(value) == 10 else None
        if day is not None:
            return day.strftime("%a %d %b")
        moment = parse_datetime(value)
        if moment is not None and timezone.is_aware(moment):
            return timezone.localtime(moment).strftime("%a %d %b %H:%M")
    return str(value)


def receipt_detail(intent: Intent) -> str:

    readable = {k: _when(v) if isinstance(v, str) else v for k, v in (intent.receipt or {}).items()}
    try:
        return get_tool(intent.tool).describe_receipt(readable)
    except UnknownTool:
        return ", ".join(f"{k} {v}" for k, v in readable.items())


def _deadline_of(entry: Any, receipt: dict[str, Any]) -> datetime | None:
    if not entry.deadline_field:
        return None
    raw = receipt.get(entry.deadline_field)
    return parse_datetime(raw) if isinstance(raw, str) else None


def reversibility(entry: Any, intent: Intent, now: datetime) -> bool | str:
    """true, false, or the condition and deadline in words ("until collection", "recallable
    until Sun 29 Nov 18:00", "partially: the 7.50 GBP recall fee is lost")."""

    if entry is None or entry.reversibility == Reversibility.NONE or not entry.compensating_tool:
        return False
    if entry.reversibility == Reversibility.REVERSIBLE:
        return True
    if entry.reversibility == Reversibility.PARTIAL:
        return f"partially: {entry.loss or 'not everything'} is lost"
    deadline = _deadline_of(entry, intent.receipt or {})
    if deadline is not None:
        words = f"until {timezone.localtime(deadline):%a %d %b %H:%M}"
        if deadline <= now:
            return f"partially: past its deadline, {entry.loss} is lost" if entry.loss else False
        return f"{words}; after that {entry.loss} is lost" if entry.loss else words
    return entry.until_condition or True


# --- the lists --------------------------------------------------------------------------------


def _money(args: dict[str, Any]) -> Decimal:
    try:
        return Decimal(str(args.get("amount", "0")))
    except InvalidOperation:
        return Decimal(0)


def _warnings(*, tool: str, args: dict[str, Any], reversible: bool | str) -> list[str]:
    """What a person must know before the click: money above the high-value threshold, and
    effects nothing (or only part) can take back."""
    warnings = []
    amount = _money(args)
    if amount >= Decimal(str(settings.SEAM_HIGH_VALUE_AMOUNT)):
        warnings.append(f"high value: {amount} {args.get('currency', '')}".strip())
    if reversible is False:
        warnings.append(f"irreversible: nothing undoes {tool}")
    elif isinstance(reversible, str) and reversible.startswith("partially"):
        warnings.append(reversible)
    return warnings


def _completed(rows: HandoverRows, plan_detail: dict[str, str], now: datetime) -> list[dict[str, Any]]:
    completed = []
    for intent in rows.intents:
        if intent.status != IntentStatus.PERFORMED or intent.pk in rows.compensation_intent_ids:
            continue
        entry = rows.catalogue.get(intent.tool)
        reversible = reversibility(entry, intent, now)
        compensation = rows.compensations.get(intent.pk)
        detail = receipt_detail(intent)
        if plan_detail.get(intent.idempotency_key) and not detail:
            detail = plan_detail[intent.idempotency_key]
        item: dict[str, Any] = {
            "step_id": intent.step_id,
            "tool": intent.tool,
            "at": timezone.localtime(intent.settled_at or intent.intended_at).strftime("%H:%M:%S"),
            "settled_at": (intent.settled_at or intent.intended_at).isoformat(),
            "detail": detail,
            "reversible": reversible,
            "receipt": intent.receipt,
            "undo_tool": entry.compensating_tool if entry and reversible is not False else "",
            "compensation": None,
            "warnings": []
            if compensation is not None
            else _warnings(tool=intent.tool, args=intent.args, reversible=reversible),
        }
        if compensation is not None:
            dead_letter = getattr(compensation, "dead_letter", None)
            item["compensation"] = {
                "id": compensation.pk,
                "status": compensation.status,
                "not_undone": compensation.not_undone,
                "dead_letter": dead_letter.pk if dead_letter is not None else None,
            }
        completed.append(item)
    return completed


NOT_DONE_WHY: dict[str | None, str] = {
    None: "never attempted",
    IntentStatus.NOT_PERFORMED: "not performed: the downstream has no record of it",
    IntentStatus.FAILED: "failed",
}


def _not_done(rows: HandoverRows, planned: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_key = {i.idempotency_key: i for i in rows.intents}
    not_done = []
    for step in planned:
        intent = by_key.get(step["key"])
        status = intent.status if intent is not None else None
        if status not in NOT_DONE_WHY:
            continue  # performed, or in doubt (listed as uncertain)
        why = NOT_DONE_WHY[status]
        if intent is not None and status == IntentStatus.FAILED:
            why = f"failed ({intent.error_class or 'unknown class'}): {intent.outcome_summary}"
        not_done.append(
            {
                "tool": step["tool"],
                "detail": step.get("detail", ""),
                "args": step.get("args", {}),
                "idempotency_key": step["key"],
                "why": why,
                "step_id": intent.step_id if intent is not None else "",
            }
        )
    return not_done


def _uncertain(rows: HandoverRows, plan_detail: dict[str, str]) -> list[dict[str, Any]]:
    """Rows whose outcome is unknown, and rows still open on a run nobody is running."""
    run_alive = rows.run.status == RunStatus.RUNNING and not run_is_stuck(rows.run)
    uncertain = []
    for intent in rows.intents:
        if intent.status == IntentStatus.UNKNOWN or (
            intent.status == IntentStatus.INTENDED and not run_alive
        ):
            uncertain.append(
                {
                    "step_id": intent.step_id,
                    "tool": intent.tool,
                    "args": intent.args,
                    "detail": plan_detail.get(intent.idempotency_key, ""),
                    "idempotency_key": intent.idempotency_key,
                    "status": intent.status,
                    "why": intent.unknown_reason
                    or (
                        "reconciliation is still asking the downstream"
                        if intent.status == IntentStatus.INTENDED
                        else ""
                    ),
                    "lookup_attempts": intent.lookup_attempts,
                    "compensation": intent.pk in rows.compensation_intent_ids,
                }
            )
    return uncertain


def run_is_stuck(run: Run, now: datetime | None = None) -> bool:
    """A running run whose agent has been silent past the stale threshold."""
    if run.status != RunStatus.RUNNING:
        return False
    quiet = timedelta(seconds=settings.SEAM_STALE_AFTER_SECONDS)
    last = run.last_heartbeat_at or run.created_at
    return last < (now or timezone.now()) - quiet


def _words(tool: str) -> str:
    return tool.replace("_", " ")


UNDONE = ("done", "partial")  # compensation statuses after which a step no longer stands

# What a run that ended with nobody waiting on it is, in the next-action box's words.
CLOSED_SAYS: dict[str, str] = {
    RunStatus.COMPLETED: "the run completed",
    RunStatus.CANCELLED: "the run was cancelled",
    RunStatus.ESCALATED: "its escalation was resolved",
    RunStatus.COMPENSATED: "the run was compensated and its escalation resolved",
}


def next_action(
    *,
    run: Run,
    completed: list[dict[str, Any]],
    not_done: list[dict[str, Any]],
    uncertain: list[dict[str, Any]],
) -> dict[str, Any]:
    """A concrete suggestion, by rules, in order: settle what is uncertain first (nothing else is
    safe until then); then finish what was not done or undo what was; a failed undo goes to its
    dead letter; a run that did everything only needs closing; a run that ended with nobody waiting
    on it needs nothing (`waiting` is then false)."""
    available = [
        {
            "step_id": c["step_id"],
            "tool": c["tool"],
            "undo_tool": c["undo_tool"],
            "reversible": c["reversible"],
        }
        for c in completed
        if c["undo_tool"] and c["compensation"] is None
    ]
    failed_undo = [c for c in completed if c["compensation"] and c["compensation"]["dead_letter"]]
    undone = [c for c in completed if c["compensation"] and c["compensation"]["status"] in UNDONE]
    pending_undo = [c for c in completed if c["compensation"] and c["compensation"]["status"] == "pending"]
    standing = [c for c in completed if c not in undone]
    ended_unattended = run.status != RunStatus.RUNNING and not run.awaiting_person
    if uncertain:
        first = uncertain[0]
        text = (
            f"find out whether {_words(first['tool'])} happened before anything else: retry the lookup of "
            f"key {first['idempotency_key'][:12]}…, or mark it performed or not performed with a note"
        )
    elif failed_undo:
        text = "; ".join(
            f"undoing {_words(c['tool'])} failed: take its dead letter and finish it by hand"
            for c in failed_undo
        )
    elif pending_undo:
        text = f"wait: undoing {', '.join(_words(c['tool']) for c in pending_undo)} is in progress"
    elif ended_unattended:
        # Ended, and no escalation is open: advice to resume or resolve would name buttons the
        # page no longer offers. Undoing a step stays possible (a customer may change their mind).
        text = f"nothing waits on a person: {CLOSED_SAYS.get(run.status, f'the run is {run.status}')}"
        if undone:
            text += f"; undone since: {', '.join(_words(c['tool']) for c in undone)}"
        if available:
            text += "; a step it did can still be undone below if the customer asks"
    elif undone and not standing:
        partly = [c for c in undone if c["compensation"]["status"] == "partial"]
        text = "everything the run did was undone"
        if partly:
            text += " (partly: " + "; ".join(c["compensation"]["not_undone"] for c in partly) + ")"
        text += ": tell the customer the request was not carried out, then resolve"
    elif undone:
        text = (
            f"{', '.join(_words(c['tool']) for c in undone)} was undone, so resuming is not possible: "
            f"finish by hand, or undo what still stands ({', '.join(_words(c['tool']) for c in standing)})"
        )
    elif not_done and run.status == RunStatus.RUNNING and not run_is_stuck(run):
        text = "the agent is still working this run: wait"
    elif not_done:
        todo = ", ".join(
            f"{_words(n['tool'])}" + (f" ({n['detail']})" if n["detail"] else "") for n in not_done
        )
        undo = "; ".join(
            f"{_words(a['undo_tool'])} to undo {_words(a['tool'])}"
            + (f" ({a['reversible']})" if isinstance(a["reversible"], str) else "")
            for a in available
        )
        text = f"resume the run to {todo}"
        if undo:
            text += f", or {undo} if the customer would rather not go ahead"
    elif completed:
        text = "everything planned was done: check what the customer was told, then resolve"
    else:
        text = "nothing was changed downstream: resume the run, or resolve it with a note"
    # Work before anything else (an uncertain step, an undo failed or under way) still waits on
    # a person even on an ended run; otherwise an ended run with no escalation open waits on nobody.
    waiting = bool(uncertain or failed_undo or pending_undo) or not ended_unattended
    return {"text": text, "compensations_available": available, "waiting": waiting}


def run_state_token(run: Run, rows: HandoverRows | None = None) -> str:
    """What a page saw of a run: its row version, its newest journal event and newest audit row.
    An action carrying an older token acts on a run that has changed since and is refused."""
    if rows is not None:
        last_event = max((e.pk for e in rows.events), default=0)
        last_audit = max((a.seq for a in rows.audit), default=0)
    else:
        last_event = run.events.aggregate(last=Max("id"))["last"] or 0
        last_audit = run.audit_entries.aggregate(last=Max("seq"))["last"] or 0
    return f"{run.version}.{last_event}.{last_audit}"


def handover_build(rows: HandoverRows, now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    run = rows.run
    planned = plan_with_keys(run)
    plan_detail = {step["key"]: step.get("detail", "") for step in planned}
    completed = _completed(rows, plan_detail, now)
    not_done = _not_done(rows, planned)
    uncertain = _uncertain(rows, plan_detail)
    reason = run.outcome_reason or ("run_stuck" if run_is_stuck(run, now) else "")
    return {
        "handover_version": HANDOVER_VERSION,
        "run_id": str(run.pk),
        "ticket_id": run.ticket_id,
        "order_id": run.order_id,
        "task_type": run.task_type,
        "status": run.status,
        "reason": reason,
        "reason_detail": run.outcome_detail,
        "assignee": run.assignee.get_username() if run.assignee_id and run.assignee else None,
        "completed": completed,
        "not_done": not_done,
        "uncertain": uncertain,
        "customer_told": [
            {"at": m.told_at.isoformat(), "channel": m.channel, "body": m.body} for m in rows.messages
        ],
        "next_action": next_action(run=run, completed=completed, not_done=not_done, uncertain=uncertain),
        "coverage": rows.coverage,
        "versions": run.versions,
        "deadline": run.deadline.isoformat() if run.deadline else None,
        "deadline_passed": bool(run.deadline and run.deadline <= now),
        "state": run_state_token(run, rows),
    }


def handover_for(run: Run) -> dict[str, Any]:
    return handover_build(handover_rows(run))
