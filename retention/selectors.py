"""Which runs retention may archive, which months they fall in, what keeps a month from being
dropped, and a run's archive. Reads only; retention.services writes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.db import models
from django.db.models import Exists, ExpressionWrapper, F, Max, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Coalesce, TruncMonth

from compensations.selectors import open_dead_letters_of
from journal.models import Escalation, Intent, IntentStatus, Run, RunStatus, Tenant
from journal.partitions import MonthPartition, existing_months

from .models import ArchivedRun

DAY = timedelta(days=1)
# The runs a blocked month names one by one (all are counted).
BLOCKING_RUNS_NAMED = 50
DEFAULT_RETENTION_DAYS = 90


class BlockReason(models.TextChoices):
    """Why a run keeps its month's partitions from being dropped."""

    RUNNING = "running", "still running"
    AWAITING_PERSON = "awaiting_person", "awaiting a person"
    UNKNOWN_INTENT = "unknown_intent", "a call's outcome is unknown"
    OPEN_ESCALATION = "open_escalation", "an escalation is open"
    OPEN_DEAD_LETTER = "open_dead_letter", "a dead letter is open"
    WITHIN_RETENTION = "within_retention", "ended, not yet past its tenant's retention"
    DUE = "due", "due, not yet archived (or its archive failed verification)"


def month_start(moment: datetime) -> date:
    """The first day of `moment`'s month, in UTC (the partitions' months)."""
    return moment.astimezone(UTC).date().replace(day=1)


