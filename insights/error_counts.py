"""The counts behind the insights page's error panels (insights.errors), kept as a rollup so that
the page stays fast at a million runs: recounting the period's runs and their ten million calls
took 12 to 17 seconds per panel (bench/pages.py).

What is counted: of the runs started in a period, per task type the runs, loops and counters;
per tool the runs calling it, its calls, failed calls, loops and derived counters; per error
class the failed calls, their runs and the looping ones (models.ErrorCountGrain). Every count is
a sum over runs, and a run belongs to the hour it started in, so the counts of a period are the
sums of its hours' counts. `counts_recount` counts any set of runs from the journal's rows: it is
the reference (the `--recount` check of `manage.py insights`, and the tests), the fold's way of
counting an hour, and the page's way of counting what the rollup does not hold.

How the rollup is kept (`errors_fold`, a beat task every minute): a run's counts change only
with its rows, and every change to a run or its calls writes a journal event (the journal's
rule: an intent, an outcome, a count, a transition). The fold recounts whole UTC hours (each
recount replaces the hour's rows, so folding twice, or two folds one after the other, count each
run once) - the hours of the runs with an event since the last fold, and the hours since the
last fold - and records the newest event it has seen (`ErrorFold.last_event_id`) in the same
transaction. It holds the ErrorFold row's lock throughout, so a second worker waits and then
finds little to do. Hours, not days: the hour of a run still being written is recounted live on
every view, and an hour of runs is small where a day is not.

Events' ids are taken before their transactions commit, so an event with a smaller id may become
visible after one with a larger: the fold records as seen only the events older than
FOLD_MARGIN (by their time), and a transaction that holds an event uncommitted for longer than
that (the journal's commit within milliseconds) would go uncounted until its hour is recounted.

How the page reads (`error_counts`): the rollup's rows of the period's whole hours that the fold
has counted and whose runs have no event since (found from the events after last_event_id, by
the primary key), plus a live recount of everything else: the hours changed since the fold, the
hours after it, and the part-hours at the period's ends (the period is in the server's time
zone; a zone whose offset is not whole hours leaves part-hours at both ends). So the answer is
the recount's whatever has been folded, the fold only makes it cheaper."""

from __future__ import annotations

import operator
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any, cast

from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet, Sum, TextField
from django.db.models.functions import MD5, Cast, TruncHour
from django.utils import timezone

from handover.attempts import DERIVED, LOOPING, REPORTED, Call, walk
from journal.models import Intent, IntentStatus, JournalEvent, Run, Tenant

from .models import ErrorCount, ErrorCountGrain, ErrorFold
from .selectors import InsightsFilters

RUN, TOOL, CLASS, TOOL_CLASS = (
    ErrorCountGrain.RUN,
    ErrorCountGrain.TOOL,
    ErrorCountGrain.CLASS,
    ErrorCountGrain.TOOL_CLASS,
)
ALL_GRAINS = frozenset(ErrorCountGrain.values)
MEASURES = ("runs", "calls", "failed", "loops", "retries", "repairs", "replans", "reflections", "escalations")
HOUR = timedelta(hours=1)
# An event is taken as seen by a fold only once it is this old (see the module's docstring).
FOLD_MARGIN = timedelta(minutes=5)
# The first fold counts each tenant's history this much at a time.
BACKFILL_CHUNK = timedelta(days=7)

# (grain, task type, tool, error class) → measure → count
Key = tuple[str, str, str, str]
Counts = dict[Key, Counter[str]]
# (tenant id, hour) + Key
HourKey = tuple[int, datetime, str, str, str, str]
HourCounts = dict[HourKey, Counter[str]]


def hour_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hour_after(at: datetime) -> datetime:
    start = hour_of(at)
    return start if start == at else start + HOUR


def _created_in(ranges: Iterable[tuple[datetime, datetime]], path: str = "created_at") -> Q:
    """Within any of the ranges (at least one)."""
    return reduce(operator.or_, (Q(**{f"{path}__gte": start, f"{path}__lt": end}) for start, end in ranges))


def _ranges_of(hours: Iterable[datetime]) -> list[tuple[datetime, datetime]]:
    """Adjacent hours joined into ranges."""
    ranges: list[tuple[datetime, datetime]] = []
    for hour in sorted(hours):
        if ranges and ranges[-1][1] == hour:
            ranges[-1] = (ranges[-1][0], hour + HOUR)
        else:
            ranges.append((hour, hour + HOUR))
    return ranges


