"""A run of thousands of calls draws as fast as a run of ten (issue 20, "Big runs stay fast"):
its page collapses each long list to its first items with a "show all N" link, loads a bounded
number of journal events, and costs the same queries and about the same bytes whatever its size.
bench/pages.py measures the server time of a 10,000-intent run."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from bench.pages import seed_big_run
from handover.handover import (
    RECENT_EVENTS,
    CompletedStep,
    handover_build,
    handover_cut,
    handover_rows,
    run_state_token,
)
from handover.views import RUN_PAGE_LIST_LIMIT
from journal.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _big_run(tenant: Any, intents: int, name: str) -> Run:
    run = seed_big_run(tenant, intents, external_id=name)
    return Run.objects.select_related("tenant").get(pk=run.pk)


def _calls(body: str) -> int:
    return len(re.findall(r'<tr class="status-', body))


def test_a_long_run_page_draws_its_first_calls_and_a_link_to_all_of_them(
    tenant: Any, support_user: Any
) -> None:
    run = _big_run(tenant, 300, "big-300")
    client = _client(support_user)
    body = client.get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert _calls(body) == RUN_PAGE_LIST_LIMIT
    assert "show all 300" in body  # the calls
    assert "show all 299" in body  # the completed steps (the last call's outcome is unknown)
    assert body.count('data-step="') <= 3 * RUN_PAGE_LIST_LIMIT
    every = client.get(reverse("handover:run_detail", args=[run.pk]), {"all": "1"}).content.decode()
    assert _calls(every) == 300 and "show all" not in every
    # Its poll keeps drawing every item; the collapsed page's poll does not.
    assert "&amp;all=1" in every and "&amp;all=1" not in body
    assert client.get(reverse("handover:run_detail", args=[run.pk]), {"all": "yes"}).status_code == 400


def test_the_run_page_costs_the_same_queries_and_about_the_same_bytes_at_any_size(
    tenant: Any, support_user: Any
) -> None:
    # Both past the events read whole (handover.RECENT_EVENTS); a smaller run costs fewer queries.
    small, big = _big_run(tenant, 150, "big-150"), _big_run(tenant, 3000, "big-3000")
    client = _client(support_user)
    answers = {}
    for run in (small, big):
        url = reverse("handover:run_detail", args=[run.pk])
        client.get(url)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        answers[run.pk] = (len(queries.captured_queries), len(response.content))
    (small_queries, small_bytes), (big_queries, big_bytes) = answers[small.pk], answers[big.pk]
    assert big_queries == small_queries
    assert big_bytes < 1.2 * small_bytes, answers


def test_the_handover_loads_the_newest_events_not_all_of_them(tenant: Any) -> None:
    run = _big_run(tenant, 1000, "big-1000")
    rows = handover_rows(run)
    assert rows.event_count == 2000
    assert len(rows.events) == RECENT_EVENTS
    assert rows.events[-1].pk == rows.last_event_id
    # The page's state token is the same whether read from the rows or from the database.
    assert run_state_token(run, rows) == run_state_token(run)


def test_the_handover_api_answers_the_first_items_of_each_list_and_all_when_asked(
    tenant: Any, agent_client: Any
) -> None:
    run = _big_run(tenant, 300, "big-api")
    url = f"/api/v1/runs/{run.pk}/handover/"
    cut = agent_client.get(url).json()
    assert len(cut["completed"]) == RUN_PAGE_LIST_LIMIT
    assert cut["totals"]["completed"] == 299 and cut["totals"]["uncertain"] == 1
    whole = agent_client.get(url, {"all": "1"}).json()
    assert len(whole["completed"]) == 299
    refused = agent_client.get(url, {"all": "\x00"})
    assert refused.status_code == 400 and "all" in refused.json()


def test_a_cut_handover_builds_only_the_steps_it_shows_and_says_the_same(tenant: Any) -> None:
    # The steps past the shown ones are read for the next action and the totals only
    # (handover.StandingStep): the cut handover builds RUN_PAGE_LIST_LIMIT CompletedSteps at any
    # size, and every sentence and count it answers is the whole handover's.
    run = _big_run(tenant, 2000, "big-2000")
    rows = handover_rows(run)
    now = timezone.now()
    whole = handover_build(rows, now)
    cut = handover_build(rows, now, limit=RUN_PAGE_LIST_LIMIT)
    assert len(whole.completed) == 1999
    assert len(cut.completed) == RUN_PAGE_LIST_LIMIT
    assert all(isinstance(step, CompletedStep) for step in cut.completed)
    assert cut.completed == whole.completed[:RUN_PAGE_LIST_LIMIT]
    assert cut.totals == whole.totals and cut.totals["completed"] == 1999
    assert cut.next_action == whole.next_action
    assert (cut.reason_holds, cut.reason_answered) == (whole.reason_holds, whole.reason_answered)
    assert handover_cut(cut) == handover_cut(whole)
