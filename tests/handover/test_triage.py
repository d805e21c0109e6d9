"""Triage from the queue and the run list: search by any part of a ticket or order id in any case
over every run (ended ones included), the "Mine" view, the validation of every query parameter,
and the number of queries a search costs."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from handover.handover import run_state_token
from handover.selectors import search_q
from journal import services
from journal.models import Run
from journal.services import Actor
from reconciliation.decisions import run_decide
from tests import factories

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
RECONCILER = Actor.system("test-reconciler")


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _tickets(response: Any) -> list[str]:
    return sorted(re.findall(r'data-ticket="([^"]*)"', response.content.decode()))


def _escalated(make_run: Callable[..., Run], **fields: Any) -> Run:
    run = make_run(**fields)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    decision = run_decide(run=run, actor=RECONCILER, quiet_for=timedelta(0))
    assert decision.outcome == "escalated", decision
    return Run.objects.select_related("tenant").get(pk=run.pk)


@pytest.fixture
def runs(make_run: Callable[..., Run]) -> dict[str, Run]:
    """T-40912 waiting for a person, T-41207 long completed, T-41402 waiting, and another
    tenant's T-40913."""
    past = timezone.now() - timedelta(hours=1)
    made = {
        "bench": _escalated(make_run, ticket_id="T-40912", order_id="SU-90317", deadline=past),
        "done": make_run(ticket_id="T-41207", order_id="SU-77120"),
        "lamp": _escalated(make_run, ticket_id="T-41402", order_id="SU-41207", deadline=past),
        "foreign": _escalated(
            make_run, ticket_id="T-40913", order_id="SU-1", tenant=factories.TenantFactory(slug="acme")
        ),
    }
    services.run_complete(run=made["done"], actor=RECONCILER)
    return made


@pytest.mark.parametrize(
    ("q", "tickets"),
    [
        ("t-40912", ["T-40912"]),  # any case
        ("41207", ["T-41207", "T-41402"]),  # any part, of the ticket id (ended) or the order id
        ("  su-9031 ", ["T-40912"]),  # surrounding spaces do not count
        ("t-409", ["T-40912"]),  # never another tenant's T-40913
        ("%", []),  # LIKE's wildcards are literal characters
        ("T_4", []),
    ],
)
def test_search_finds_any_part_of_a_ticket_or_order_id_in_any_case_across_all_runs(
    runs: dict[str, Run], persona: Any, q: str, tickets: list[str]
) -> None:
    client = _client(persona("support_staff", runs["bench"].tenant))

    queue = client.get(reverse("handover:queue"), {"q": q})
    assert queue.status_code == 200
    assert _tickets(queue) == tickets

    listed = client.get(reverse("handover:run_list"), {"q": q})
    assert listed.status_code == 200
    assert _tickets(listed) == tickets


def test_the_queue_without_a_search_lists_only_the_runs_waiting(runs: dict[str, Run], persona: Any) -> None:
    client = _client(persona("support_staff", runs["bench"].tenant))
    assert _tickets(client.get(reverse("handover:queue"))) == ["T-40912", "T-41402"]
    assert _tickets(client.get(reverse("handover:run_list"))) == ["T-40912", "T-41207", "T-41402"]


def test_a_finished_run_found_by_search_says_it_ended_and_links_to_its_page(
    runs: dict[str, Run], persona: Any
) -> None:
    client = _client(persona("support_staff", runs["bench"].tenant))
    body = client.get(reverse("handover:queue"), {"q": "t-41207"}, headers=HTMX).content.decode()
    row = body.split('data-ticket="T-41207"', 1)[1].split("</tr>", 1)[0]
    assert "Completed" in row and "stuck" not in row
    assert reverse("handover:run_detail", args=[runs["done"].pk]) in row
    assert "across all runs, ended ones included" in body


