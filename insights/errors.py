"""Insights on errors: how the runs started in the period met their failures, per task type and
per tool: retries, repairs, replans, reflections and escalations per run, loops caught, and the
error classes the calls failed with.

The counts are handover.attempts' (the run page's and the handover API's): retries, repairs and
replans the larger of what the calls show and what the agent reported, reflections and
escalations as reported, a loop a run stopped with the reason code `looping`. Only runs with a
failed call can show a retry, repair or replan the agent did not report, so only their calls are
read, as digests of the arguments (md5 of the canonical JSON), in one query; everything else is
an aggregate computed by PostgreSQL.

Per tool, a retry or repair is the tool's that was called again, a replan the tool whose conflict
led to it; reflections and escalations belong to no tool and are shown per task type only."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum, TextField
from django.db.models.functions import MD5, Cast

from handover.attempts import DERIVED, LOOPING, REPORTED, Call, walk
from journal.models import ErrorClass, Intent, IntentStatus, Run, Tenant

from .selectors import Breakdown, Column, InsightsFilters, Row

UNCLASSIFIED = "unclassified"


def _class_label(error_class: str) -> str:
    return str(ErrorClass(error_class).label) if error_class in ErrorClass.values else UNCLASSIFIED


PER_RUN = tuple(Column(name, f"{name.capitalize()} per run") for name in REPORTED)


def _runs(*, tenant: Tenant, filters: InsightsFilters) -> QuerySet[Run]:
    """The tenant's runs started in the period (of the task type, if one is chosen)."""
    runs = Run.objects.filter(tenant=tenant, created_at__gte=filters.start, created_at__lt=filters.end)
    return runs.filter(task_type=filters.task_type) if filters.task_type else runs


@dataclass
class _Derived:
    """What the calls of the runs with failures add to what their agents reported: per task type
    the counts beyond the reported ones; per tool the derived counts, the error classes of its
    failed calls, and the loops caught."""

    beyond: dict[str, Counter[str]] = field(default_factory=dict)  # task type → counter → extra
    per_tool: dict[str, Counter[str]] = field(default_factory=dict)  # tool → counter → derived
    classes_per_tool: dict[str, Counter[str]] = field(default_factory=dict)
    loops_per_tool: Counter[str] = field(default_factory=Counter)


# What is read of each call of a run with a failure, and of its run.
_RUN_COLUMNS = ("run__task_type", "run__outcome_why__code", *(f"run__{name}" for name in REPORTED))


