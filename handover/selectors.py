"""Reads of the run journal, always scoped to one tenant. Each returns a queryset (or row) with
its related rows already joined or prefetched, so a page or response runs a fixed number of
queries however many runs or steps there are."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import (
    Case,
    Count,
    F,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from .keys import idempotency_key
from .models import (
    AuditEntry,
    CustomerMessage,
    Intent,
    IntentStatus,
    JournalEvent,
    Membership,
    Run,
    RunStatus,
    Tenant,
)


def tenant_for_user(user: Any) -> Tenant | None:
    """The tenant a request acts for: an agent token's own, or a staff user's membership."""
    tenant = getattr(user, "tenant", None)
    if tenant is not None:
        return tenant  # an AgentPrincipal
    if not getattr(user, "is_authenticated", False):
        return None
    membership = Membership.objects.select_related("tenant").filter(user=user).first()
    return membership.tenant if membership else None


def runs_for_tenant(
    *, tenant: Tenant, ticket_id: str = "", order_id: str = "", status: str = ""
) -> QuerySet[Run]:
    runs = Run.objects.filter(tenant=tenant).select_related("tenant")
    if ticket_id:
        runs = runs.filter(ticket_id=ticket_id)
    if order_id:
        runs = runs.filter(order_id=order_id)
    if status:
        runs = runs.filter(status=status)
    return runs.order_by("-created_at", "id")


def runs_with_counts(*, tenant: Tenant) -> QuerySet[Run]:
    """Runs with their intent tallies, for lists."""
    return runs_for_tenant(tenant=tenant).annotate(
        intent_count=Count("intents"),
        open_count=Count("intents", filter=Q(intents__status=IntentStatus.INTENDED)),
        performed_count=Count("intents", filter=Q(intents__status=IntentStatus.PERFORMED)),
        failed_count=Count("intents", filter=Q(intents__status=IntentStatus.FAILED)),
    )


def run_get(*, tenant: Tenant, run_id: Any) -> Run | None:
    """One run of this tenant, or None: another tenant's run is indistinguishable from none."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        return None
    run = Run.objects.filter(tenant=tenant, pk=pk).first()
    if run is not None:
        # The tenant is the one asked for: reuse it rather than join its row in again.
        Run.tenant.field.set_cached_value(run, tenant)
    return run


def run_get_with_journal(*, tenant: Tenant, run_id: Any) -> Run | None:
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        return None
    return (
        Run.objects.select_related("tenant")
        .prefetch_related(
            Prefetch("intents", queryset=Intent.objects.order_by("intended_at", "id")),
            Prefetch("customer_messages", queryset=CustomerMessage.objects.order_by("told_at", "id")),
        )
        .filter(tenant=tenant, pk=pk)
        .first()
    )


def intent_get(*, run: Run, step_id: str) -> Intent | None:
    intent = Intent.objects.filter(run=run, step_id=step_id).first()
    if intent is not None:
        Intent.run.field.set_cached_value(intent, run)  # the run (and its tenant) the caller holds
    return intent


def plan_with_keys(run: Run) -> list[dict[str, Any]]:
    """The run's planned writes, each with the idempotency key the runtime gives it: how a
    planned step is matched to its intent row (done, not done, in doubt) and how resumption
    finds a step that was in fact performed."""
    return [
        {
            **step,
            "key": idempotency_key(
                tenant_slug=run.tenant.slug,
                run_id=str(run.pk),
                tool=step["tool"],
                args=step.get("args", {}),
                policy_version=run.policy_version,
                occurrence=step.get("occurrence", 0),
            ),
        }
        for step in run.plan
    ]


# --- the staff dashboard ----------------------------------------------------------------------


@dataclass(frozen=True)
class QueueFilters:
    task_type: str = ""
    reason: str = ""
    status: str = ""
    assignee: str = ""  # "me", "none", or a username
    q: str = ""  # a ticket or order id
    sort: str = "deadline"  # "deadline" (nearest first, then oldest) or "oldest"


def _queue_base(*, tenant: Tenant, now: datetime) -> QuerySet[Run]:
    """Runs waiting for a person (escalated, not yet resolved) and runs that are stuck (running,
    silent past the stale threshold). Both sides are partial-index scans."""
    stale_before = now - timedelta(seconds=settings.SEAM_STALE_AFTER_SECONDS)
    return Run.objects.filter(tenant=tenant).filter(
        Q(awaiting_person=True) | Q(status=RunStatus.RUNNING, last_heartbeat_at__lt=stale_before)
    )


STUCK = "run_stuck"


