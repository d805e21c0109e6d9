"""A run a machine picked up counts once, however many of its calls reconciliation settled: once
per task type, and once per tool even when two of its calls of that tool were settled. The per
task type panel starts from the period's events, so another tenant's run and a run of another
task type than the one chosen must still not count."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import pytest

from insights import recoveries
from insights.selectors import Breakdown, InsightsFilters
from journal import services, transitions
from journal.models import IntentStatus, JournalEvent, Run, RunStatus, Tenant
from journal.services import Actor
from journal.why import CallVerdict, why

pytestmark = pytest.mark.django_db

RECONCILER = Actor.system("reconciliation")
PERIOD = InsightsFilters(since=date(2026, 11, 2), until=date(2026, 11, 15))


def _reconciled(run: Run, tool: str, turn: int, when: datetime, agent_actor: Actor) -> None:
    """A call the agent left open, found performed by reconciliation at `when`."""
    intent = services.intent_record(
        run=run, tool=tool, args={"turn": turn}, turn=turn, actor=agent_actor
    ).intent
    verdict = why(CallVerdict.FOUND_PERFORMED)
    moved = transitions.intent_transition(
        intent=intent,
        source=IntentStatus.INTENDED,
        target=IntentStatus.PERFORMED,
        actor=RECONCILER,
        event=JournalEvent.Kind.INTENT_RECONCILED,
        data={"status": IntentStatus.PERFORMED, "how": "lookup", "tool": tool, "verdict": verdict.as_json()},
        changes={"verdict": verdict.as_json(), "settled_at": when},
        at=when,
    )
    assert moved.moved


def _table(breakdown: Breakdown) -> list[tuple[str, tuple[Any, ...]]]:
    return [(row.label, row.values) for row in breakdown.rows]


@pytest.fixture
def twice_settled(make_run: Callable[..., Run], other_tenant: Tenant, agent_actor: Actor) -> None:
    run = make_run(task_type="returns", ticket_id="T-1")
    _reconciled(run, "issue_refund", 1, datetime(2026, 11, 3, 10, tzinfo=UTC), agent_actor)
    _reconciled(run, "issue_refund", 2, datetime(2026, 11, 3, 11, tzinfo=UTC), agent_actor)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    warranty = make_run(task_type="warranty", ticket_id="T-2")
    _reconciled(warranty, "issue_refund", 1, datetime(2026, 11, 4, tzinfo=UTC), agent_actor)
    Run.objects.filter(pk=warranty.pk).update(status=RunStatus.COMPLETED)
    elsewhere = make_run(tenant=other_tenant, task_type="returns")
    _reconciled(elsewhere, "issue_refund", 1, datetime(2026, 11, 4, tzinfo=UTC), agent_actor)
    Run.objects.filter(pk=elsewhere.pk).update(status=RunStatus.COMPLETED)


def test_a_run_with_two_settled_calls_of_one_tool_counts_once(tenant: Tenant, twice_settled: None) -> None:
    assert _table(recoveries.recoveries_per_tool(tenant=tenant, filters=PERIOD)) == [
        ("issue_refund", (2, 0, 0.0)),
    ]
    assert _table(recoveries.recoveries_per_task_type(tenant=tenant, filters=PERIOD)) == [
        ("returns", (1, 0, 0.0)),
        ("warranty", (1, 0, 0.0)),
    ]


def test_the_chosen_task_type_and_the_tenant_bound_the_runs(tenant: Tenant, twice_settled: None) -> None:
    only_returns = InsightsFilters(since=PERIOD.since, until=PERIOD.until, task_type="returns")
    assert _table(recoveries.recoveries_per_task_type(tenant=tenant, filters=only_returns)) == [
        ("returns", (1, 0, 0.0)),
    ]