# --- the recount (the reference) --------------------------------------------------------------

# What is read of each call of a run with a failure, and of its run.
_RUN_COLUMNS = (
    "run__tenant_id",
    "run__created_at",
    "run__task_type",
    "run__outcome_why__code",
    *(f"run__{name}" for name in REPORTED),
)


def _calls_by_run(runs: QuerySet[Run]) -> dict[Any, tuple[dict[str, Any], list[Call]]]:
    """The calls of the runs with a failure, in order, their arguments as digests, with what is
    read of each run (one query)."""
    # The runs come from the failed calls (a partial index holds just those), each checked
    # against `runs` by its primary key: asking each of the period's runs whether it has a
    # failed call read every run, and then every call (bench/pages.py at 1,000,000 runs).
    failed = (
        Intent.objects.filter(status=IntentStatus.FAILED, run__in=runs.order_by().values("pk"))
        .order_by()
        .values("run_id")
    )
    rows = (
        Intent.objects.filter(run_id__in=failed)
        .annotate(digest=MD5(Cast("args", TextField())))
        .order_by("run_id", "intended_at", "id")
        .values_list("run_id", "tool", "digest", "status", "error_class", *_RUN_COLUMNS)
    )
    calls: dict[Any, tuple[dict[str, Any], list[Call]]] = {}
    for run_id, tool, digest, status, error_class, *of_run in rows:
        run = calls.setdefault(run_id, (dict(zip(_RUN_COLUMNS, of_run, strict=True)), []))
        run[1].append(Call(tool, digest, status, error_class))
    return calls


def _count_walks(runs: QuerySet[Run], found: HourCounts) -> None:
    """What the calls of the runs with a failure add (handover.attempts.walk): per task type the
    counts beyond the reported ones (the count is the larger of the two); per tool the derived
    counts, the failed calls and their classes, and the loops caught."""
    for run, run_calls in _calls_by_run(runs).values():
        walked = walk(run_calls)
        at = (run["run__tenant_id"], hour_of(run["run__created_at"]))
        task_type = run["run__task_type"]
        found[(*at, RUN, task_type, "", "")].update(
            {name: max(0, walked.counts[name] - run[f"run__{name}"]) for name in DERIVED}
        )
        for tool, counted in walked.per_tool.items():
            found[(*at, TOOL, task_type, tool, "")].update({name: counted[name] for name in DERIVED})
        failed = [c for c in run_calls if c.status == IntentStatus.FAILED]
        for call in failed:
            found[(*at, TOOL, task_type, call.tool, "")]["failed"] += 1
            found[(*at, TOOL_CLASS, task_type, call.tool, call.error_class)]["calls"] += 1
        if run["run__outcome_why__code"] == LOOPING:
            for tool in {c.tool for c in failed}:
                found[(*at, TOOL, task_type, tool, "")]["loops"] += 1


def _count_runs(runs: QuerySet[Run], found: HourCounts) -> None:
    grouped = (
        runs.annotate(hour=TruncHour("created_at", tzinfo=UTC))
        .values("tenant_id", "hour", "task_type")
        .annotate(
            runs=Count("pk"),
            loops=Count("pk", filter=Q(outcome_why__code=LOOPING)),
            **{name: Sum(name) for name in REPORTED},
        )
        .order_by()
    )
    for g in cast(Iterable[dict[str, Any]], grouped):
        found[(g["tenant_id"], hour_of(g["hour"]), RUN, g["task_type"], "", "")].update(
            {name: g[name] or 0 for name in ("runs", "loops", *REPORTED)}
        )


def _count_calls(runs: QuerySet[Run], found: HourCounts, *, failed_only: bool) -> None:
    """Per tool the runs calling it and its calls; or, `failed_only`, per error class the failed
    calls, the runs they failed in and the runs of those stopped for looping."""
    calls = Intent.objects.filter(run__in=runs.order_by().values("pk")).annotate(
        hour=TruncHour("run__created_at", tzinfo=UTC)
    )
    if failed_only:
        calls = calls.filter(status=IntentStatus.FAILED)
        key, grain = "error_class", CLASS
        more = {"loops": Count("run_id", distinct=True, filter=Q(run__outcome_why__code=LOOPING))}
    else:
        key, grain, more = "tool", TOOL, {}
    grouped = (
        calls.values("run__tenant_id", "hour", "run__task_type", key)
        .annotate(runs=Count("run_id", distinct=True), calls=Count("pk"), **more)
        .order_by()
    )
    for g in grouped:
        tool, error_class = (g[key], "") if grain == TOOL else ("", g[key])
        found[
            (g["run__tenant_id"], hour_of(g["hour"]), grain, g["run__task_type"], tool, error_class)
        ].update({name: g[name] for name in ("runs", "calls", *more)})