def queue_runs(*, tenant: Tenant, user: Any, filters: QueueFilters, now: datetime) -> QuerySet[Run]:
    runs = _queue_base(tenant=tenant, now=now)
    if filters.task_type:
        runs = runs.filter(task_type=filters.task_type)
    if filters.reason == STUCK:
        runs = runs.filter(awaiting_person=False)
    elif filters.reason:
        runs = runs.filter(outcome_reason=filters.reason, awaiting_person=True)
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.assignee == "me":
        runs = runs.filter(assignee=user)
    elif filters.assignee == "none":
        runs = runs.filter(assignee__isnull=True)
    elif filters.assignee:
        runs = runs.filter(assignee__username=filters.assignee)
    if filters.q:
        runs = runs.filter(Q(ticket_id=filters.q.strip()) | Q(order_id=filters.q.strip()))
    last_event = JournalEvent.objects.filter(run=OuterRef("pk")).order_by("-id").values("id")[:1]
    last_audit = AuditEntry.objects.filter(run=OuterRef("pk")).order_by("-seq").values("seq")[:1]
    # A scalar subquery, not Exists: PostgreSQL may answer an EXISTS in the select list with a
    # hashed subplan that reads every intent of every run (a parallel scan of the whole journal,
    # ~250 ms at 1M intents), whereas a scalar subquery is only ever run per row, for the page's
    # 50 runs, through intent_step_per_run.
    open_uncertain = (
        Intent.objects.filter(run=OuterRef("pk"), status=IntentStatus.UNKNOWN)
        .order_by()
        .annotate(found=Value(True))
        .values("found")[:1]
    )
    runs = runs.select_related("assignee").annotate(
        last_event_id=Coalesce(Subquery(last_event), 0),
        last_audit_seq=Coalesce(Subquery(last_audit), 0),
        has_unknown=Coalesce(Subquery(open_uncertain), Value(False)),
    )
    if filters.sort == "oldest":
        return runs.order_by("created_at", "id")
    return runs.order_by(F("deadline").asc(nulls_last=True), "created_at", "id")


def queue_task_types(*, tenant: Tenant, now: datetime) -> list[str]:
    """The task types of the runs in the queue, for its filter: read from the queue's own partial
    indexes, so the list costs what the queue costs, not a scan of every run the tenant has."""
    return list(
        _queue_base(tenant=tenant, now=now)
        .order_by("task_type")
        .values_list("task_type", flat=True)
        .distinct()
    )


def queue_reason_counts(*, tenant: Tenant, now: datetime) -> dict[str, int]:
    """How many runs wait for each reason (stuck runs under "run_stuck"), in one query."""
    rows = (
        _queue_base(tenant=tenant, now=now)
        .annotate(
            queue_reason=Case(When(awaiting_person=True, then=F("outcome_reason")), default=Value(STUCK))
        )
        .values("queue_reason")
        .annotate(n=Count("id"))
        .order_by("queue_reason")
    )
    return {row["queue_reason"] or "unspecified": row["n"] for row in rows}


@dataclass(frozen=True)
class AuditFilters:
    person: str = ""
    run: str = ""
    action: str = ""
    since: date | None = None
    until: date | None = None


def audit_entries(*, tenant: Tenant, filters: AuditFilters) -> QuerySet[AuditEntry]:
    entries = AuditEntry.objects.filter(tenant=tenant).select_related("run")
    if filters.person:
        entries = entries.filter(username=filters.person)
    if filters.run:
        try:
            entries = entries.filter(run_id=uuid.UUID(filters.run))
        except ValueError:
            entries = entries.filter(Q(run__ticket_id=filters.run) | Q(run__order_id=filters.run))
    if filters.action:
        entries = entries.filter(action=filters.action)
    if filters.since:
        entries = entries.filter(at__date__gte=filters.since)
    if filters.until:
        entries = entries.filter(at__date__lte=filters.until)
    return entries.order_by("-at", "-seq")


def dead_letters_for(*, tenant: Tenant, show: str = "open") -> QuerySet[Any]:
    from compensations.models import DeadLetter

    letters = DeadLetter.objects.filter(compensation__original__run__tenant=tenant).select_related(
        "compensation__original__run", "compensation__intent", "owner", "resolved_by"
    )
    if show == "open":
        letters = letters.filter(resolved_at__isnull=True)
    elif show == "resolved":
        letters = letters.filter(resolved_at__isnull=False)
    return letters.order_by("-created_at", "-id")


def dead_letter_history(*, tenant: Tenant, letter_ids: list[int]) -> dict[int, list[AuditEntry]]:
    """The audit entries of each dead letter (take, assign, retry, resolve), in one query."""
    history: dict[int, list[AuditEntry]] = {i: [] for i in letter_ids}
    entries = AuditEntry.objects.filter(
        tenant=tenant, action__startswith="dead_letter_", new_state__dead_letter__in=letter_ids
    ).order_by("seq")
    for entry in entries:
        history.setdefault(int(entry.new_state["dead_letter"]), []).append(entry)
    return history


def tenant_staff(*, tenant: Tenant) -> QuerySet[Any]:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(membership__tenant=tenant, is_active=True).order_by("username")


def run_get_for_page(*, tenant: Tenant, run_id: Any) -> Run | None:
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        return None
    return Run.objects.select_related("tenant", "assignee").filter(tenant=tenant, pk=pk).first()


# --- compensation intents ---------------------------------------------------------------------

# An undo is recorded like any call; what marks it is its `intent_recorded` event, written with
# `compensation: true` (handover.services.intent_record). Compensation intents are never listed
# as the run's own work and never undone themselves.
COMPENSATION_RECORDED = Q(kind=JournalEvent.Kind.INTENT_RECORDED, data__compensation=True)


def compensation_intent_ids(*, run: Run) -> set[int]:
    """The ids of the run's compensation intents, in one query (journal_run_at_idx)."""
    ids = JournalEvent.objects.filter(COMPENSATION_RECORDED, run=run).values_list("intent_id", flat=True)
    return {pk for pk in ids if pk is not None}


def compensation_intent_ids_in(events: list[JournalEvent]) -> set[int]:
    """The same, read from a run's events already loaded (the run page has them)."""
    return {
        e.intent_id
        for e in events
        if e.kind == JournalEvent.Kind.INTENT_RECORDED and e.intent_id and (e.data or {}).get("compensation")
    }
