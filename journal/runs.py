"""A run's life as its runtime drives it: opened with its plan and versions, kept alive by its
heartbeat, counted, completed (never while a call of it is in doubt) or cancelled. Each change
commits durably with its journal event; the status moves through journal.transitions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import (
    IntegrityError,
)
from django.db.models import F
from django.utils import timezone

from . import transitions
from .durability import durable
from .errors import Conflict, InvalidInput
from .escalations import cancelled_in_doubt_hand_over
from .events import Actor, event_record
from .models import (
    CUSTOMER_REF_MAX,
    Intent,
    IntentStatus,
    JournalEvent,
    Run,
    RunStatus,
    Tenant,
)
from .selectors import stale_after
from .validation import MAX_SUMMARY_CHARS, check_time, clean_plan, clean_text, clean_versions
from .why import CleanupCode, Why, why

# --- runs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunCreated:
    run: Run
    created: bool


def run_create(
    *,
    tenant: Tenant,
    task_type: str,
    versions: dict[str, str],
    plan: list[dict[str, Any]] | None = None,
    ticket_id: str = "",
    order_id: str = "",
    customer_ref: str = "",
    deadline: datetime | None = None,
    external_id: str = "",
    actor: Actor,
) -> RunCreated:
    """Open a run with its plan and the versions it started under. With an `external_id`, a
    repeated create (a retried request) returns the run created the first time."""
    if not isinstance(task_type, str) or not re.fullmatch(r"[-a-zA-Z0-9_]{1,64}", task_type):
        raise InvalidInput("task_type must be a slug of 1-64 characters", field="task_type")
    versions = clean_versions(versions)
    checked_plan = clean_plan(plan or [])
    ticket_id = clean_text(ticket_id, field="ticket_id", limit=100)
    order_id = clean_text(order_id, field="order_id", limit=100)
    customer_ref = clean_text(customer_ref, field="customer_ref", limit=CUSTOMER_REF_MAX)
    external_id = clean_text(external_id, field="external_id", limit=200)
    if deadline is not None:
        check_time(deadline, field="deadline", horizon=timedelta(days=settings.SEAM_MAX_DEADLINE_DAYS))

    sent = {
        "task_type": task_type,
        "versions": versions,
        "plan": checked_plan,
        "ticket_id": ticket_id,
        "order_id": order_id,
        "customer_ref": customer_ref,
        "deadline": deadline,
    }
    if external_id:
        existing = Run.objects.filter(tenant=tenant, external_id=external_id).first()
        if existing is not None:
            return _created_before(existing, sent)
    try:
        return RunCreated(run=_run_insert(tenant, external_id, sent, actor), created=True)
    except IntegrityError:
        # Two creates raced on the external id; the other one won.
        return _created_before(Run.objects.get(tenant=tenant, external_id=external_id), sent)


def _run_insert(tenant: Tenant, external_id: str, sent: dict[str, Any], actor: Actor) -> Run:
    """The new run's row and its creation event, committed together."""
    now = timezone.now()
    versions = sent["versions"]
    with durable():
        run = Run.objects.create(
            tenant=tenant,
            external_id=external_id,
            task_type=sent["task_type"],
            ticket_id=sent["ticket_id"],
            order_id=sent["order_id"],
            customer_ref=sent["customer_ref"],
            deadline=sent["deadline"],
            schema_version=versions["schema"],
            flow_version=versions["flow"],
            policy_version=versions["policy"],
            capability_version=versions["capability"],
            plan=sent["plan"],
            last_heartbeat_at=now,
        )
        event_record(
            run=run,
            kind=JournalEvent.Kind.RUN_CREATED,
            actor=actor,
            at=now,
            data={"task_type": sent["task_type"], "plan_steps": len(sent["plan"]), "versions": versions},
        )
    return run


class RunDiffers(Conflict):
    """A create named the external id of a run opened with another body: not a retry of that
    create, and not a new run either. `differences` names each field that differs."""

    def __init__(self, external_id: str, differences: list[str]) -> None:
        super().__init__(
            f"a run was opened with external_id {external_id!r} and another "
            f"{', '.join(differences)}; a retried create sends the same body",
            field="external_id",
        )
        self.differences = differences


def _created_before(run: Run, sent: dict[str, Any]) -> RunCreated:
    """The run an earlier create with this external id opened, when this create is its retry
    (the same body); RunDiffers when it is not."""
    recorded = {
        "task_type": run.task_type,
        "versions": run.versions,
        "plan": run.plan,
        "ticket_id": run.ticket_id,
        "order_id": run.order_id,
        "customer_ref": run.customer_ref,
        "deadline": run.deadline,
    }
    differences = [field for field, value in sent.items() if recorded[field] != value]
    if differences:
        raise RunDiffers(run.external_id, differences)
    return RunCreated(run=run, created=False)


