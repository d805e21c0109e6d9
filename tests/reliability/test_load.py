"""The REST journal under a sustained load with the dashboard in use loses nothing: bench/load.py,
bounded (15 s at a modest rate, so it passes on a busy machine), against a real gunicorn server on
the suite's test database. It asserts correctness, not speed: every intent and outcome the server
acknowledged is in PostgreSQL, nothing was written twice (even where the client retried after an
answer was lost), no request failed."""

from __future__ import annotations

import pytest
from django.db import connection

from bench.journal import progress
from bench.load import LoadConfig, render, run_load
from devtools.processes import database_url

# The server writes through its own connections: the test must see their commits.
# A load of concurrent agents: in `make chaos`, which CI runs after `make test`.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chaos]

CONFIG = LoadConfig(
    rate=20,
    seconds=15,
    agents=8,
    calls_per_run=25,
    workers=2,
    dashboard_sessions=2,
    dashboard_pause=0.3,
    stuck_runs=4,
    # About one write answer in 25 is thrown away after the commit, so the client retries.
    lose_answers=0.04,
)


def test_the_journal_under_load_loses_no_acknowledged_effect() -> None:
    result = run_load(CONFIG, database_url=database_url(connection.settings_dict))
    progress(render(result))  # shown with -s
    r = result["reconciliation"]
    errors = result["errors"]
    report = f"reconciliation {r}\nerrors {errors}"

    assert errors["failed_calls"] == {}, report
    assert errors["server_errors_5xx"] == 0, report
    assert errors["dashboard_requests"] == {}, report
    # Effects lost: 0. Every intent acknowledged is stored with its key; every outcome
    # acknowledged is a performed row; every run acknowledged is stored.
    assert r["effects_lost"] == 0, report
    assert r["intents_acknowledged"] == r["intents_stored"] == r["calls_started"], report
    assert r["outcomes_acknowledged"] == r["outcomes_stored"], report
    assert r["runs_acknowledged"] == r["runs_stored"], report
    # Nothing nobody asked for, nothing twice.
    assert r["extra_rows"] == 0, report
    assert r["duplicate_creations"] == 0, report
    assert r["duplicate_events"] == 0, report
    assert result["nothing_lost"], report
    # The retries happened, and each retried intent found its own row (200) rather than a
    # second one; the client left those open, as its rules say, and nothing else is open.
    assert errors["answers_lost_injected"], report
    assert r["intents_found_200"] == r["intents_in_doubt"] == r["intents_open_stored"], report
    assert r["outcomes_acknowledged"] == r["calls_started"] - r["intents_in_doubt"], report
    # A sustained load, not a trickle, with the dashboard in use throughout.
    assert r["calls_started"] >= CONFIG.calls // 5, report
    latency = result["latency"]
    assert latency["queue_page"]["count"] >= 2 * 5, report
    assert latency["run_page"]["count"] > 0 and latency["panel_poll"]["count"] > 0, report
