"""The run page shows a run's attempts counted apart (handover.attempts) and its timeline says the
same call failing the same way in a row once, "“Refund” tried 7 times: …", at no extra query."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.timeline import timeline_of
from handover import handover_rows
from journal.models import ActorKind, IntentStatus, JournalEvent, Run
from tests import factories

pytestmark = pytest.mark.django_db

# A run stopped for looping, with the facts its reason carries (journal.why's looping).
LOOPING_WHY = {
    "code": "looping",
    "refusals": 5,
    "minutes": 10,
    "calls": [{"tool": "refund", "error_class": "permanent", "attempts": 3}],
}
_n = itertools.count()
START = datetime(2026, 11, 3, 9, tzinfo=UTC)


def _attempt(
    run: Run, tool: str, args: dict[str, Any], status: str, error_class: str = "", summary: str = ""
) -> None:
    """One call as the journal keeps it: its intent row, then its recorded intent and outcome."""
    n = next(_n)
    at = START + timedelta(seconds=2 * n)
    intent = factories.call_row(
        run,
        tool,
        args,
        status,
        n=n,
        at=at,
        error_class=error_class,
        outcome_summary=summary,
        settled_at=at + timedelta(seconds=1),
    )
    common = {"run": run, "intent": intent, "actor_kind": ActorKind.AGENT, "actor_name": "agent"}
    JournalEvent.objects.create(**common, kind=JournalEvent.Kind.INTENT_RECORDED, data={"tool": tool}, at=at)
    JournalEvent.objects.create(
        **common,
        kind=JournalEvent.Kind.OUTCOME_RECORDED,
        data={"status": status, "error_class": error_class},
        at=at + timedelta(seconds=1),
    )


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_seven_failures_of_one_call_are_one_entry_with_their_count(make_run: Callable[..., Run]) -> None:
    run = make_run()
    for _ in range(7):
        _attempt(run, "refund", {"n": 1}, IntentStatus.FAILED, "permanent", "permission denied")
    _attempt(run, "refund", {"n": 2}, IntentStatus.FAILED, "permanent", "permission denied")  # another call
    _attempt(run, "refund", {"n": 2}, IntentStatus.PERFORMED)

    timeline = [e for e in timeline_of(handover_rows(run)) if e.step_id]

    texts = [(e.text, e.attempts) for e in timeline]
    assert texts[0] == ("“Refund” tried 7 times: permission denied", 7)
    # A single failure, and what came after, are said event by event as before.
    assert [t for t, _ in texts[1:]] == [
        "“Refund”: about to be sent",
        "“Refund” failed: permission denied",
        "“Refund”: about to be sent",
        "“Refund” done",
    ]
    assert timeline[0].step_id.endswith(":6")  # the last of the seven


def test_failures_that_differ_in_their_reason_are_not_grouped(make_run: Callable[..., Run]) -> None:
    run = make_run()
    _attempt(run, "refund", {"n": 1}, IntentStatus.FAILED, "transient", "timed out")
    _attempt(run, "refund", {"n": 1}, IntentStatus.FAILED, "permanent", "permission denied")
    texts = [e.text for e in timeline_of(handover_rows(run)) if e.step_id]
    assert texts == [
        "“Refund”: about to be sent",
        "“Refund” failed: timed out",
        "“Refund”: about to be sent",
        "“Refund” failed: permission denied",
    ]


def _strip(body: str) -> dict[str, str]:
    match = re.search(r'<p class="attempts"([^>]*)>', body)
    assert match, "no attempts strip"
    return dict(re.findall(r'data-([a-z]+)="([^"]*)"', match.group(1)))


def test_the_run_page_shows_the_counts_and_the_loop_flag_at_the_same_query_cost(
    make_run: Callable[..., Run], support_user: Any
) -> None:
    client = _client(support_user)
    quiet, looping = make_run(ticket_id="T-quiet"), make_run(ticket_id="T-loop")
    _attempt(quiet, "refund", {"n": 1}, IntentStatus.PERFORMED)
    for _ in range(7):
        _attempt(looping, "refund", {"n": 1}, IntentStatus.FAILED, "permanent", "permission denied")
    _attempt(looping, "credit", {"a": -1}, IntentStatus.FAILED, "invalid_input")
    _attempt(looping, "credit", {"a": 5}, IntentStatus.PERFORMED)
    Run.objects.filter(pk=looping.pk).update(reflections=4, outcome_why=LOOPING_WHY)

    queries = {}
    bodies = {}
    for run in (quiet, looping):
        url = reverse("handover:run_detail", args=[run.pk])
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200
        queries[run.pk], bodies[run.pk] = len(captured.captured_queries), response.content.decode()

    assert queries[looping.pk] == queries[quiet.pk]
    assert _strip(bodies[quiet.pk]) == {
        "attempts": "1",
        "retries": "0",
        "repairs": "0",
        "replans": "0",
        "reflections": "0",
        "escalations": "0",
    }
    assert _strip(bodies[looping.pk]) == {
        "attempts": "9",
        "retries": "6",
        "repairs": "1",
        "replans": "0",
        "reflections": "4",
        "escalations": "0",
        "looping": "1",
    }
    body = bodies[looping.pk]
    assert "9 attempts · 6 retries · 1 repair · 0 replans · 4 reflections · 0 escalations" in body
    assert 'class="pill warn looping"' in body
    assert "“Refund” tried 7 times: permission denied" in body
    assert 'data-attempts="7"' in body
    assert 'class="pill warn looping"' not in bodies[quiet.pk]
