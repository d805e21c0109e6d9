"""Insights on errors: how the runs started in the period met their failures, per task type and
per tool: retries, repairs, replans, reflections and escalations per run, loops caught, and the
error classes the calls failed with.

The counts are handover.attempts' (the run page's and the handover API's): retries, repairs and
replans the larger of what the calls show and what the agent reported, reflections and
escalations as reported, a loop a run stopped with the reason code `looping`. They are summed
from insights.error_counts: a rollup kept per hour by a beat task, and a live recount of what it
does not hold yet; `recount=True` counts the whole period from the journal's rows instead (the
reference the rollup is checked against).

Per tool, a retry or repair is the tool's that was called again, a replan the tool whose conflict
led to it; reflections and escalations belong to no tool and are shown per task type only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from handover.attempts import DERIVED, REPORTED
from journal.models import ErrorClass, Tenant

from .error_counts import CLASS, RUN, TOOL, TOOL_CLASS, Counts, error_counts, period_recount
from .selectors import Breakdown, Column, InsightsFilters, Row

UNCLASSIFIED = "unclassified"


def _class_label(error_class: str) -> str:
    return str(ErrorClass(error_class).label) if error_class in ErrorClass.values else UNCLASSIFIED


PER_RUN = tuple(Column(name, f"{name.capitalize()} per run") for name in REPORTED)


def _counts(tenant: Tenant, filters: InsightsFilters, grains: Collection[str], recount: bool) -> Counts:
    if recount:
        return period_recount(tenant=tenant, filters=filters, grains=grains)
    return error_counts(tenant=tenant, filters=filters, grains=grains)


def _by(counts: Counts, grain: str, part: int) -> dict[str, Counter[str]]:
    """The counts of one grain summed by one part of their key (1 task type, 2 tool, 3 class)."""
    found: dict[str, Counter[str]] = {}
    for key, counted in counts.items():
        if key[0] == grain:
            found.setdefault(key[part], Counter()).update(counted)
    return found


def _per_run(total: int, runs: int) -> float:
    return round(total / runs, 2) if runs else 0.0


def errors_per_task_type(*, tenant: Tenant, filters: InsightsFilters, recount: bool = False) -> Breakdown:
    """Per task type, of the runs started in the period: retries, repairs, replans, reflections
    and escalations per run, the runs, and the loops caught."""
    per_type = _by(_counts(tenant, filters, {RUN}, recount), RUN, 1)
    rows = []
    for task_type in sorted(t for t, counted in per_type.items() if counted["runs"]):
        counted = per_type[task_type]
        n = counted["runs"]
        per_run = tuple(_per_run(counted[name], n) for name in REPORTED)
        rows.append(Row(task_type, task_type, (*per_run, n, counted["loops"])))
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


def errors_per_tool(*, tenant: Tenant, filters: InsightsFilters, recount: bool = False) -> Breakdown:
    """Per tool, of the runs started in the period: retries, repairs and replans per run that
    called it, the runs, the calls, the failed ones, the loops caught; labelled with its
    commonest error class."""
    counts = _counts(tenant, filters, {TOOL, TOOL_CLASS}, recount)
    tools = _by(counts, TOOL, 2)
    classes_per_tool: dict[str, Counter[str]] = {}
    for (grain, _task_type, tool, error_class), counted in counts.items():
        if grain == TOOL_CLASS and counted["calls"]:
            classes_per_tool.setdefault(tool, Counter())[error_class] += counted["calls"]
    rows = []
    for tool in sorted(t for t, counted in tools.items() if counted["runs"]):
        counted, classes = tools[tool], classes_per_tool.get(tool, Counter())
        per_run = tuple(_per_run(counted[name], counted["runs"]) for name in DERIVED)
        numbers = (*per_run, counted["runs"], counted["calls"], classes.total(), counted["loops"])
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


def error_classes(*, tenant: Tenant, filters: InsightsFilters, recount: bool = False) -> Breakdown:
    """The error classes the calls of the runs started in the period failed with, the commonest
    first: the failed calls, the runs they failed in, and of those the runs stopped for looping."""
    classes = _by(_counts(tenant, filters, {CLASS}, recount), CLASS, 3)
    found = sorted((c for c in classes.items() if c[1]["calls"]), key=lambda c: (-c[1]["calls"], c[0]))
    rows = tuple(
        Row(error_class, _class_label(error_class), (c["calls"], c["runs"], c["loops"]))
        for error_class, c in found
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
