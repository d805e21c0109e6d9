"""Reads of the run journal that every layer above it shares: one run or step of a tenant, a
run's plan with the keys its steps get, which of its intents are compensations, and which open
intents are in doubt (the sweep's "stale"), and which runs are stuck (the queue's, the handover's,
the metrics' and the sweep's one definition). Each returns rows with their related rows already
joined, so the pages and the sweep built on them run a fixed number of queries."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Count, Exists, Model, OuterRef, Prefetch, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThan
from django.utils import timezone

from . import sql as journal_sql
from .in_flight import InFlightFloor
from .keys import idempotency_key
from .models import (
    AgentToken,
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


def agent_token_get(*, digest: str) -> AgentToken | None:
    """The live (unrevoked) agent token with this digest, its tenant joined, or None."""
    return AgentToken.objects.select_related("tenant").filter(digest=digest, revoked_at__isnull=True).first()


@dataclass(frozen=True, slots=True)
class AgentCall:
    """What one agent request addresses, read together: its live token (tenant joined), the run
    id and step id as the URL gave them, the run of the token's tenant with that id (None if
    there is none) and, for a step's URL, that run's intent (None if there is none)."""

    token: AgentToken
    run_id: str
    step_id: str | None
    run: Run | None
    intent: Intent | None


def agent_call_get(*, digest: str, run_id: str, step_id: str | None = None) -> AgentCall | None:
    """The token with this digest and what the request names, in one query (the journal's two hot
    requests each pay one round trip for authentication and tenant scoping together); None when
    the token is unknown or revoked. A run of another tenant is no run, as in run_get. The query
    is one prepared statement (journal.sql.agent_call_read) that also answers when the run or the
    step is missing."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        pk = None
    read = journal_sql.agent_call_read(
        connections[DEFAULT_DB_ALIAS],
        digest=digest,
        run_id=pk,
        # No stored step id holds a NUL (PostgreSQL text cannot): such a step is no step.
        step_id=step_id if step_id is not None and "\x00" not in step_id else None,
        with_step=step_id is not None,
    )
    if read is None:
        return None
    return AgentCall(
        token=cast(AgentToken, read[0]),
        run_id=run_id,
        step_id=step_id,
        run=cast(Run | None, read[1]),
        intent=cast(Intent | None, read[2]),
    )


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
                key_namespace=run.tenant.key_namespace,
                run_id=str(run.pk),
                tool=step["tool"],
                args=step.get("args", {}),
                policy_version=run.policy_version,
                occurrence=step.get("occurrence", 0),
            ),
        }
        for step in run.plan
    ]


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


def stale_after(tool: str | None = None) -> timedelta:
    """How long an open intent of `tool` may wait, with its run silent, before it is in doubt."""
    by_tool: dict[str, Any] = settings.SEAM_STALE_AFTER_BY_TOOL
    if tool is not None and tool in by_tool:
        return timedelta(seconds=float(by_tool[tool]))
    return timedelta(seconds=float(settings.SEAM_STALE_AFTER_SECONDS))


# What a run that never beat counts as: quiet since the beginning of time.
_NO_HEARTBEAT = datetime.min.replace(tzinfo=UTC)


def read_prepared[M: Model](rows: QuerySet[M]) -> list[M]:
    """`rows`, read with server-side binding (journal.sql.bound_server_side): from its
    prepare_threshold-th run on a connection, PostgreSQL runs the statement from a plan it keeps
    (its generic plan, when that costs no more than planning each call).

    For a read of a partitioned table that no constant narrows to some of its months (the
    sweep's: an open call may lie in any month), PostgreSQL plans every month's partition on each
    call: with a year of months, the planning took longer than the read (bench/flatness.py). A
    constant the plan depends on must then be part of the statement's text, not a parameter
    (Spelled): a plan kept for any parameter cannot use a partial index whose condition it
    cannot prove."""
    with journal_sql.bound_server_side(connections[rows.db]):
        return list(rows)


class Spelled(Value):
    """A constant written into the statement's text, not bound as a parameter: in a statement
    PostgreSQL keeps one plan for (read_prepared), a partial index whose condition names the
    constant can then be used by that plan."""

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[str | int, ...]]:
        return connection.ops.compose_sql("%s", [self.value]), ()


# Open calls, in the words of intent_open_idx's condition.
OPEN_CALL = Q(status=Spelled(IntentStatus.INTENDED))


def _stale_since(cutoff: datetime) -> Q:
    # Both the row and its run's last sign of life must be older than the cutoff: a run that is
    # still heartbeating may have its call in flight right now.
    #
    # The run's heartbeat is read per row, by a scalar subquery (a LIMIT keeps PostgreSQL from
    # turning it into a join), so the rows are always read in intent_open_idx's order and the
    # read stops at the batch's last row. Joined instead, PostgreSQL may drive the read from the
    # quiet runs when it counts few of them (a provider outage: a few dead runs with thousands of
    # open calls each), and then reads every call of each such run through its run_id index for
    # every batch: 43 ms a claim of 50 rows at 15,000 open calls on one run, against 0.5 ms, and
    # a worker settled about 540 rows a second instead of about 2,100 (bench.reconcile).
    heartbeat = Subquery(Run.objects.filter(pk=OuterRef("run_id")).order_by().values("last_heartbeat_at")[:1])
    return Q(intended_at__lt=cutoff) & Q(LessThan(Coalesce(heartbeat, Value(_NO_HEARTBEAT)), cutoff))