def test_mine_lists_the_runs_assigned_to_me_and_counts_them(runs: dict[str, Run], persona: Any) -> None:
    support = persona("support_staff", runs["bench"].tenant, "sam")
    client = _client(support)
    before = client.get(reverse("handover:queue"))
    assert before.context["mine_count"] == 0

    run = runs["lamp"]
    assigned = client.post(
        reverse("handover:run_act", args=[run.pk, "assign"]), {"state": run_state_token(run)}, headers=HTMX
    )
    assert assigned.status_code == 200

    page = client.get(reverse("handover:queue"))
    assert page.context["mine_count"] == 1
    assert re.search(r'id="view-mine"[^>]*>Mine <strong>1</strong>', page.content.decode())
    mine = client.get(reverse("handover:queue"), {"assignee": "me"})
    assert _tickets(mine) == ["T-41402"]
    assert 'id="view-mine" href="/?assignee=me" aria-keyshortcuts="m" aria-current="page"' in (
        mine.content.decode()
    )
    # Someone else's "mine" is theirs: a colleague sees none.
    colleague = _client(persona("support_staff", run.tenant, "kim"))
    assert _tickets(colleague.get(reverse("handover:queue"), {"assignee": "me"})) == []


@pytest.mark.parametrize(
    ("url", "query", "named"),
    [
        ("handover:queue", {"q": "T-40912\x00"}, "q contains a NUL character"),
        ("handover:queue", {"q": "T-4\x1b[31m"}, "q contains a control character"),
        ("handover:queue", {"q": "x" * 101}, "q is 101 characters; the limit is 100"),
        ("handover:queue", {"task_type": "returns\x00"}, "task_type contains a NUL character"),
        ("handover:queue", {"task_type": "<script>"}, "task_type may hold only"),
        ("handover:queue", {"reason": "policy\x00"}, "reason contains a NUL character"),
        ("handover:queue", {"status": "gone"}, "status gone is not one of the choices"),
        ("handover:queue", {"assignee": "sam\x00"}, "assignee contains a NUL character"),
        ("handover:queue", {"sort": "newest"}, "sort newest is not one of the choices"),
        ("handover:queue", {"since": "yesterday"}, "since is not valid"),
        ("handover:run_list", {"q": "41207\x00"}, "q contains a NUL character"),
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(
    runs: dict[str, Run], persona: Any, url: str, query: dict[str, str], named: str
) -> None:
    client = _client(persona("support_staff", runs["bench"].tenant))
    for headers in ({}, HTMX):
        response = client.get(reverse(url), query, headers=headers)
        assert response.status_code == 400, response.content[:300]
        body = response.content.decode()
        assert named in body
        assert _tickets(response) == []


def test_search_reads_the_trigram_indexes(runs: dict[str, Run]) -> None:
    """The search's expression is the indexes' own: with sequential scans priced out (a test
    table is too small for the planner to prefer an index), PostgreSQL answers it from the two
    trigram indexes, so a search stays an index read however many runs there are."""
    query = Run.objects.filter(search_q("41207"))
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = query.explain()
    assert "run_ticket_trgm_idx" in plan and "run_order_trgm_idx" in plan, plan


def test_the_queue_with_a_search_makes_the_same_number_of_queries_for_1_and_30_matches(
    make_run: Callable[..., Run], persona: Any
) -> None:
    first = _escalated(make_run, ticket_id="T-50000")
    client = _client(persona("support_staff", first.tenant))
    query = {"q": "t-5", "since": timezone.now().isoformat()}
    client.get(reverse("handover:queue"), query)  # warm the session and permission caches

    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("handover:queue"), query).status_code == 200
    for n in range(1, 30):
        run = make_run(ticket_id=f"T-5{n:04d}")
        if n % 2:
            services.run_complete(run=run, actor=RECONCILER)
    with CaptureQueriesContext(connection) as thirty:
        response = client.get(reverse("handover:queue"), query, headers=HTMX)
    assert len(_tickets(response)) == 30

    assert len(thirty) == len(one), [q["sql"] for q in thirty.captured_queries]
    # session, user, membership, permissions, count, rows, counts, task types, new escalations
    assert len(one) <= 11, [q["sql"] for q in one.captured_queries]