def month_after(month: date) -> date:
    return (month.replace(day=28) + timedelta(days=4)).replace(day=1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """The instants (UTC) a run created in `month` lies between: [start, end)."""
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    end = month_after(month)
    return start, datetime(end.year, end.month, 1, tzinfo=UTC)


def _ended() -> Coalesce:
    # A completed run has no ended_at (run_complete moves only its status); its updated_at is its
    # completion's time or later (a later change beside it only moves it on), so the retention
    # counts from no earlier than the run ended.
    return Coalesce("ended_at", "updated_at")


def _kept_until() -> ExpressionWrapper:
    # ended + retention_days * '1 day': PostgreSQL multiplies an interval by an integer.
    retention = ExpressionWrapper(
        F("tenant__retention_days") * Value(DAY), output_field=models.DurationField()
    )
    return ExpressionWrapper(_ended() + retention, output_field=models.DateTimeField())


def _unknown_intent() -> Exists:
    return Exists(Intent.objects.filter(run=OuterRef("pk"), status=IntentStatus.UNKNOWN))


def _open_escalation() -> Exists:
    return Exists(Escalation.objects.filter(run=OuterRef("pk"), resolved_at__isnull=True))


def _open_dead_letter() -> Exists:
    return Exists(open_dead_letters_of(OuterRef("pk")))


def archivable_runs(now: datetime) -> QuerySet[Run]:
    """Runs whose intents and events may leave the journal at `now`: ended (not running, not
    awaiting a person), longer ago than their tenant's retention, with no unknown intent, no
    open escalation and no open dead letter, and not archived yet."""
    return (
        Run.objects.filter(archived_at__isnull=True, awaiting_person=False)
        .exclude(status=RunStatus.RUNNING)
        .alias(kept_until=_kept_until())
        .filter(~_unknown_intent(), ~_open_escalation(), ~_open_dead_letter(), kept_until__lt=now)
    )


def _created_in(month: date) -> Q:
    start, end = month_bounds(month)
    return Q(created_at__gte=start, created_at__lt=end)


@dataclass(frozen=True)
class DueMonth:
    """The runs of one tenant, created in one month, that are due for archiving."""

    tenant: Tenant
    month: date
    runs: int


def due_months(now: datetime, tenant: Tenant | None = None) -> list[DueMonth]:
    """Per tenant and per run-creation month (UTC), oldest first: how many runs are due."""
    runs = archivable_runs(now)
    if tenant is not None:
        runs = runs.filter(tenant=tenant)
    counted = (
        runs.annotate(month=TruncMonth("created_at", output_field=models.DateField(), tzinfo=UTC))
        .values("tenant_id", "month")
        .annotate(runs=models.Count("id"))
        .order_by("tenant_id", "month")
    )
    tenants = Tenant.objects.in_bulk({row["tenant_id"] for row in counted})
    return [DueMonth(tenants[row["tenant_id"]], row["month"], row["runs"]) for row in counted]


def due_batch(now: datetime, *, tenant: Tenant, month: date, size: int) -> list[Run]:
    """The oldest `size` runs of `tenant` created in `month` that are due."""
    return list(
        archivable_runs(now).filter(_created_in(month), tenant=tenant).order_by("created_at", "id")[:size]
    )


# --- what holds a month ----------------------------------------------------------------------


def longest_retention_days() -> int:
    longest = Tenant.objects.aggregate(longest=Max("retention_days"))["longest"]
    return int(longest if longest is not None else DEFAULT_RETENTION_DAYS)


def first_month_kept(now: datetime) -> date:
    """The oldest month not yet past every tenant's retention: a run created before it, had it
    ended when its month did, would be past its tenant's retention now."""
    return month_start(now - longest_retention_days() * DAY)


@dataclass(frozen=True)
class BlockingRun:
    run_id: str
    tenant: str
    ticket_id: str
    reasons: tuple[BlockReason, ...]


@dataclass
class BlockedMonth:
    """A month past every tenant's retention whose partitions cannot be dropped yet: `total`
    runs not archived, the first BLOCKING_RUNS_NAMED of them named with their reasons."""

    month: date
    total: int = 0
    runs: list[BlockingRun] = field(default_factory=list)


def _reasons_of(run: Run, now: datetime) -> tuple[BlockReason, ...]:
    holds = [
        (run.status == RunStatus.RUNNING, BlockReason.RUNNING),
        (run.awaiting_person, BlockReason.AWAITING_PERSON),
        (run.has_unknown_intent, BlockReason.UNKNOWN_INTENT),  # type: ignore[attr-defined]
        (run.has_open_escalation, BlockReason.OPEN_ESCALATION),  # type: ignore[attr-defined]
        (run.has_open_dead_letter, BlockReason.OPEN_DEAD_LETTER),  # type: ignore[attr-defined]
        (run.status != RunStatus.RUNNING and run.kept_until >= now, BlockReason.WITHIN_RETENTION),  # type: ignore[attr-defined]
    ]
    reasons = tuple(reason for holds_it, reason in holds if holds_it)
    return reasons or (BlockReason.DUE,)


def _unarchived_before(first_kept: date) -> Iterator[Run]:
    start, _ = month_bounds(first_kept)
    return (
        Run.objects.filter(archived_at__isnull=True, created_at__lt=start)
        .select_related("tenant")
        .annotate(
            month=TruncMonth("created_at", output_field=models.DateField(), tzinfo=UTC),
            kept_until=_kept_until(),
            has_unknown_intent=_unknown_intent(),
            has_open_escalation=_open_escalation(),
            has_open_dead_letter=_open_dead_letter(),
        )
        .order_by("created_at", "id")
        .iterator(chunk_size=1000)
    )


def blocked_months(now: datetime) -> list[BlockedMonth]:
    """Per month past every tenant's retention, oldest first, the runs that keep it from being
    dropped (not archived) and why."""
    months: dict[date, BlockedMonth] = {}
    for run in _unarchived_before(first_month_kept(now)):
        blocked = months.setdefault(run.month, BlockedMonth(run.month))  # type: ignore[attr-defined]
        blocked.total += 1
        if len(blocked.runs) < BLOCKING_RUNS_NAMED:
            blocked.runs.append(
                BlockingRun(str(run.pk), run.tenant.slug, run.ticket_id, _reasons_of(run, now))
            )
    return list(months.values())


def runs_created_in(month: date) -> QuerySet[Run]:
    return Run.objects.filter(_created_in(month))


def droppable_months(now: datetime) -> list[MonthPartition]:
    """The months whose partitions may be dropped at `now`, oldest first: past every tenant's
    retention, and every run created in them archived (the drop's own check, asked first so a
    month some run holds is passed over, not refused)."""
    first_kept = first_month_kept(now)
    return [
        partition
        for partition in existing_months()
        if partition.month < first_kept
        and not runs_created_in(partition.month).filter(archived_at__isnull=True).exists()
    ]


def archived_run_of(run: Run) -> ArchivedRun | None:
    """Where an archived run's intents and events are (None for a run not archived)."""
    if run.archived_at is None:
        return None
    return ArchivedRun.objects.select_related("archive").filter(run=run).first()
