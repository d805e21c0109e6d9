"""Triage's small frictions (issue 32, "Triage"): the queue's and All runs' search find a run by
its customer reference, which the run page shows; logging in without `next=` lands on the queue;
an empty queue says one thing; the audit page's run filter finds a run as the queue's search
does (any part, any case, of its ticket or order id or customer reference) or by any part of
its id."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.chain import audit_record
from audit.models import AuditAction
from console.selectors import search_q
from journal import services
from journal.models import Run, Tenant
from journal.services import Actor
from tests import factories
from tests.support.stuck_runs import escalated_run

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
RECONCILER = Actor.system("test-reconciler")
EMPTY_QUEUE = "Nobody is waiting for a person."
NO_MATCH = "No run matches these filters."


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _tickets(response: Any) -> list[str]:
    return sorted(re.findall(r'data-ticket="([^"]*)"', response.content.decode()))


@pytest.fixture
def runs(make_run: Callable[..., Run]) -> dict[str, Run]:
    """T-40912 (ada@example.com) waiting for a person, T-41207 (ACC-7781) long completed,
    T-41402 with no customer reference, and another tenant's run for ada too."""
    past = timezone.now() - timedelta(hours=1)
    made = {
        "bench": escalated_run(make_run, ticket_id="T-40912", customer_ref="ada@example.com", deadline=past),
        "done": make_run(ticket_id="T-41207", order_id="SU-77120", customer_ref="ACC-7781"),
        "lamp": escalated_run(make_run, ticket_id="T-41402", order_id="SU-41402", deadline=past),
        "foreign": escalated_run(
            make_run,
            ticket_id="T-40913",
            customer_ref="ada@example.com",
            tenant=factories.TenantFactory(slug="acme"),
            deadline=past,
        ),
    }
    services.run_complete(run=made["done"], actor=RECONCILER)
    return made


# --- search by customer -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "tickets"),
    [
        ("ada@example.com", ["T-40912"]),  # the whole reference, never another tenant's run
        ("ADA@EXAMPLE", ["T-40912"]),  # any case, any part
        ("acc-77", ["T-41207"]),  # an ended run is found too
        ("  7781 ", ["T-41207"]),  # surrounding spaces do not count
        ("@", ["T-40912"]),
        ("ada_", []),  # LIKE's wildcards are literal characters
    ],
)
def test_search_finds_a_run_by_any_part_of_its_customer_reference_in_any_case(
    runs: dict[str, Run], persona: Any, q: str, tickets: list[str]
) -> None:
    client = _client(persona("support_staff", runs["bench"].tenant))

    for url in ("handover:queue", "handover:run_list"):
        for headers in ({}, HTMX):
            response = client.get(reverse(url), {"q": q}, headers=headers)
            assert response.status_code == 200
            assert _tickets(response) == tickets, (url, headers)


def test_a_run_found_by_its_customer_shows_the_customer_in_its_row(
    runs: dict[str, Run], persona: Any
) -> None:
    client = _client(persona("support_staff", runs["bench"].tenant))
    for url in ("handover:queue", "handover:run_list"):
        body = client.get(reverse(url), {"q": "7781"}).content.decode()
        row = body.split('data-ticket="T-41207"', 1)[1].split("</tr>", 1)[0]
        assert 'data-customer="ACC-7781"' in row, url


def test_the_run_page_shows_who_the_run_is_for_escaped(make_run: Callable[..., Run], persona: Any) -> None:
    run = make_run(ticket_id="T-1", customer_ref="<b>ada</b>@example.com")
    plain = make_run(ticket_id="T-2")
    client = _client(persona("support_staff", run.tenant))

    body = client.get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert '<dt>Customer</dt><dd class="customer-ref">&lt;b&gt;ada&lt;/b&gt;@example.com</dd>' in body
    assert "<b>ada</b>" not in body
    # The live panel, redrawn after each action, says it too.
    panel = client.get(reverse("handover:run_panel", args=[run.pk])).content.decode()
    assert 'class="customer-ref"' in panel
    # A run opened without one says nothing of a customer.
    assert (
        'class="customer-ref"'
        not in client.get(reverse("handover:run_detail", args=[plain.pk])).content.decode()
    )


def test_search_reads_the_customer_trigram_index(runs: dict[str, Run]) -> None:
    """With sequential scans priced out (a test table is too small for the planner to prefer an
    index), the search's three columns are answered from their three trigram indexes."""
    query = Run.objects.filter(search_q("ada@"))
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = query.explain()
    assert {"run_ticket_trgm_idx", "run_order_trgm_idx", "run_customer_trgm_idx"} <= set(
        re.findall(r"run_\w+_trgm_idx", plan)
    ), plan


# --- logging in -------------------------------------------------------------------------------


