"""fanout.selectors: the p95's bounded query (its plan on PostgreSQL), and the run's coverage for
the handover, in two queries, rendered by templates/fanout/_coverage.html."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.template.loader import render_to_string
from django.utils import timezone

from fanout.models import FanOut, FanOutBranch
from fanout.selectors import recent_latencies, run_coverage, tool_latency_p95
from journal.models import Run

pytestmark = pytest.mark.django_db


def _journal_of_many_reads(run: Run, rows: int) -> None:
    """A journal grown large: `rows` recorded attempts over five tools, a tenth of them failed."""
    now = timezone.now()
    fanout = FanOut.objects.create(
        run=run, turn=1, name="history", deadline_ms=1000, started_at=now, deadline_at=now
    )
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO fanout_fanoutbranch
                (fanout_id, name, tool, args, required, attempt, status, error_class, error_message,
                 latency_ms, result, retry_note, started_at, finished_at)
            SELECT %s, 'branch ' || n, 'tool_' || (n %% 5), '{}', false, 1,
                   CASE WHEN n %% 10 = 0 THEN 'error' ELSE 'ok' END, '', '',
                   n %% 400, '{}', '', now() - (n || ' seconds')::interval, now() - (n || ' seconds')::interval
            FROM generate_series(1, %s) AS n
            """,
            [fanout.pk, rows],
        )
        cursor.execute("ANALYZE fanout_fanoutbranch")


def test_the_p95_reads_the_latest_latencies_through_the_index_with_a_limit(
    make_run: Callable[..., Run],
) -> None:
    _journal_of_many_reads(make_run(), 50_000)

    plan = recent_latencies("tool_3").explain()

    lines = plan.splitlines()
    assert lines[0].lstrip().startswith("Limit"), plan
    assert "fanout_branch_latency_idx" in plan, plan
    assert "Index" in lines[1], plan
    assert "Seq Scan" not in plan and "Sort" not in plan, plan
    assert len(list(recent_latencies("tool_3"))) == 100
    assert tool_latency_p95("tool_3") is not None


def test_a_run_without_a_fan_out_has_no_coverage(make_run: Callable[..., Run]) -> None:
    assert run_coverage(make_run()) is None


def _settled_fanout(run: Run) -> FanOut:
    now = timezone.now()
    fanout = FanOut.objects.create(
        run=run,
        turn=2,
        name="shortage.stock_and_entitlement",
        deadline_ms=1000,
        started_at=now,
        deadline_at=now,
        settled_at=now,
        outcome="some_good",
        coverage="2/3",
        decision={
            "proceed": True,
            "rule": "availability_decides_promise",
            "summary": "reship 4 x SKU-4471 may be promised from warehouse LDS-2",
            "rests_on": ["warehouse LDS-2: 40 x SKU-4471 free", "warehouse BRS-3: not checked (deadline)"],
            "promise": {},
            "conflict": None,
        },
    )
    common: dict[str, Any] = {
        "fanout": fanout,
        "tool": "warehouse_stock",
        "started_at": now,
        "finished_at": now,
    }
    FanOutBranch.objects.create(
        name="warehouse LDS-2", status="ok", latency_ms=3, result={"available": 40, "note": "<b>"}, **common
    )
    FanOutBranch.objects.create(
        name="warehouse MAN-1",
        status="error",
        error_class="transient",
        error_message="HTTP 503: warehouse MAN-1 did not answer",
        latency_ms=2,
        retry_note="sent after 12 ms jitter: remaining 900 ms > p95 310 ms",
        **common,
    )
    FanOutBranch.objects.create(
        name="warehouse MAN-1", attempt=2, status="ok", latency_ms=4, result={"available": 25}, **common
    )
    FanOutBranch.objects.create(name="warehouse BRS-3", status="missing", latency_ms=1000, **common)
    return fanout


def test_coverage_names_what_is_missing_and_why_in_two_queries(
    make_run: Callable[..., Run], django_assert_num_queries: Any
) -> None:
    run = make_run()
    _settled_fanout(run)

    with django_assert_num_queries(2):
        coverage = run_coverage(run)

    assert coverage is not None
    assert (coverage["coverage"], coverage["outcome"]) == ("2/3", "some_good")
    assert coverage["missing"] == [
        {
            "branch": "warehouse BRS-3",
            "tool": "warehouse_stock",
            "required": False,
            "why": "deadline",
            "retry": "not attempted: the deadline came first",
            "attempts": 1,
        }
    ]
    assert [(c["branch"], c["attempts"]) for c in coverage["checked"]] == [
        ("warehouse LDS-2", 1),
        ("warehouse MAN-1", 2),
    ]
    assert coverage["decision"]["rests_on"][1] == "warehouse BRS-3: not checked (deadline)"


def test_the_coverage_partial_renders_the_missing_branches_and_what_the_decision_rests_on(
    make_run: Callable[..., Run],
) -> None:
    run = make_run()
    _settled_fanout(run)

    html = render_to_string("fanout/_coverage.html", {"coverage": run_coverage(run)})

    assert '<section class="coverage"' in html
    assert "Coverage 2/3" in html
    assert "<strong>warehouse BRS-3</strong>" in html and "deadline" in html
    assert "warehouse LDS-2: 40 x SKU-4471 free" in html
    assert "availability_decides_promise" in html
    assert "<b>" not in html and "&lt;b&gt;" in html  # what a downstream answered is escaped
    assert render_to_string("fanout/_coverage.html", {"coverage": None}).strip() == ""
