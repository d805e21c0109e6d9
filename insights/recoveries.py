"""Insights on recovery: of the runs a machine had to pick up after their agent stopped, how many
a machine finished and how many went to a person, per task type and per tool, with the hours
people had them; and why a machine could not finish (the typed reasons of journal.why).

A run "a machine had to pick up" is one with, in the period, a call reconciliation settled (the
agent left it open) or a dead-run decision (resumed or handed over by the sweep). It counts as
finished by a machine when it completed with no escalation, and as handed to a person when it has
an escalation. People's hours are, of its resolved escalations, the hours from handover to
resolution: the time a person had the run, which the audit trail does not split further."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Sum

from handover import why_words
from journal.models import Escalation, JournalEvent, Run, RunStatus, Tenant

from .selectors import Breakdown, Column, EpochSeconds, InsightsFilters, Row, _escalations_of, _for_runs

# The events that say a machine picked the run up: a call settled by reconciliation, the sweep
# resuming the run, or handing it over.
PICKED_UP = (
    JournalEvent.Kind.INTENT_RECONCILED,
    JournalEvent.Kind.RUN_RESUMED,
    JournalEvent.Kind.RUN_ESCALATED,
)

COLUMNS = (
    Column("machine", "Finished by a machine", colour="#009e73"),
    Column("person", "Handed to a person", colour="#d55e00"),
    Column("hours", "Hours with a person", charted=False),
)


def _person_seconds() -> Subquery:
    """The seconds from handover to resolution of the run's resolved escalations, summed."""
    took = EpochSeconds(F("resolved_at") - F("created_at"))
    return Subquery(
        Escalation.objects.filter(run=OuterRef("run_id"), resolved_at__isnull=False)
        .values("run")
        .annotate(seconds=Sum(took))
        .values("seconds")[:1]
    )


def _picked_up(*, tenant: Tenant, filters: InsightsFilters) -> QuerySet[Any]:
    """One row per (run, tool) a machine picked up in the period, with whether the run went to a
    person and whether it completed: the tool is the reconciled call's, or "" for a decision."""
    events = _for_runs(
        JournalEvent.objects.filter(
            kind__in=PICKED_UP, run__tenant=tenant, at__gte=filters.start, at__lt=filters.end
        ),
        "run",
        filters,
    )
    escalated = Escalation.objects.filter(run=OuterRef("run_id"))
    return events.annotate(
        to_person=Exists(escalated),
        completed=Q(run__status=RunStatus.COMPLETED),
    )


def _rows(grouped: Iterable[Mapping[str, Any]], key: str, label: Callable[[Any], str]) -> tuple[Row, ...]:
    def hours(seconds: float | None) -> float:
        return round((seconds or 0) / 3600, 1)

    return tuple(
        Row(str(g[key] or ""), label(g[key]), (g["machine"], g["person"], hours(g["seconds"])))
        for g in grouped
    )


def recoveries_per_task_type(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Runs a machine picked up, per task type: finished by a machine, handed to a person, and
    the hours people had them."""
    # The runs come from the period's picked-up events (a partial index holds just those). The
    # ones handed to a person are read from their escalations, which carry the run's tenant and
    # task type; only the others are read from the runs, by primary key. Reading every picked-up
    # run, or four scalar subqueries per event, cost a lookup of the 1,000,000-row run table per
    # run or more (bench/pages.py); joining the events to the runs any other way read them all.
    picked_up = JournalEvent.objects.filter(kind__in=PICKED_UP, at__gte=filters.start, at__lt=filters.end)
    escalations = Escalation.objects.filter(tenant=tenant, run_id__in=picked_up.values("run_id"))
    machine = Run.objects.filter(
        pk__in=picked_up.filter(~Exists(Escalation.objects.filter(run=OuterRef("run_id")))).values("run_id"),
        tenant=tenant,
        status=RunStatus.COMPLETED,
    )
    if filters.task_type:
        escalations = escalations.filter(task_type=filters.task_type)
        machine = machine.filter(task_type=filters.task_type)
    took = EpochSeconds(F("resolved_at") - F("created_at"))
    per_type: dict[str, dict[str, Any]] = {}

    def counts(task_type: str) -> dict[str, Any]:
        return per_type.setdefault(
            task_type, {"task_type": task_type, "machine": 0, "person": 0, "seconds": 0.0}
        )

    # Counted and summed per task type by the database: one row per run cost 8,567 rows at
    # a million runs, read into Python to be added up.
    per_person = escalations.values("task_type").annotate(
        runs=Count("run_id", distinct=True), seconds=Sum(took)
    )
    for handed in per_person.order_by():
        counts(handed["task_type"])["person"] += handed["runs"]
        counts(handed["task_type"])["seconds"] += handed["seconds"] or 0.0
    for finished in machine.values("task_type").annotate(n=Count("pk")).order_by():
        counts(finished["task_type"])["machine"] += finished["n"]
    grouped = [per_type[task_type] for task_type in sorted(per_type)]
    return Breakdown(
        row_heading="Task type",
        unit="runs",
        columns=COLUMNS,
        rows=_rows(grouped, "task_type", str),
    )


def recoveries_per_tool(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Runs whose calls reconciliation settled, per tool of those calls: finished by a machine,
    handed to a person, and the hours people had them (a run with calls of two tools counts for
    each)."""
    calls = (
        _picked_up(tenant=tenant, filters=filters)
        .filter(kind=JournalEvent.Kind.INTENT_RECONCILED)
        .annotate(seconds=_person_seconds())
        .values("intent__tool", "run_id", "to_person", "completed", "seconds")
        # Without order_by() the events' default ordering (at, id) joins the DISTINCT, and a run
        # with two settled calls of one tool counted twice.
        .order_by()
        .distinct()
    )
    per_tool: dict[str, dict[str, float]] = {}
    for call in calls:
        tool = per_tool.setdefault(call["intent__tool"] or "", {"machine": 0, "person": 0, "seconds": 0.0})
        if call["to_person"]:
            tool["person"] += 1
            tool["seconds"] += call["seconds"] or 0.0
        elif call["completed"]:
            tool["machine"] += 1
    grouped = [{"tool": tool, **counts} for tool, counts in sorted(per_tool.items())]
    return Breakdown(
        row_heading="Tool",
        unit="runs",
        columns=COLUMNS,
        rows=_rows(grouped, "tool", lambda tool: tool or "unknown tool"),
    )


def escalations_by_why(*, tenant: Tenant, filters: InsightsFilters) -> Breakdown:
    """Escalations opened in the period, by why a machine could not finish (journal.why.RunWhy);
    one opened before reasons were typed counts under "not recorded"."""
    escalations = _escalations_of(
        tenant=tenant, filters=filters, created_at__gte=filters.start, created_at__lt=filters.end
    )
    counts = escalations.values("why__code").annotate(n=Count("pk")).order_by("-n", "why__code")
    rows = tuple(
        Row(str(c["why__code"] or ""), why_words.run_why_label(c["why__code"] or ""), (c["n"],))
        for c in counts
    )
    return Breakdown(
        row_heading="Why", unit="escalations", columns=(Column("escalations", "Escalations"),), rows=rows
    )
