"""The recovery panels (insights.recoveries) against a recount in Python of random rows, following
the panels' own definitions through each run: of the runs a machine picked up in the period (a
call reconciliation settled, a dead run resumed or handed over), those with an escalation went to a
person, for as many hours as their resolved escalations were open; the others that completed were
finished by a machine. Per tool, each (tool of a settled call, run) counts once. Two tenants, three
task types, events inside and outside the period, and three seeds."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from insights import recoveries
from insights.selectors import Breakdown, InsightsFilters
from journal.models import Escalation, Intent, IntentStatus, JournalEvent, Run, RunStatus, Tenant
from journal.services import Actor
from tests.insights.test_recoveries import _reconciled

pytestmark = pytest.mark.django_db

PERIOD = InsightsFilters(since=date(2026, 11, 2), until=date(2026, 11, 15))
TASK_TYPES = ("returns", "exchanges", "warranty")
TOOLS = ("issue_refund", "send_fax", "reserve")
START = datetime(2026, 10, 28, tzinfo=UTC)  # the rows fall from five days before the period to after it


def _when(rng: random.Random) -> datetime:
    return START + timedelta(hours=rng.randint(0, 24 * 24))


def _random_runs(
    rng: random.Random, tenants: list[Tenant], make_run: Callable[..., Run], agent: Actor
) -> None:
    for n in range(30):
        run = make_run(tenant=rng.choice(tenants), task_type=rng.choice(TASK_TYPES), ticket_id=f"T-{n}")
        for turn in range(1, rng.randint(1, 3)):  # calls reconciliation settled, some of one tool twice
            status = rng.choice([IntentStatus.PERFORMED, IntentStatus.UNKNOWN, IntentStatus.NOT_PERFORMED])
            _reconciled(run, rng.choice(TOOLS), status, _when(rng), agent, turn=turn)
        if rng.random() < 0.3:  # the sweep resumed it or handed it over
            kind = rng.choice([JournalEvent.Kind.RUN_RESUMED, JournalEvent.Kind.RUN_ESCALATED])
            JournalEvent.objects.create(
                run=run, kind=kind, actor_kind="system", actor_name="sweep", at=_when(rng), data={}
            )
        for _ in range(rng.choice([0, 0, 1, 2])):
            opened = _when(rng)
            resolved = opened + timedelta(minutes=rng.randint(10, 3000)) if rng.random() < 0.6 else None
            Escalation.objects.create(
                run=run, reason="unknown_outcome", created_at=opened, resolved_at=resolved
            )
        status = rng.choice(
            [RunStatus.COMPLETED, RunStatus.COMPLETED, RunStatus.RUNNING, RunStatus.ESCALATED]
        )
        Run.objects.filter(pk=run.pk).update(status=status)


def _recount(tenant: Tenant, filters: InsightsFilters) -> dict[str, dict[str, tuple[int, int, float]]]:
    """Both panels' rows, counted in Python from every event, run and escalation."""
    runs = {run.pk: run for run in Run.objects.filter(tenant=tenant)}
    if filters.task_type:
        runs = {pk: run for pk, run in runs.items() if run.task_type == filters.task_type}
    seconds: dict[Any, float] = defaultdict(float)
    escalated = set()
    for escalation in Escalation.objects.all():
        escalated.add(escalation.run_id)
        if escalation.resolved_at:
            seconds[escalation.run_id] += (escalation.resolved_at - escalation.created_at).total_seconds()
    picked_up: set[Any] = set()
    by_tool: set[tuple[str, Any]] = set()
    for event in JournalEvent.objects.filter(kind__in=recoveries.PICKED_UP, run_id__in=runs):
        if filters.start <= event.at < filters.end:
            picked_up.add(event.run_id)
            if event.kind == JournalEvent.Kind.INTENT_RECONCILED:
                by_tool.add((Intent.objects.get(pk=event.intent_id).tool, event.run_id))

    def rows(pairs: list[tuple[str, Any]]) -> dict[str, tuple[int, int, float]]:
        found: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
        for key, run_id in pairs:
            if run_id in escalated:
                found[key][1] += 1
                found[key][2] += seconds[run_id]
            elif runs[run_id].status == RunStatus.COMPLETED:
                found[key][0] += 1
        return {key: (int(m), int(p), round(s / 3600, 1)) for key, (m, p, s) in found.items() if m or p}

    return {
        "task_type": rows([(runs[run_id].task_type, run_id) for run_id in picked_up]),
        "tool": rows(sorted(by_tool)),
    }


def _shown(breakdown: Breakdown) -> dict[str, tuple[int, int, float]]:
    return {row.key: tuple(row.values) for row in breakdown.rows if row.values[0] or row.values[1]}  # type: ignore[misc]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_recovery_panels_equal_a_recount_of_random_rows(
    seed: int, tenant: Tenant, other_tenant: Tenant, make_run: Callable[..., Run], agent_actor: Actor
) -> None:
    _random_runs(random.Random(seed), [tenant, other_tenant], make_run, agent_actor)
    shown = 0
    for who in (tenant, other_tenant):
        for task_type in ("", "returns"):
            filters = InsightsFilters(since=PERIOD.since, until=PERIOD.until, task_type=task_type)
            expected = _recount(who, filters)
            per_type = _shown(recoveries.recoveries_per_task_type(tenant=who, filters=filters))
            per_tool = _shown(recoveries.recoveries_per_tool(tenant=who, filters=filters))
            assert (per_type, per_tool) == (expected["task_type"], expected["tool"]), (who.slug, task_type)
            shown += len(per_type) + len(per_tool)
    assert shown > 0  # the random rows fell in the period
