"""The insights page's error panels (insights.errors) on known rows: per task type and per tool,
retries, repairs, replans, reflections and escalations per run (the larger of what the calls show
and what the agent reported), loops caught, and the error classes. Another tenant's runs and runs
started outside the period never count."""

from __future__ import annotations

import csv
import io
import itertools
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from insights import errors
from insights.selectors import Breakdown, InsightsFilters
from journal.models import Run, Tenant
from tests import factories

pytestmark = pytest.mark.django_db

# A run stopped for looping, with the facts its reason carries (journal.why's looping).
LOOPING_WHY = {
    "code": "looping",
    "refusals": 5,
    "minutes": 10,
    "calls": [{"tool": "refund", "error_class": "permanent", "attempts": 3}],
}
PERIOD = InsightsFilters(since=date(2026, 11, 2), until=date(2026, 11, 15))
_n = itertools.count()


def _run(
    tenant: Tenant, agent_actor: Any, task_type: str, calls: list[tuple[Any, ...]], **fields: Any
) -> Run:
    """A run started on 5 Nov with these calls (tool, args, status, error class) in order."""
    run = factories.run_via_service(tenant=tenant, actor=agent_actor, task_type=task_type)
    started = datetime(2026, 11, 5, 9, tzinfo=UTC)
    for tool, args, status, error_class in calls:
        n = next(_n)
        factories.call_row(
            run, tool, args, status, n=n, at=started + timedelta(seconds=n), error_class=error_class
        )
    Run.objects.filter(pk=run.pk).update(created_at=fields.pop("created_at", started), **fields)
    return run


@pytest.fixture
def seen(tenant: Tenant, other_tenant: Tenant, agent_actor: Any) -> None:
    looping = [("refund", {"n": 1}, "failed", "permanent")] * 3 + [
        ("credit", {"a": -1}, "failed", "invalid_input"),
        ("credit", {"a": 5}, "performed", ""),
    ]
    _run(tenant, agent_actor, "returns", looping, reflections=4, outcome_why=LOOPING_WHY)
    replanned = [
        ("reserve", {"sku": "A"}, "failed", "conflict"),
        ("read_stock", {"sku": "A"}, "performed", ""),
    ]
    _run(tenant, agent_actor, "returns", replanned, retries=5, escalations=1)
    _run(tenant, agent_actor, "exchanges", [("ship", {"to": "x"}, "performed", "")], reflections=2)
    # Never counted: another tenant's run, and a run started before the period.
    _run(other_tenant, agent_actor, "returns", looping, outcome_why=LOOPING_WHY)
    before = datetime(2026, 10, 20, tzinfo=UTC)
    _run(tenant, agent_actor, "returns", looping, created_at=before, outcome_why=LOOPING_WHY)


def _table(breakdown: Breakdown) -> list[tuple[str, tuple[Any, ...]]]:
    return [(row.label, row.values) for row in breakdown.rows]


@pytest.mark.usefixtures("seen")
def test_per_task_type_each_count_per_run_and_the_loops_caught(tenant: Tenant) -> None:
    got = errors.errors_per_task_type(tenant=tenant, filters=PERIOD)
    assert [c.key for c in got.columns] == [
        "retries",
        "repairs",
        "replans",
        "reflections",
        "escalations",
        "runs",
        "loops",
    ]
    # returns: retries 2 derived + 5 reported, a repair, a replan, 4 reflections, an escalation,
    # over 2 runs, one of them looping.
    assert _table(got) == [
        ("exchanges", (0.0, 0.0, 0.0, 2.0, 0.0, 1, 0)),
        ("returns", (3.5, 0.5, 0.5, 2.0, 0.5, 2, 1)),
    ]