def test_logging_in_without_next_lands_on_the_queue(tenant: Tenant, persona: Any) -> None:
    user = persona("support_staff", tenant, "sam")
    user.set_password("a long enough password")
    user.save()
    client = Client()

    response = client.post(
        reverse("login"), {"username": "sam", "password": "a long enough password", "next": ""}
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("handover:queue")
    assert client.get(response["Location"]).status_code == 200
    # With `next=` it still goes where it was asked.
    again = Client().post(
        reverse("login"),
        {"username": "sam", "password": "a long enough password", "next": reverse("handover:run_list")},
    )
    assert again["Location"] == reverse("handover:run_list")


# --- the empty queue --------------------------------------------------------------------------


def _empties(response: Any) -> list[str]:
    return re.findall(r'class="empty">([^<]*)<', response.content.decode())


def test_an_empty_queue_says_once_that_nobody_is_waiting(tenant: Tenant, persona: Any) -> None:
    client = _client(persona("support_staff", tenant))

    for headers in ({}, HTMX):
        response = client.get(reverse("handover:queue"), headers=headers)
        assert response.status_code == 200
        assert _empties(response) == [EMPTY_QUEUE], headers
        assert NO_MATCH not in response.content.decode()
    # Narrowed, an empty queue is still empty, said the same once.
    assert _empties(client.get(reverse("handover:queue"), {"assignee": "me"})) == [EMPTY_QUEUE]


def test_filters_that_match_nothing_in_a_waiting_queue_say_so_once(
    runs: dict[str, Run], persona: Any
) -> None:
    client = _client(persona("support_staff", runs["bench"].tenant))

    narrowed = client.get(reverse("handover:queue"), {"assignee": "me"})
    assert _empties(narrowed) == [NO_MATCH]
    searched = client.get(reverse("handover:queue"), {"q": "nobody-has-this"})
    assert _empties(searched) == [NO_MATCH]
    # The whole queue has rows and counts, and no empty-state at all.
    assert _empties(client.get(reverse("handover:queue"))) == []


def test_a_search_on_an_empty_queue_says_no_run_matches_not_that_nobody_waits(
    tenant: Tenant, make_run: Callable[..., Run], persona: Any
) -> None:
    make_run(ticket_id="T-9", customer_ref="bo@example.com")  # running, not stuck: not in the queue
    client = _client(persona("support_staff", tenant))

    assert _empties(client.get(reverse("handover:queue"), {"q": "zz-none"})) == [NO_MATCH]
    assert _tickets(client.get(reverse("handover:queue"), {"q": "bo@"})) == ["T-9"]


# --- the audit page's run filter --------------------------------------------------------------


@pytest.fixture
def audited(runs: dict[str, Run], persona: Any) -> dict[str, Any]:
    """One assignment audited on each of the tenant's three runs, one on no run, and one on the
    other tenant's run."""
    tenant = runs["bench"].tenant
    lead = persona("team_lead", tenant)
    with transaction.atomic():
        for key in ("bench", "done", "lamp"):
            audit_record(user=lead, tenant=tenant, action=AuditAction.ASSIGN, run=runs[key])
        audit_record(user=lead, tenant=tenant, action=AuditAction.ASSIGN)
        foreign = runs["foreign"]
        stranger = persona("team_lead", foreign.tenant)
        audit_record(user=stranger, tenant=foreign.tenant, action=AuditAction.ASSIGN, run=foreign)
    return {"lead": lead, **runs}


def _audited_tickets(client: Client, run: str) -> list[str]:
    response = client.get(reverse("handover:audit"), {"run": run})
    assert response.status_code == 200
    return sorted(entry.run.ticket_id for entry in response.context["page"].object_list)


def _csv_tickets(client: Client, run: str) -> list[str]:
    response: Any = client.get(reverse("handover:audit_csv"), {"run": run})
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))[1:]
    return sorted(row[5] for row in rows)


def test_the_audit_filter_finds_a_run_as_the_queues_search_does(audited: dict[str, Any]) -> None:
    client = _client(audited["lead"])
    bench, done = audited["bench"], audited["done"]
    cases = {
        "t-409": ["T-40912"],  # any part of a ticket id, any case; never the other tenant's T-40913
        "su-77": ["T-41207"],  # of an order id
        "ADA@": ["T-40912"],  # of a customer reference
        " 41402 ": ["T-41402"],
        str(bench.pk): ["T-40912"],  # a whole run id
        str(done.pk).upper(): ["T-41207"],  # in capitals
        str(done.pk)[:8]: ["T-41207"],  # its first part, as the pages show it
        str(done.pk)[9:23]: ["T-41207"],  # any part of it
        "%": [],
    }
    for text, tickets in cases.items():
        assert _audited_tickets(client, text) == tickets, text
        assert _csv_tickets(client, text) == tickets, text


def test_a_short_hex_fragment_is_not_read_as_a_run_id(audited: dict[str, Any]) -> None:
    """ "409" is part of a ticket id; it is too short to name a run by its id, where it would
    match most runs."""
    client = _client(audited["lead"])
    assert _audited_tickets(client, "409") == ["T-40912"]


def test_a_bad_audit_run_filter_is_a_400_naming_it(audited: dict[str, Any]) -> None:
    client = _client(audited["lead"])
    response = client.get(reverse("handover:audit"), {"run": "T-4\x00"})
    assert response.status_code == 400
    assert "run" in response.content.decode()