def counts_recount(runs: QuerySet[Run], grains: Collection[str] = ALL_GRAINS) -> HourCounts:
    """The counts of these runs from the journal's rows, per tenant and hour they started in."""
    found: HourCounts = defaultdict(Counter)
    if RUN in grains:
        _count_runs(runs, found)
    if TOOL in grains:
        _count_calls(runs, found, failed_only=False)
    if CLASS in grains:
        _count_calls(runs, found, failed_only=True)
    if set(grains) & {RUN, TOOL, TOOL_CLASS}:
        _count_walks(runs, found)
    return {key: counts for key, counts in found.items() if key[2] in grains}


def _summed(counts: Iterable[tuple[Key, Counter[str]]]) -> Counts:
    total: Counts = defaultdict(Counter)
    for key, counted in counts:
        total[key].update(counted)
    return dict(total)


def _runs_of(tenant: Tenant, task_type: str, ranges: list[tuple[datetime, datetime]]) -> QuerySet[Run]:
    runs = Run.objects.filter(_created_in(ranges), tenant=tenant)
    return runs.filter(task_type=task_type) if task_type else runs


def period_recount(
    *, tenant: Tenant, filters: InsightsFilters, grains: Collection[str] = ALL_GRAINS
) -> Counts:
    """The period's counts from the journal's rows alone: what `error_counts` must equal."""
    runs = _runs_of(tenant, filters.task_type, [(filters.start, filters.end)])
    return _summed((key[2:], c) for key, c in counts_recount(runs, grains).items())


# --- the page's read --------------------------------------------------------------------------


def changed_hours(*, since_event: int, tenant: Tenant | None = None) -> set[datetime]:
    """The hours (of their start) of the runs with a journal event after `since_event`."""
    events = JournalEvent.objects.filter(pk__gt=since_event)
    if tenant is not None:
        events = events.filter(run__tenant=tenant)
    found = events.annotate(hour=TruncHour("run__created_at", tzinfo=UTC)).values_list("hour", flat=True)
    return {hour_of(hour) for hour in found.distinct().order_by()}


@dataclass(frozen=True)
class _Split:
    """A period's whole hours the rollup answers, and the ranges recounted live."""

    rolled: tuple[datetime, datetime] | None
    skipped: frozenset[datetime]
    live: list[tuple[datetime, datetime]]


def _split(tenant: Tenant, filters: InsightsFilters, fold: ErrorFold | None) -> _Split:
    start, end = filters.start, filters.end
    if fold is None or fold.counted_before is None:
        return _Split(None, frozenset(), [(start, end)])
    first, last = _hour_after(start), min(hour_of(end), fold.counted_before)
    if first >= last:
        return _Split(None, frozenset(), [(start, end)])
    changed = frozenset(
        h for h in changed_hours(since_event=fold.last_event_id, tenant=tenant) if first <= h < last
    )
    live = [(start, first), (last, end), *_ranges_of(changed)]
    return _Split((first, last), changed, [(a, b) for a, b in live if a < b])


def _rolled(tenant: Tenant, filters: InsightsFilters, split: _Split, grains: Collection[str]) -> Counts:
    if split.rolled is None:
        return {}
    rows = ErrorCount.objects.filter(
        tenant=tenant, hour__gte=split.rolled[0], hour__lt=split.rolled[1], grain__in=list(grains)
    ).exclude(hour__in=list(split.skipped))
    if filters.task_type:
        rows = rows.filter(task_type=filters.task_type)
    grouped = (
        rows.values("grain", "task_type", "tool", "error_class")
        .annotate(**{name: Sum(name) for name in MEASURES})
        .order_by()
    )
    return {
        (g["grain"], g["task_type"], g["tool"], g["error_class"]): Counter(
            {m: g[m] for m in MEASURES if g[m]}
        )
        for g in cast(Iterable[dict[str, Any]], grouped)
    }