@pytest.mark.usefixtures("seen")
def test_one_task_type_only_when_one_is_chosen(tenant: Tenant) -> None:
    chosen = InsightsFilters(since=PERIOD.since, until=PERIOD.until, task_type="exchanges")
    assert [row.key for row in errors.errors_per_task_type(tenant=tenant, filters=chosen).rows] == [
        "exchanges"
    ]
    assert [row.key for row in errors.errors_per_tool(tenant=tenant, filters=chosen).rows] == ["ship"]


@pytest.mark.usefixtures("seen")
def test_per_tool_the_calls_made_again_repaired_or_replanned_and_the_commonest_error(tenant: Tenant) -> None:
    got = errors.errors_per_tool(tenant=tenant, filters=PERIOD)
    # retries, repairs, replans per run; runs, calls, failed calls, loops caught
    assert _table(got) == [
        ("refund (Permanent)", (2.0, 0.0, 0.0, 1, 3, 3, 1)),
        ("credit (Invalid input)", (0.0, 1.0, 0.0, 1, 2, 1, 1)),
        ("reserve (Conflict)", (0.0, 0.0, 1.0, 1, 1, 1, 0)),
        ("read_stock", (0.0, 0.0, 0.0, 1, 1, 0, 0)),
        ("ship", (0.0, 0.0, 0.0, 1, 1, 0, 0)),
    ]


@pytest.mark.usefixtures("seen")
def test_the_error_classes_the_commonest_first(tenant: Tenant) -> None:
    got = errors.error_classes(tenant=tenant, filters=PERIOD)
    assert _table(got) == [
        ("Permanent", (3, 1, 1)),
        ("Conflict", (1, 1, 0)),
        ("Invalid input", (1, 1, 1)),
    ]


def test_no_runs_no_rows(tenant: Tenant) -> None:
    assert errors.errors_per_task_type(tenant=tenant, filters=PERIOD).rows == ()
    assert errors.errors_per_tool(tenant=tenant, filters=PERIOD).rows == ()
    assert errors.error_classes(tenant=tenant, filters=PERIOD).is_empty


@pytest.mark.usefixtures("seen")
def test_the_page_draws_them_and_their_csv_says_the_same(tenant: Tenant, persona: Any) -> None:
    client = Client()
    client.force_login(persona("team_lead", tenant))
    query = {"since": "2026-11-02", "until": "2026-11-15"}
    page = client.get(reverse("insights:page"), query).content.decode()
    for key in ("errors", "errors-per-tool", "error-classes"):
        assert f'id="insight-{key}"' in page
    answer: Any = client.get(reverse("insights:csv"), {**query, "chart": "errors"})
    assert answer.status_code == 200
    lines = list(csv.reader(b"".join(answer.streaming_content).decode().splitlines()))
    assert lines == [
        [
            "Task type",
            "Retries per run",
            "Repairs per run",
            "Replans per run",
            "Reflections per run",
            "Escalations per run",
            "Runs",
            "Loops caught",
        ],
        ["exchanges", "0.0", "0.0", "0.0", "2.0", "0.0", "1", "0"],
        ["returns", "3.5", "0.5", "0.5", "2.0", "0.5", "2", "1"],
    ]


@pytest.mark.usefixtures("seen")
def test_the_insights_command_prints_the_panels_numbers_as_a_table(tenant: Tenant) -> None:
    out = io.StringIO()
    call_command(
        "insights", tenant=tenant.slug, panel=["errors"], since=PERIOD.since, until=PERIOD.until, stdout=out
    )
    lines = out.getvalue().splitlines()

    assert lines[0] == "Retries, repairs and replans, per task type (errors, 2026-11-02 to 2026-11-15)"
    assert lines[1].split()[:2] == ["Task", "type"]
    assert lines[3].split() == ["returns", "3.5", "0.5", "0.5", "2.0", "0.5", "2", "1"]


def test_the_insights_command_names_a_tenant_it_does_not_know() -> None:
    with pytest.raises(CommandError, match="no tenant with the slug 'nobody'"):
        call_command("insights", tenant="nobody")