def run_heartbeat(*, run: Run) -> datetime:
    """The runtime is alive and working this run; reconciliation leaves its open intents alone."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=now)
    run.last_heartbeat_at = now
    return now


def run_complete(*, run: Run, actor: Actor) -> Run:
    """The runtime finished the run. Refused while any intent has no outcome: a run with a call
    in doubt is not complete, whatever the runtime believes."""
    with durable():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status == RunStatus.COMPLETED:
            return locked
        if locked.status != RunStatus.RUNNING:
            raise Conflict(f"run is {locked.status}; only a running run can be completed", field="status")
        open_steps = list(
            locked.intents.filter(status=IntentStatus.INTENDED).values_list("step_id", flat=True)
        )
        if open_steps:
            raise Conflict(
                f"{len(open_steps)} intent(s) have no outcome yet: {', '.join(open_steps)}",
                field="intents",
            )
        # Reconciliation asked and the downstream could not say: a person must decide first.
        unknown_steps = list(
            locked.intents.filter(status=IntentStatus.UNKNOWN).values_list("step_id", flat=True)
        )
        if unknown_steps:
            raise Conflict(
                f"{len(unknown_steps)} intent(s) have an unknown outcome that a person must settle "
                f"first: {', '.join(unknown_steps)}",
                field="intents",
            )
        transitions.run_transition(
            run=locked,
            source=RunStatus.RUNNING,
            target=RunStatus.COMPLETED,
            actor=actor,
            event=JournalEvent.Kind.RUN_COMPLETED,
        )
    return locked


def runs_archived_mark(*, run_ids: list[Any], at: datetime) -> int:
    """Mark runs archived (retention.services, inside the transaction that checked their archive
    against their rows, under their locks): the version moves, so a page drawn before redraws
    as the archived run's. No journal event: it would land among the rows just archived, after
    the archive was taken; the audit row of the archiving records it. The number marked."""
    return Run.objects.filter(pk__in=run_ids, archived_at__isnull=True).update(
        archived_at=at, version=F("version") + 1
    )


COUNTERS = {"retry": "retries", "repair": "repairs", "replan": "replans", "reflection": "reflections"}


def run_heartbeat_restore(*, run: Run, claimed_at: datetime | None, last_seen: datetime | None) -> bool:
    """Put back the heartbeat a dead-run decision's claim replaced (`claimed_at`, set by the
    claim) with the one it saw (`last_seen`), so the run looks as dead as before; False when
    the run beat since (its agent came back), which then stands."""
    return bool(
        Run.objects.filter(pk=run.pk, last_heartbeat_at=claimed_at).update(last_heartbeat_at=last_seen)
    )


def run_count(*, run: Run, kind: str, actor: Actor) -> Run:
    """Count one retry, repair, replan or reflection of the run, each kind apart from the others."""
    column = COUNTERS.get(kind)
    if column is None:
        raise InvalidInput(f"kind must be one of {', '.join(COUNTERS)}", field="kind")
    with durable():
        Run.objects.filter(pk=run.pk).update(**{column: F(column) + 1})
        event_record(
            run=run, kind=JournalEvent.Kind.COUNTED, actor=actor, at=timezone.now(), data={"kind": kind}
        )
    return Run.objects.select_related("tenant").get(pk=run.pk)


@dataclass(frozen=True)
class Cancelled:
    run: Run
    completed: list[Intent]
    uncertain: list[Intent]
    # What becomes of each call still in doubt (CleanupCode), with the key to ask about.
    cleanup_scheduled: list[Why]


def run_cancel(*, run: Run, reason: str, actor: Actor) -> Cancelled:
    """Stop admitting new steps. The run row is locked against the intent insert's share lock,
    so no intent is admitted after this commits. Nothing is undone: what completed stands. A
    call already in flight stays `intended` and is reconciled once it has been quiet for the
    stale threshold (cleanup_scheduled says so, with its key); one whose outcome is, or turns
    out, unknown hands the run to a person, since no agent and no dead-run decision will come
    back to it (cancelled_in_doubt_hand_over). Cancelling twice returns the same answer."""
    reason = clean_text(reason, field="reason", limit=MAX_SUMMARY_CHARS, required=True)
    now = timezone.now()
    with durable():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        cancelling = locked.status == RunStatus.RUNNING
        if cancelling:
            transitions.run_transition(
                run=locked,
                source=RunStatus.RUNNING,
                target=RunStatus.CANCELLED,
                actor=actor,
                event=JournalEvent.Kind.RUN_CANCELLED,
                data={"reason": reason},
                changes={"outcome_detail": reason, "ended_at": now},
                at=now,
            )
        elif locked.status != RunStatus.CANCELLED:
            raise Conflict(f"run is {locked.status}; only a running run can be cancelled", field="status")
        intents = list(locked.intents.order_by("intended_at", "id"))
        unknown = [i for i in intents if i.status == IntentStatus.UNKNOWN]
        # Only on the cancel itself: a repeat must not reopen what a person has since resolved.
        if cancelling and cancelled_in_doubt_hand_over(run=locked, unknown=unknown, actor=actor, at=now):
            locked.refresh_from_db()
    uncertain = [i for i in intents if i.status in (IntentStatus.INTENDED, IntentStatus.UNKNOWN)]
    return Cancelled(
        run=locked,
        completed=[i for i in intents if i.status == IntentStatus.PERFORMED],
        uncertain=uncertain,
        cleanup_scheduled=[_cleanup_of(intent) for intent in uncertain],
    )


def _cleanup_of(intent: Intent) -> Why:
    """What will become of a cancelled run's call in doubt, with the key to ask about."""
    facts = {"tool": intent.tool, "step_id": intent.step_id, "key": intent.idempotency_key}
    if intent.status == IntentStatus.UNKNOWN:
        return why(CleanupCode.PERSON_DECIDES, **facts)
    quiet = int(stale_after(intent.tool).total_seconds())
    return why(CleanupCode.RECONCILE_WHEN_QUIET, quiet_seconds=quiet, **facts)
