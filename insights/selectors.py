"""Reads behind the insights page for team leads: how escalations, resolutions, unknown outcomes,
compensations, dead letters and people's actions went over a period, for one tenant (and
optionally one task type). Each selector is one aggregate query computed by PostgreSQL
(percentile_cont for the time to resolve) and returns a Breakdown: rows x columns of numbers,
the one shape the page's chart, the table beside it and the CSV are all drawn from, so the three
can never disagree.

What each period means: escalations by the day they were opened; time to resolve by the week the
escalation was resolved; unknown outcomes by when reconciliation gave up on the call;
compensations by when they were requested; people's actions by when they acted. Dead letters are
counted as they stand now, whatever the period: an open one is open today."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import (
    Aggregate,
    Case,
    Count,
    F,
    FloatField,
    Func,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import TruncDate, TruncWeek
from django.utils import timezone

from audit.models import AuditAction, AuditEntry
from compensations.models import Compensation, CompensationStatus, DeadLetter
from journal.models import Escalation, IntentStatus, JournalEvent, OutcomeReason, Tenant

# The longest period the page answers for: a year of days is already a long chart.
MAX_PERIOD_DAYS = 366
DEFAULT_PERIOD_DAYS = 30


# --- the shapes -------------------------------------------------------------------------------

Number = int | float | None


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    # False: shown in the table and the CSV but not drawn (a count beside two durations).
    charted: bool = True
    # A colour that carries a meaning (failed in red, done in green); otherwise the palette's next.
    colour: str = ""


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    values: tuple[Number, ...]
    # The chart's name for the row under its bar, when the label is too long for it ("3 Nov").
    short: str = ""

    @property
    def cells(self) -> tuple[str, ...]:
        """The values as the table shows them (— for none), made here rather than by the template,
        which would localise every number."""
        return tuple("—" if value is None else str(value) for value in self.values)


def _day_name(day: date) -> str:
    return f"{day.day} {day:%b}"


@dataclass(frozen=True)
class Breakdown:
    """A table of numbers: one row per day, week, tool, bucket or person; one column per series."""

    row_heading: str
    unit: str
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    # "stacked": the columns add up (counts of kinds); "grouped": they do not (median and p90).
    stacking: str = "stacked"

    @property
    def charted_columns(self) -> tuple[int, ...]:
        return tuple(i for i, column in enumerate(self.columns) if column.charted)

    @property
    def is_empty(self) -> bool:
        return not any(v for row in self.rows for v in row.values)


@dataclass(frozen=True)
class InsightsFilters:
    """The period (both days included, in the server's time zone) and an optional task type."""

    since: date
    until: date
    task_type: str = ""

    @property
    def start(self) -> datetime:
        return timezone.make_aware(datetime.combine(self.since, time.min))

    @property
    def end(self) -> datetime:
        """The first instant after the period."""
        return timezone.make_aware(datetime.combine(self.until + timedelta(days=1), time.min))

    @property
    def days(self) -> list[date]:
        return [self.since + timedelta(days=n) for n in range((self.until - self.since).days + 1)]

    @property
    def weeks(self) -> list[date]:
        """The Mondays of the weeks the period touches (PostgreSQL's date_trunc('week'))."""
        first = self.since - timedelta(days=self.since.weekday())
        return [first + timedelta(weeks=n) for n in range((self.until - first).days // 7 + 1)]


def default_period(*, today: date) -> tuple[date, date]:
    return today - timedelta(days=DEFAULT_PERIOD_DAYS - 1), today


# --- SQL pieces -------------------------------------------------------------------------------


class PercentileCont(Aggregate):
    """PostgreSQL's continuous percentile: percentile_cont(f) WITHIN GROUP (ORDER BY expr)."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, *, fraction: float, **extra: Any) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("a percentile's fraction is between 0 and 1")
        super().__init__(expression, fraction=repr(float(fraction)), **extra)


class EpochSeconds(Func):
    """The seconds in an interval (or since the epoch of a timestamp)."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)"
    output_field = FloatField()


def _counts_by(queryset: QuerySet[Any], row: str, column: str) -> dict[tuple[Any, Any], int]:
    rows = queryset.values(row, column).annotate(n=Count("pk")).order_by()
    return {(r[row], r[column]): r["n"] for r in rows}


def _totals(counts: dict[tuple[Any, Any], int]) -> dict[Any, int]:
    totals: dict[Any, int] = {}
    for (row, _column), n in counts.items():
        totals[row] = totals.get(row, 0) + n
    return totals


def _present(choices: list[tuple[str, str]], found: set[Any]) -> tuple[Column, ...]:
    """The columns of the choices that occur, in the choices' order; unknown values after them."""
    known = [Column(value, label) for value, label in choices if value in found]
    extra = sorted(str(v) for v in found - {value for value, _ in choices})
    return (*known, *(Column(v, v.replace("_", " ") or "unspecified") for v in extra))


def _escalations_of(*, tenant: Tenant, filters: InsightsFilters, **period: Any) -> QuerySet[Escalation]:
    """The tenant's escalations (of the task type, if one is chosen) in the period: a range of
    an index on (tenant, opened) or (tenant, resolved). Escalations carry their run's tenant and
    task type, copied when opened: reaching them through each escalation's run cost one lookup
    per escalation, most of the page's time at 1,000,000 runs (bench/pages.py)."""
    escalations = Escalation.objects.filter(tenant=tenant, **period)
    if filters.task_type:
        escalations = escalations.filter(task_type=filters.task_type)
    return escalations


def _for_runs(queryset: QuerySet[Any], run_path: str, filters: InsightsFilters) -> QuerySet[Any]:
    if filters.task_type:
        return queryset.filter(**{f"{run_path}__task_type": filters.task_type})
    return queryset


# --- the selectors ----------------------------------------------------------------------------


def escalations_per_day(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Escalations opened each day of the period, by reason (every day listed, quiet ones at 0)."""
    escalations = _escalations_of(
        tenant=tenant, filters=filters, created_at__gte=filters.start, created_at__lt=filters.end
    ).annotate(day=TruncDate("created_at"))
    counts = _counts_by(escalations, "day", "reason")
    columns = _present(list(OutcomeReason.choices), {reason for _, reason in counts})
    rows = tuple(
        Row(
            day.isoformat(),
            day.isoformat(),
            tuple(counts.get((day, c.key), 0) for c in columns),
            short=_day_name(day),
        )
        for day in filters.days
    )
    return Breakdown(row_heading="Day", unit="escalations", columns=columns, rows=rows)


def time_to_resolve_per_week(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Of the escalations resolved each week, the median and 90th percentile of the hours from
    opened to resolved, and how many there were."""
    resolved = _escalations_of(
        tenant=tenant, filters=filters, resolved_at__gte=filters.start, resolved_at__lt=filters.end
    )
    took = EpochSeconds(F("resolved_at") - F("created_at"))
    weeks = (
        resolved.annotate(week=TruncWeek("resolved_at"))
        .values("week")
        .annotate(
            n=Count("pk"),
            median=PercentileCont(took, fraction=0.5),
            p90=PercentileCont(took, fraction=0.9),
        )
        .order_by()
    )
    by_week: dict[date, dict[str, Any]] = {timezone.localtime(w["week"]).date(): dict(w) for w in weeks}

    def hours(seconds: float | None) -> float | None:
        return None if seconds is None else round(seconds / 3600, 1)

    rows = []
    for monday in filters.weeks:
        found = by_week.get(monday)
        rows.append(
            Row(
                monday.isoformat(),
                f"week of {monday.isoformat()}",
                (hours(found["median"]), hours(found["p90"]), found["n"]) if found else (None, None, 0),
                short=_day_name(monday),
            )
        )
    return Breakdown(
        row_heading="Week",
        unit="hours",
        columns=(
            Column("median", "Median (hours)"),
            Column("p90", "90th percentile (hours)"),
            Column("resolved", "Resolved", charted=False),
        ),
        rows=tuple(rows),
        stacking="grouped",
    )


# The events that say reconciliation gave up on a call (reconciliation.services._settle writes one
# per unknown outcome); a partial index (journal_unknown_outcome_idx) holds just these.
UNKNOWN_OUTCOME_EVENTS = Q(kind=JournalEvent.Kind.INTENT_RECONCILED, data__status=IntentStatus.UNKNOWN)


def unknown_outcomes_per_tool(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Calls whose outcome reconciliation could not find out, per tool: how many went unknown in
    the period and how many of them are still unknown (not yet settled by a person)."""
    tools = (
        _for_runs(
            JournalEvent.objects.filter(
                UNKNOWN_OUTCOME_EVENTS, run__tenant=tenant, at__gte=filters.start, at__lt=filters.end
            ),
            "run",
            filters,
        )
        .values("intent__tool")
        .annotate(
            went=Count("intent_id", distinct=True),
            still=Count("intent_id", distinct=True, filter=Q(intent__status=IntentStatus.UNKNOWN)),
        )
        .order_by("-went", "intent__tool")
    )
    rows = tuple(
        Row(t["intent__tool"] or "", t["intent__tool"] or "unknown tool", (t["went"], t["still"]))
        for t in tools
    )
    return Breakdown(
        row_heading="Tool",
        unit="calls",
        columns=(Column("went_unknown", "Went unknown"), Column("still_unknown", "Still unknown")),
        rows=rows,
        stacking="grouped",
    )


COMPENSATION_COLUMNS = (
    Column(CompensationStatus.DONE, "Done", colour="#009e73"),
    Column(CompensationStatus.PARTIAL, "Partial", colour="#e69f00"),
    Column(CompensationStatus.DEAD_LETTERED, "Failed", colour="#d55e00"),
    Column(CompensationStatus.NOT_POSSIBLE, "Not possible", colour="#404040"),
    Column(CompensationStatus.PENDING, "Pending", colour="#56b4e9"),
)


def compensations_by_outcome(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Compensations requested in the period, per tool undone: done, partial (something was lost),
    failed (in the dead-letter queue), not possible, still pending."""
    # The compensation's tenant, task type and tool are its original's, copied when requested:
    # a range of its (tenant, created) index, with no lookup of the original or its run.
    compensations = Compensation.objects.filter(
        tenant=tenant, created_at__gte=filters.start, created_at__lt=filters.end
    )
    if filters.task_type:
        compensations = compensations.filter(task_type=filters.task_type)
    counts = _counts_by(compensations, "tool", "status")
    totals = _totals(counts)
    tools = sorted(totals, key=lambda tool: (-totals[tool], tool))
    rows = tuple(
        Row(tool, tool, tuple(counts.get((tool, c.key), 0) for c in COMPENSATION_COLUMNS)) for tool in tools
    )
    return Breakdown(row_heading="Tool undone", unit="compensations", columns=COMPENSATION_COLUMNS, rows=rows)


# (label, lower bound in days, upper bound in days or None)
AGE_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("under 1 day", 0, 1),
    ("1 to 3 days", 1, 3),
    ("3 to 7 days", 3, 7),
    ("7 to 30 days", 7, 30),
    ("30 days or more", 30, None),
)


def dead_letters_open_by_age(*, tenant: Tenant, task_type: str, now: datetime) -> Breakdown:
    """Dead letters open now, by how long they have waited (every bucket listed)."""
    letters = DeadLetter.objects.filter(compensation__tenant=tenant, resolved_at__isnull=True)
    if task_type:
        letters = letters.filter(compensation__task_type=task_type)
    # The first bucket whose upper bound the letter's age is under; the last has none.
    bucket = Case(
        *(
            When(created_at__gt=now - timedelta(days=high), then=Value(index))
            for index, (_label, _low, high) in enumerate(AGE_BUCKETS)
            if high is not None
        ),
        default=Value(len(AGE_BUCKETS) - 1),
    )
    counts = {
        r["bucket"]: r["n"]
        for r in letters.annotate(bucket=bucket).values("bucket").annotate(n=Count("pk")).order_by()
    }
    rows = tuple(
        Row(str(index), label, (counts.get(index, 0),))
        for index, (label, _low, _high) in enumerate(AGE_BUCKETS)
    )
    return Breakdown(row_heading="Waiting", unit="dead letters", columns=(Column("open", "Open"),), rows=rows)


# Audit rows about a person that are not something they did: a lockout happens to them.
NOT_ACTIONS = (AuditAction.LOGIN_LOCKED_OUT,)


def actions_per_person(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """What each person did in the period, from the audit trail, by kind of action, with a total."""
    entries = _for_runs(
        AuditEntry.objects.filter(tenant=tenant, at__gte=filters.start, at__lt=filters.end).exclude(
            action__in=NOT_ACTIONS
        ),
        "run",
        filters,
    )
    counts = _counts_by(entries, "username", "action")
    columns = _present(list(AuditAction.choices), {action for _, action in counts})
    totals = _totals(counts)
    people = sorted(totals, key=lambda person: (-totals[person], person))
    rows = tuple(
        Row(
            person,
            person,
            (*(counts.get((person, c.key), 0) for c in columns), totals[person]),
        )
        for person in people
    )
    return Breakdown(
        row_heading="Person",
        unit="actions",
        columns=(*columns, Column("total", "Total", charted=False)),
        rows=rows,
    )


def insights_task_types(*, tenant: Tenant) -> list[str]:
    """The task types of the tenant's escalations: the runs the page is about, for its filter
    (read from the index on the escalations' tenant and task type, copied from their runs)."""
    found = Escalation.objects.filter(tenant=tenant).values_list("task_type", flat=True).distinct().order_by()
    return sorted(found)


def copies_differing() -> dict[str, int]:
    """How many escalations and compensations hold a run, tenant, task type or tool other than
    their run's and original's. The panels above count them by these copies (made when each row is
    written), so 0 here means they count what a recount through the runs would:
    `manage.py insights --recount` checks it."""
    return {
        "escalations": Escalation.objects.exclude(
            tenant_id=F("run__tenant_id"), task_type=F("run__task_type")
        ).count(),
        "compensations": Compensation.objects.exclude(
            run_id=F("original__run_id"),
            tenant_id=F("original__run__tenant_id"),
            task_type=F("original__run__task_type"),
            tool=F("original__tool"),
        ).count(),
    }