def _calls_by_run(runs: QuerySet[Run]) -> dict[Any, tuple[dict[str, Any], list[Call]]]:
    """The calls of the runs with a failure, in order, their arguments as digests, with each
    run's task type, reason code and reported counters (one query)."""
    # The runs come from the failed calls (a partial index holds just those), each checked
    # against `runs` by its primary key: asking each of the period's runs whether it has a
    # failed call read every run, and then every call (bench/pages.py at 1,000,000 runs).
    of_runs = runs.filter(pk=OuterRef("run_id")).order_by()
    failed = (
        Intent.objects.filter(status=IntentStatus.FAILED)
        .order_by()
        .alias(in_runs=Subquery(of_runs.values("pk")[:1]))
        .filter(in_runs__isnull=False)
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


def _derived(runs: QuerySet[Run]) -> _Derived:
    """Walk the calls of the runs with a failure (handover.attempts.walk)."""
    found = _Derived()
    for run, run_calls in _calls_by_run(runs).values():
        walked = walk(run_calls)
        beyond = found.beyond.setdefault(run["run__task_type"], Counter())
        for name in DERIVED:
            # The count is the larger of the derived and the reported (handover.attempts).
            beyond[name] += max(0, walked.counts[name] - run[f"run__{name}"])
        for tool, counted in walked.per_tool.items():
            found.per_tool.setdefault(tool, Counter()).update(counted)
        failed = [c for c in run_calls if c.status == IntentStatus.FAILED]
        for call in failed:
            found.classes_per_tool.setdefault(call.tool, Counter())[call.error_class] += 1
        if run["run__outcome_why__code"] == LOOPING:
            found.loops_per_tool.update({c.tool for c in failed})
    return found


def _per_run(total: int, runs: int) -> float:
    return round(total / runs, 2) if runs else 0.0


def errors_per_task_type(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Per task type, of the runs started in the period: retries, repairs, replans, reflections
    and escalations per run, the runs, and the loops caught."""
    runs = _runs(tenant=tenant, filters=filters)
    grouped = (
        runs.values("task_type")
        .annotate(
            n=Count("pk"),
            loops=Count("pk", filter=Q(outcome_why__code=LOOPING)),
            **{f"reported_{name}": Sum(name) for name in REPORTED},
        )
        .order_by("task_type")
    )
    beyond = _derived(runs).beyond
    rows = []
    for g in cast(list[dict[str, Any]], list(grouped)):
        extra = beyond.get(g["task_type"], Counter())
        totals = [(g[f"reported_{name}"] or 0) + extra[name] for name in REPORTED]
        rows.append(
            Row(g["task_type"], g["task_type"], (*(_per_run(t, g["n"]) for t in totals), g["n"], g["loops"]))
        )
    return Breakdown(
        row_heading="Task type",
        unit="per run",
        columns=(
            *PER_RUN,
            Column("runs", "Runs", charted=False),
            Column("loops", "Loops caught", charted=False),
        ),
        rows=tuple(rows),
        stacking="grouped",
    )


def errors_per_tool(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Per tool, of the runs started in the period: retries, repairs and replans per run that
    called it, the runs, the calls, the failed ones, the loops caught; labelled with its
    commonest error class."""
    runs = _runs(tenant=tenant, filters=filters)
    tools = (
        Intent.objects.filter(run__in=runs)
        .values("tool")
        .annotate(runs=Count("run_id", distinct=True), calls=Count("pk"))
        .order_by("tool")
    )
    derived = _derived(runs)
    rows = []
    for t in tools:
        tool, counted = t["tool"], derived.per_tool.get(t["tool"], Counter())
        classes = derived.classes_per_tool.get(tool, Counter())
        per_run = tuple(_per_run(counted[name], t["runs"]) for name in DERIVED)
        numbers = (*per_run, t["runs"], t["calls"], classes.total(), derived.loops_per_tool[tool])
        label = f"{tool} ({_class_label(_commonest(classes))})" if classes else tool
        rows.append(Row(tool, label, numbers))
    rows.sort(key=lambda row: (-(row.values[-2] or 0), row.key))
    return Breakdown(
        row_heading="Tool (commonest error)",
        unit="per run",
        columns=(
            *PER_RUN[: len(DERIVED)],
            Column("runs", "Runs", charted=False),
            Column("calls", "Calls", charted=False),
            Column("failed", "Failed calls", charted=False),
            Column("loops", "Loops caught", charted=False),
        ),
        rows=tuple(rows),
        stacking="grouped",
    )


def _commonest(classes: Counter[str]) -> str:
    return min(classes, key=lambda code: (-classes[code], code))


def error_classes(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """The error classes the calls of the runs started in the period failed with, the commonest
    first: the failed calls, the runs they failed in, and of those the runs stopped for looping."""
    runs = _runs(tenant=tenant, filters=filters)
    classes = (
        Intent.objects.filter(run__in=runs, status=IntentStatus.FAILED)
        .values("error_class")
        .annotate(
            calls=Count("pk"),
            runs=Count("run_id", distinct=True),
            loops=Count("run_id", distinct=True, filter=Q(run__outcome_why__code=LOOPING)),
        )
        .order_by("-calls", "error_class")
    )
    rows = tuple(
        Row(
            c["error_class"],
            _class_label(c["error_class"]),
            (c["calls"], c["runs"], c["loops"]),
        )
        for c in classes
    )
    return Breakdown(
        row_heading="Error class",
        unit="failed calls",
        columns=(
            Column("calls", "Failed calls"),
            Column("runs", "Runs", charted=False),
            Column("loops", "Runs stopped looping", charted=False),
        ),
        rows=rows,
    )
