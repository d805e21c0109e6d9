"""The insights page's recovery panels (insights.recoveries) on known rows: of the runs a machine
picked up after their agent stopped, which a machine finished and which went to a person, per
task type and per tool, with the hours people had them; and escalations by their typed reason.
Another tenant's rows and rows outside the period never count."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from insights import recoveries
from insights.selectors import Breakdown, InsightsFilters
from journal import services, transitions
from journal.models import Escalation, Intent, IntentStatus, JournalEvent, Run, RunStatus, Tenant
from journal.services import Actor
from journal.why import CallVerdict, RunWhy, why

pytestmark = pytest.mark.django_db

RECONCILER = Actor.system("reconciliation")
PERIOD = InsightsFilters(since=date(2026, 11, 2), until=date(2026, 11, 15))


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def _reconciled(
    run: Run, tool: str, status: str, when: datetime, agent_actor: Actor, *, turn: int = 1
) -> Intent:
    """A call the agent left open (at `turn`), settled by reconciliation at `when`."""
    intent = services.intent_record(
        run=run, tool=tool, args={"n": tool, "turn": turn}, turn=turn, actor=agent_actor
    ).intent
    verdict = why(CallVerdict.FOUND_PERFORMED if status == IntentStatus.PERFORMED else CallVerdict.NO_LOOKUP)
    moved = transitions.intent_transition(
        intent=intent,
        source=IntentStatus.INTENDED,
        target=status,
        actor=RECONCILER,
        event=JournalEvent.Kind.INTENT_RECONCILED,
        data={"status": status, "how": "lookup", "tool": tool, "verdict": verdict.as_json()},
        changes={"verdict": verdict.as_json(), "settled_at": when},
        at=when,
    )
    assert moved.moved
    return intent


def _handed_over(run: Run, code: str, opened: datetime, resolved: datetime | None = None) -> None:
    Run.objects.filter(pk=run.pk).update(status=RunStatus.ESCALATED)
    Escalation.objects.create(
        run=run, reason="unknown_outcome", why={"code": code}, created_at=opened, resolved_at=resolved
    )


def _table(breakdown: Breakdown) -> list[tuple[str, tuple[Any, ...]]]:
    return [(row.label, row.values) for row in breakdown.rows]


@pytest.fixture
def picked_up(make_run: Callable[..., Run], other_tenant: Tenant, agent_actor: Actor) -> None:
    # Finished by a machine: its refund was found performed, and the run completed.
    machine = make_run(task_type="returns", ticket_id="T-1")
    _reconciled(machine, "issue_refund", IntentStatus.PERFORMED, at(3, 10), agent_actor)
    Run.objects.filter(pk=machine.pk).update(status=RunStatus.COMPLETED)
    # Handed to a person for 2 h: nobody could find out what its fax did.
    person = make_run(task_type="returns", ticket_id="T-2")
    _reconciled(person, "send_fax", IntentStatus.UNKNOWN, at(4, 9), agent_actor)
    _handed_over(person, RunWhy.CALLS_UNKNOWN, at(4, 10), at(4, 12))
    # Handed over with no call reconciled: the sweep's decision (no policy), still open.
    undecided = make_run(task_type="warranty", ticket_id="T-3")
    JournalEvent.objects.create(
        run=undecided,
        kind=JournalEvent.Kind.RUN_ESCALATED,
        actor_kind="system",
        actor_name="sweep",
        at=at(5),
        data={},
    )
    _handed_over(undecided, RunWhy.NO_POLICY, at(5))
    # Never picked up: it completed by itself. Another tenant's, and one outside the period.
    make_run(task_type="returns", ticket_id="T-4")
    _reconciled(
        make_run(tenant=other_tenant, task_type="returns"),
        "issue_refund",
        IntentStatus.UNKNOWN,
        at(3),
        agent_actor,
    )
    _reconciled(
        make_run(task_type="returns", ticket_id="T-5"),
        "issue_refund",
        IntentStatus.UNKNOWN,
        at(16),
        agent_actor,
    )


def test_per_task_type_machine_finished_and_person_handled_runs_with_peoples_hours(
    tenant: Tenant, picked_up: None
) -> None:
    assert _table(recoveries.recoveries_per_task_type(tenant=tenant, filters=PERIOD)) == [
        ("returns", (1, 1, 2.0)),
        ("warranty", (0, 1, 0.0)),
    ]


def test_per_tool_counts_the_runs_of_each_reconciled_tool(tenant: Tenant, picked_up: None) -> None:
    assert _table(recoveries.recoveries_per_tool(tenant=tenant, filters=PERIOD)) == [
        ("issue_refund", (1, 0, 0.0)),
        ("send_fax", (0, 1, 2.0)),
    ]


def test_escalations_by_why_name_each_typed_reason(tenant: Tenant, picked_up: None) -> None:
    assert _table(recoveries.escalations_by_why(tenant=tenant, filters=PERIOD)) == [
        ("calls nobody could settle", (1,)),
        ("no recovery policy", (1,)),
    ]


def test_the_page_and_its_csv_show_the_recovery_panels(
    client: Client, tenant: Tenant, picked_up: None, persona: Any
) -> None:
    client.force_login(persona("team_lead", tenant))
    page = client.get(reverse("insights:page"), {"since": "2026-11-02", "until": "2026-11-15"})
    assert page.status_code == 200
    body = page.content.decode()
    assert "Why a machine could not finish" in body and "Picked up after a crash, per task type" in body
    csv = client.get(
        reverse("insights:csv"), {"since": "2026-11-02", "until": "2026-11-15", "chart": "recoveries"}
    )
    assert csv.status_code == 200
    text = b"".join(csv.streaming_content).decode()  # type: ignore[attr-defined]
    assert "Finished by a machine" in text and "returns" in text