def error_counts(*, tenant: Tenant, filters: InsightsFilters, grains: Collection[str] = ALL_GRAINS) -> Counts:
    """The period's counts: the rollup's where it holds them, recounted live elsewhere."""
    # The fold's row first: a fold committed after it only makes more of the rollup current.
    split = _split(tenant, filters, ErrorFold.objects.filter(pk=1).first())
    live: list[tuple[Key, Counter[str]]] = []
    if split.live:
        runs = _runs_of(tenant, filters.task_type, split.live)
        live = [(key[2:], c) for key, c in counts_recount(runs, grains).items()]
    return _summed([*_rolled(tenant, filters, split, grains).items(), *live])


# --- the fold ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Folded:
    hours: int
    rows: int
    last_event_id: int


def _store(tenant_id: int, ranges: list[tuple[datetime, datetime]]) -> int:
    """Replace the rollup's rows of these hours of the tenant with a recount of them."""
    ErrorCount.objects.filter(_created_in(ranges, "hour"), tenant_id=tenant_id).delete()
    counts = counts_recount(Run.objects.filter(_created_in(ranges), tenant_id=tenant_id))
    rows = [
        ErrorCount(
            tenant_id=tenant_id,
            hour=hour,
            grain=grain,
            task_type=task_type,
            tool=tool,
            error_class=error_class,
            **{m: counted[m] for m in MEASURES},
        )
        for (_tenant, hour, grain, task_type, tool, error_class), counted in counts.items()
        if any(counted.values())
    ]
    ErrorCount.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def _hours_to_fold(fold: ErrorFold, until: datetime) -> dict[int, list[tuple[datetime, datetime]]]:
    """Per tenant, the hours to recount: all of them the first time; then those of the runs
    with an event since the last fold, and those since it."""
    tenants = list(Tenant.objects.values_list("pk", flat=True))
    if fold.counted_before is None:
        first = Run.objects.order_by("created_at").values_list("created_at", flat=True).first()
        if first is None:
            return {}
        start, chunks = hour_of(first), []
        while start < until:
            chunks.append((start, min(start + BACKFILL_CHUNK, until)))
            start = chunks[-1][1]
        return {tenant: chunks for tenant in tenants}
    since = [(fold.counted_before, until)] if fold.counted_before < until else []
    events = JournalEvent.objects.filter(pk__gt=fold.last_event_id)
    changed = events.annotate(hour=TruncHour("run__created_at", tzinfo=UTC)).values_list(
        "run__tenant_id", "hour"
    )
    per_tenant: dict[int, set[datetime]] = defaultdict(set)
    for tenant_id, hour in changed.distinct().order_by():
        if hour_of(hour) < fold.counted_before:
            per_tenant[tenant_id].add(hour_of(hour))
    return {
        tenant: [*since, *_ranges_of(per_tenant[tenant])] for tenant in tenants if since or per_tenant[tenant]
    }


def errors_fold(*, now: datetime | None = None) -> Folded:
    """Bring the error rollup up to date (see the module's docstring); run by the beat task
    insights.fold_error_counts, and by `manage.py insights --fold` (the first one backfills)."""
    with transaction.atomic(durable=True):
        ErrorFold.objects.bulk_create([ErrorFold(pk=1)], ignore_conflicts=True)
        fold = ErrorFold.objects.select_for_update().get(pk=1)
        now = now or timezone.now()
        # The newest event seen: the last one older than the margin (the primary key read
        # backwards from the newest, through the margin's few events).
        seen = (
            JournalEvent.objects.filter(pk__gt=fold.last_event_id, at__lte=now - FOLD_MARGIN)
            .order_by("-pk")
            .values_list("pk", flat=True)
            .first()
        )
        until = hour_of(now) + HOUR
        backfill = fold.counted_before is None
        hours = rows = 0
        for tenant_id, ranges in _hours_to_fold(fold, until).items():
            rows += _store(tenant_id, ranges)
            hours += sum(round((b - a) / HOUR) for a, b in ranges)
        fold.counted_before, fold.folded_at = until, now
        fold.last_event_id = seen or fold.last_event_id
        fold.save()
    if backfill:
        # Fresh statistics for the page's read: planned on an empty table's, it sorted the
        # period's 26,000 rows (88 ms at 1,000,000 runs) where it now hashes them (27 ms).
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {ErrorCount._meta.db_table}")
    return Folded(hours=hours, rows=rows, last_event_id=fold.last_event_id)
