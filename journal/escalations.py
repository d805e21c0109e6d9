"""Handing a run to a person: the run ends escalated (or compensated, or stays cancelled), joins
the queue and gets an open Escalation, whose notifications go out after commit; a person's
resumption or finish closes it. Written inside the transaction that decided the hand-over."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import (
    connection,
)
from django.db.models import F
from django.utils import timezone

from . import transitions
from .events import Actor
from .models import (
    Escalation,
    Intent,
    JournalEvent,
    OutcomeReason,
    Run,
    RunStatus,
)
from .signals import escalation_opened
from .why import RunWhy, Why, why


def unknown_calls_why(unknown: list[Intent]) -> Why:
    """Why a run whose calls nobody could settle goes to a person: each call in doubt, its key,
    and its own verdict (a row settled before verdicts existed has its words instead)."""
    return why(
        RunWhy.CALLS_UNKNOWN,
        calls=[
            {"tool": i.tool, "key": i.idempotency_key, "verdict": i.verdict, "reason": i.unknown_reason}
            for i in unknown
        ],
    )


def cancelled_in_doubt_hand_over(
    *, run: Run, unknown: list[Intent], actor: Actor, at: datetime
) -> Escalation | None:
    """A cancelled run has no agent left to settle its calls and no dead-run decision to come, so
    a call of it whose outcome is unknown would wait for nobody: the run, still cancelled, goes to
    a person. Inside the caller's transaction, with `run` read under its row lock; nothing when
    the run is not cancelled, a person already has it, or nothing is unknown."""
    if run.status != RunStatus.CANCELLED or run.awaiting_person or not unknown:
        return None
    return run_hand_over(
        run=run,
        reason=OutcomeReason.UNKNOWN_OUTCOME,
        why=unknown_calls_why(unknown),
        actor=actor,
        status=RunStatus.CANCELLED,
        from_statuses=(RunStatus.CANCELLED,),
        at=at,
    )


def escalations_resolve(*, run: Run, by: Any, note: str, at: datetime) -> int:
    """Close the run's open escalations (run_hand_over opened them): a person finished the job
    or resumed the run, and `note` says how. The number closed; 0 when none was open."""
    return Escalation.objects.filter(run=run, resolved_at__isnull=True).update(
        resolved_at=at, resolved_by=by, resolution_note=note
    )


def run_hand_over(
    *,
    run: Run,
    reason: str,
    why: Why,
    actor: Actor,
    status: str = RunStatus.ESCALATED,
    from_statuses: tuple[str, ...] = (RunStatus.RUNNING,),
    at: datetime | None = None,
    event_data: dict[str, Any] | None = None,
) -> Escalation | None:
    """Hand a run to a person, inside the caller's transaction: the run ends with `status`
    (escalated, or compensated when everything was undone) and the reason, joins the queue
    (awaiting_person), gets an open Escalation (whose notifications go out after commit) and
    its journal event. None, changing nothing, when the run is not in one of `from_statuses`
    (it already ended, or was cancelled). `why` is the typed reason (journal.why.RunWhy)."""
    if not connection.in_atomic_block:
        raise RuntimeError("run_hand_over must run inside the transaction that decided it")
    now = at or timezone.now()
    handed = transitions.run_transition(
        run=run,
        source=from_statuses,
        target=status,
        actor=actor,
        event=JournalEvent.Kind.RUN_COMPENSATED
        if status == RunStatus.COMPENSATED
        else JournalEvent.Kind.RUN_ESCALATED,
        data={"reason": reason, "why": why.as_json(), **(event_data or {})},
        changes={
            "outcome_reason": reason,
            "outcome_why": why.as_json(),
            "outcome_detail": "",
            "ended_at": now,
            "escalations": F("escalations") + 1,
            "awaiting_person": True,
        },
        at=now,
    )
    if not handed.moved:
        return None
    escalation = Escalation.objects.create(
        run=run,
        tenant_id=run.tenant_id,
        task_type=run.task_type,
        reason=reason,
        why=why.as_json(),
        created_at=now,
    )
    escalation_opened.send(sender=Escalation, escalation=escalation)
    return escalation