def stale_intents(
    *,
    older_than: timedelta | None = None,
    run_id: Any = None,
    now: datetime | None = None,
    floor: InFlightFloor | None = None,
) -> QuerySet[Intent]:
    """Intent rows still `intended` whose run has gone quiet for longer than the threshold and
    that are not waiting out a lookup backoff (or another sweeper's claim), oldest first.

    `older_than` applies to every tool; without it, settings.SEAM_STALE_AFTER_SECONDS applies,
    overridden per tool by settings.SEAM_STALE_AFTER_BY_TOOL. The status and intended_at
    conditions are the partial index intent_open_idx's own, so the scan touches open rows only.
    With `floor`, an intent whose call may still be in flight is left out (in_flight_intents)."""
    now = now or timezone.now()
    if older_than is not None:
        stale = _stale_since(now - older_than)
    else:
        by_tool: dict[str, Any] = settings.SEAM_STALE_AFTER_BY_TOOL
        stale = _stale_since(now - stale_after()) & ~Q(tool__in=list(by_tool))
        for tool in by_tool:
            stale |= Q(tool=tool) & _stale_since(now - stale_after(tool))
        # One range over intended_at that every branch implies, so the index bounds the scan.
        shortest = min([stale_after(), *(stale_after(tool) for tool in by_tool)])
        stale &= Q(intended_at__lt=now - shortest)
    rows = Intent.objects.filter(OPEN_CALL).filter(stale)
    rows = rows.filter(Q(next_lookup_at__isnull=True) | Q(next_lookup_at__lte=now))
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    if floor is not None:
        rows = rows.filter(floor.past(now))
    # The rows alone, not joined to their runs (see _stale_since); a lookup never reads the run.
    return rows.order_by("intended_at", "id")


def in_flight_intents(
    *, floor: InFlightFloor, older_than: timedelta | None = None, run_id: Any = None, now: datetime
) -> QuerySet[Intent]:
    """The intents stale_intents would give but for `floor`: their call may still be acting."""
    return stale_intents(older_than=older_than, run_id=run_id, now=now).exclude(floor.past(now))


def _stuck(now: datetime, quiet_for: timedelta | None) -> Q:
    running = Q(status=RunStatus.RUNNING)
    by_tool: dict[str, Any] = settings.SEAM_STALE_AFTER_BY_TOOL
    if quiet_for is not None or not by_tool:
        return running & Q(last_heartbeat_at__lt=now - (stale_after() if quiet_for is None else quiet_for))
    default = stale_after()
    thresholds: dict[timedelta, list[str]] = {}
    for tool in by_tool:
        thresholds.setdefault(stale_after(tool), []).append(tool)
    open_calls = Intent.objects.filter(run=OuterRef("pk"), status=IntentStatus.INTENDED)
    # One range over last_heartbeat_at that every case implies, so run_running_idx bounds the scan.
    stuck = running & Q(last_heartbeat_at__lt=now - min(default, *thresholds))
    # Silent past the global threshold, or waiting on a call, whose own threshold then rules:
    stuck &= Q(last_heartbeat_at__lt=now - default) | Q(Exists(open_calls))
    # ...and no open call still within its tool's threshold (the agent may be waiting on it).
    for threshold, tools in thresholds.items():
        stuck &= ~(Q(last_heartbeat_at__gte=now - threshold) & Q(Exists(open_calls.filter(tool__in=tools))))
    stuck &= ~(
        Q(last_heartbeat_at__gte=now - default) & Q(Exists(open_calls.exclude(tool__in=list(by_tool))))
    )
    return stuck


def stuck_runs(
    *, now: datetime, tenant: Tenant | None = None, quiet_for: timedelta | None = None
) -> QuerySet[Run]:
    """Running runs whose agent has gone quiet: the last heartbeat is older than the stale
    threshold of the calls the run has open (the longest of them: an agent waiting on several
    calls waits on the slowest; settings.SEAM_STALE_AFTER_BY_TOOL, else
    SEAM_STALE_AFTER_SECONDS), or than SEAM_STALE_AFTER_SECONDS when it has none open.
    `quiet_for` replaces every threshold (manage.py reconcile --older-than).

    The queue, the handover, the metrics and the sweep all ask this, so a run is stuck to all of
    them at once. A range scan on the partial index run_running_idx, bounded by the shortest
    threshold; with per-tool thresholds set, the open calls are read from the open rows only
    (intent_open_idx), so the cost follows the rows in doubt, not the journal's size."""
    runs = Run.objects.filter(_stuck(now, quiet_for))
    if tenant is not None:
        runs = runs.filter(tenant=tenant)
    return runs


def stuck_runs_q(*, now: datetime) -> Q:
    """The same rule as a condition, for a query that ORs it with others (the staff queue)."""
    return _stuck(now, None)
