"""Triage from the queue and the run list: search by any part of a ticket or order id in any case
over every run (ended ones included), the "Mine" view, the validation of every query parameter,
and the number of queries a search costs."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditAction, AuditEntry
from console.models import TenantSettings
from console.selectors import search_q
from handover import run_state_token
from journal import services
from journal.models import Run
from journal.services import Actor
from tests import factories
from tests.support.stuck_runs import escalated_run

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
RECONCILER = Actor.system("test-reconciler")


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _tickets(response: Any) -> list[str]:
    return sorted(re.findall(r'data-ticket="([^"]*)"', response.content.decode()))


_escalated = escalated_run


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
        ("handover:queue", {"since": "yesterday"}, "since must be a date and time"),
        ("handover:queue", {"since": "2026-12-01T10:00\x00"}, "since"),
        ("handover:run_list", {"q": "41207\x00"}, "q contains a NUL character"),
        ("handover:run_list", {"q": "\x7f"}, "q contains a control character"),
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
        assert client.get(reverse("handover:queue"), query, headers=HTMX).status_code == 200
    for n in range(1, 30):
        run = make_run(ticket_id=f"T-5{n:04d}")
        if n % 2:
            services.run_complete(run=run, actor=RECONCILER)
    with CaptureQueriesContext(connection) as thirty:
        response = client.get(reverse("handover:queue"), query, headers=HTMX)
    assert len(_tickets(response)) == 30

    assert len(thirty) == len(one), [q["sql"] for q in thirty.captured_queries]
    # The poll's: session, user, membership (with the console settings), two of permissions,
    # the counts per reason, mine and task types, the page's count, its rows and their badges
    # (console.selectors.queue_rows), new escalations.
    assert len(one) <= 10, [q["sql"] for q in one.captured_queries]

    # The whole page adds the colleagues of the bulk form, whatever the number of runs.
    with CaptureQueriesContext(connection) as page:
        assert len(_tickets(client.get(reverse("handover:queue"), query))) == 30
    assert len(page) == len(thirty) + 1, [q["sql"] for q in page.captured_queries]


# --- assigning to a colleague -----------------------------------------------------------------


def _state_of(run: Run) -> str:
    return run_state_token(Run.objects.get(pk=run.pk))


def test_assign_to_a_colleague_makes_them_assignee_and_the_audit_says_who_assigned_whom(
    runs: dict[str, Run], persona: Any
) -> None:
    run = runs["bench"]
    lead = persona("team_lead", run.tenant, "lee")
    kim = persona("support_staff", run.tenant, "kim")
    client = _client(lead)

    dialog = client.get(reverse("handover:run_confirm", args=[run.pk, "assign-to"]), headers=HTMX)
    assert dialog.status_code == 200
    body = dialog.content.decode()
    assert f'<option value="{kim.pk}">kim</option>' in body
    assert f'<option value="{lead.pk}">lee</option>' in body

    done = client.post(
        reverse("handover:run_act", args=[run.pk, "assign-to"]),
        {"state": _state_of(run), "assignee": str(kim.pk)},
        headers=HTMX,
    )
    assert done.status_code == 200, done.content[:400]
    assert Run.objects.get(pk=run.pk).assignee == kim
    entry = AuditEntry.objects.get(run=run)
    assert (entry.action, entry.username, entry.user_id) == (AuditAction.ASSIGN, "lee", lead.pk)
    assert (entry.old_state, entry.new_state) == ({"assignee": None}, {"assignee": "kim"})


def test_a_run_is_assigned_only_to_staff_of_the_same_tenant_and_nothing_is_written_otherwise(
    runs: dict[str, Run], persona: Any
) -> None:
    run = runs["bench"]
    lead = persona("team_lead", run.tenant, "lee")
    outsider = persona("support_staff", runs["foreign"].tenant, "ola")
    roleless: Any = factories.StaffUserFactory(username="noor", membership__tenant=run.tenant)
    client = _client(lead)
    dialog = client.get(reverse("handover:run_confirm", args=[run.pk, "assign-to"]), headers=HTMX)
    assert "ola" not in dialog.content.decode() and "noor" not in dialog.content.decode()

    for assignee, status in ((outsider.pk, 400), (roleless.pk, 400), ("٣", 400), ("", 400), ("1\x00", 400)):
        response = client.post(
            reverse("handover:run_act", args=[run.pk, "assign-to"]),
            {"state": _state_of(run), "assignee": str(assignee)},
            headers=HTMX,
        )
        assert response.status_code == status, (assignee, response.content[:300])
        assert "assignee" in response.content.decode()
    assert Run.objects.get(pk=run.pk).assignee is None
    assert not AuditEntry.objects.exists()


# --- bulk actions from the queue --------------------------------------------------------------


def _ticked(*runs: Run) -> list[str]:
    return [f"{run.pk}:{_state_of(run)}" for run in runs]


def _report(response: Any) -> dict[str, str]:
    """The bulk report: ticket → what became of it."""
    body = response.content.decode()
    return dict(
        re.findall(r'<li class="[^"]*" data-run="[^"]*"><strong>([^<]*)</strong>: ([^<]*)</li>', body)
    )


def test_bulk_assign_hands_each_ticked_run_to_the_colleague_with_one_audit_row_each(
    runs: dict[str, Run], persona: Any
) -> None:
    lead = persona("team_lead", runs["bench"].tenant, "lee")
    kim = persona("support_staff", runs["bench"].tenant, "kim")
    client = _client(lead)

    response = client.post(
        reverse("handover:run_bulk"),
        {"action": "assign", "colleague": str(kim.pk), "run": _ticked(runs["bench"], runs["lamp"])},
        headers=HTMX,
    )
    assert response.status_code == 200, response.content[:400]
    assert response.content.decode().lstrip().startswith('<div id="queue-results"')
    assert _report(response) == {"T-40912": "assigned", "T-41402": "assigned"}
    assert set(Run.objects.filter(assignee=kim).values_list("ticket_id", flat=True)) == {"T-40912", "T-41402"}
    entries = AuditEntry.objects.order_by("seq")
    assert [(e.run_id, e.action, e.username, e.new_state) for e in entries] == [
        (runs["bench"].pk, AuditAction.ASSIGN, "lee", {"assignee": "kim"}),
        (runs["lamp"].pk, AuditAction.ASSIGN, "lee", {"assignee": "kim"}),
    ]


def test_bulk_resolve_reports_the_run_it_cannot_resolve_and_resolves_the_others(
    runs: dict[str, Run], persona: Any
) -> None:
    support = persona("support_staff", runs["bench"].tenant, "sam")
    client = _client(support)
    ticked = _ticked(runs["bench"], runs["done"], runs["lamp"])

    response = client.post(
        reverse("handover:run_bulk"),
        {"action": "resolve", "note": "refunded by hand", "run": ticked},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert _report(response) == {
        "T-40912": "resolved",
        "T-41207": "not done — this run has no open escalation to resolve",
        "T-41402": "resolved",
    }
    resolved = AuditEntry.objects.filter(action=AuditAction.RESOLVE).order_by("seq")
    assert [(e.run_id, e.note) for e in resolved] == [
        (runs["bench"].pk, "refunded by hand"),
        (runs["lamp"].pk, "refunded by hand"),
    ]
    assert not Run.objects.filter(pk__in=[runs["bench"].pk, runs["lamp"].pk], awaiting_person=True).exists()

    # The same submit again (a double click, a resent form): every run has changed since, so
    # nothing is done twice and each is reported.
    again = client.post(
        reverse("handover:run_bulk"),
        {"action": "resolve", "note": "refunded by hand", "run": ticked},
        headers=HTMX,
    )
    assert again.status_code == 200
    report = _report(again)
    assert report["T-40912"].startswith("not done — this run changed since you loaded it")
    assert report["T-41402"].startswith("not done — this run changed since you loaded it")
    assert AuditEntry.objects.filter(action=AuditAction.RESOLVE).count() == 2


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"action": "resolve", "note": "  "}, "note is required to resolve"),
        ({"action": "delete"}, "action must be assign or resolve"),
        ({"action": "assign", "run": []}, "run: choose at least one run"),
        ({"action": "assign", "run": ["not-a-run:1.1.1"]}, "is not a run id"),
        ({"action": "assign", "run": ["{bench}"]}, "does not say the state the page showed"),
        ({"action": "assign", "run": ["{bench}:1.1.1\x00"]}, "run contains a NUL character"),
        ({"action": "assign", "colleague": "٣"}, "colleague must be a number in ASCII digits"),
        ({"action": "assign", "colleague": "{outsider}"}, "colleague must be an active staff member"),
        ({"action": "resolve", "note": "x\x00"}, "note contains a NUL character"),
    ],
)
def test_a_bad_bulk_request_is_a_400_naming_the_field_and_writes_nothing(
    runs: dict[str, Run], persona: Any, data: dict[str, Any], named: str
) -> None:
    support = persona("support_staff", runs["bench"].tenant, "sam")
    outsider = persona("support_staff", runs["foreign"].tenant, "ola")
    post = {"run": _ticked(runs["bench"]), **data}
    post["run"] = [r.format(bench=runs["bench"].pk) for r in post["run"]]
    if "colleague" in post:
        post["colleague"] = post["colleague"].format(outsider=outsider.pk)
    response = _client(support).post(reverse("handover:run_bulk"), post, headers=HTMX)
    assert response.status_code == 400, response.content[:400]
    assert named in response.content.decode()
    assert not AuditEntry.objects.exists()
    assert Run.objects.filter(assignee__isnull=False).count() == 0


def test_another_tenants_run_in_a_bulk_request_is_reported_not_found_and_left_alone(
    runs: dict[str, Run], persona: Any
) -> None:
    support = persona("support_staff", runs["bench"].tenant, "sam")
    foreign = runs["foreign"]
    response = _client(support).post(
        reverse("handover:run_bulk"),
        {"action": "assign", "run": _ticked(runs["bench"], foreign)},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert _report(response) == {"T-40912": "assigned", str(foreign.pk): "not done — no such run"}
    assert Run.objects.get(pk=foreign.pk).assignee is None
    assert AuditEntry.objects.filter(run=foreign).count() == 0


def test_bulk_actions_need_a_role_that_acts_on_runs(runs: dict[str, Run]) -> None:
    roleless = factories.StaffUserFactory(username="noor", membership__tenant=runs["bench"].tenant)
    response = _client(roleless).post(
        reverse("handover:run_bulk"), {"action": "assign", "run": _ticked(runs["bench"])}, headers=HTMX
    )
    assert response.status_code == 403
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_people_sending_the_same_bulk_resolve_at_once_resolve_each_run_once(
    make_run: Callable[..., Run], persona: Any
) -> None:
    """Each run is locked and its state compared inside its own transaction: of two requests
    racing over the same runs, one resolves each run and the other reports it changed."""
    ticked_runs = [_escalated(make_run, ticket_id=f"T-7{n}") for n in range(4)]
    sam = persona("support_staff", ticked_runs[0].tenant, "sam")
    kim = persona("support_staff", ticked_runs[0].tenant, "kim")
    post = {"action": "resolve", "note": "refunded by hand", "run": _ticked(*ticked_runs)}
    start = threading.Barrier(2)
    reports: dict[str, dict[str, str]] = {}

    def send(user: Any) -> None:
        try:
            client = _client(user)
            start.wait(timeout=10)
            response = client.post(reverse("handover:run_bulk"), post, headers=HTMX)
            assert response.status_code == 200
            reports[user.username] = _report(response)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(user,)) for user in (sam, kim)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert set(reports) == {"sam", "kim"}
    for run in ticked_runs:
        outcomes = sorted(reports[name][run.ticket_id] for name in reports)
        assert outcomes[0].startswith("not done — this run changed since you loaded it"), outcomes
        assert outcomes[1] == "resolved", outcomes
    entries = AuditEntry.objects.filter(action=AuditAction.RESOLVE)
    assert sorted(e.run.ticket_id for e in entries if e.run) == ["T-70", "T-71", "T-72", "T-73"]
    assert not Run.objects.filter(awaiting_person=True).exists()


# --- the helpdesk link ------------------------------------------------------------------------


def test_ticket_ids_link_to_the_tenants_helpdesk_with_the_id_url_escaped(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = _escalated(make_run, ticket_id='T-1/2?x=1&"a"', order_id="SU-1")
    support = persona("support_staff", run.tenant)
    client = _client(support)
    assert "helpdesk" not in client.get(reverse("handover:queue")).content.decode().split("<main>", 1)[1]

    TenantSettings.objects.create(
        tenant=run.tenant, helpdesk_ticket_url="https://help.example.com/tickets/{ticket_id}?src=seam"
    )
    escaped = "https://help.example.com/tickets/T-1%2F2%3Fx%3D1%26%22a%22?src=seam"
    for url in (
        reverse("handover:queue"),
        reverse("handover:run_list"),
        reverse("handover:run_detail", args=[run.pk]),
    ):
        body = client.get(url).content.decode()
        assert f'class="helpdesk" href="{escaped.replace("&", "&amp;")}"' in body, url

    # Another tenant's template never applies.
    other = _escalated(make_run, ticket_id="T-9", tenant=factories.TenantFactory(slug="acme"))
    outsider = _client(persona("support_staff", other.tenant))
    assert (
        "help.example.com"
        not in outsider.get(reverse("handover:run_detail", args=[other.pk])).content.decode()
    )


@pytest.mark.parametrize(
    ("template", "valid"),
    [
        ("https://help.example.com/tickets/{ticket_id}", True),
        ("http://desk.local/t?id={ticket_id}", True),
        ("javascript:alert(1)//{ticket_id}", False),
        ("https://help.example.com/tickets/", False),
        ("https://help.example.com/{ticket_id}/{ticket_id}", False),
        ("https://help.example.com/{order_id}/{ticket_id}", False),
        ("https://help.example.com/ {ticket_id}", False),
    ],
)
def test_the_helpdesk_template_is_validated_in_the_admin_form(
    runs: dict[str, Run], template: str, valid: bool
) -> None:
    row = TenantSettings(tenant=runs["bench"].tenant, helpdesk_ticket_url=template)
    if valid:
        row.full_clean()
    else:
        with pytest.raises(ValidationError) as refused:
            row.full_clean()
        assert "helpdesk_ticket_url" in refused.value.message_dict


def test_the_admin_edits_a_tenants_helpdesk_link(runs: dict[str, Run], persona: Any) -> None:
    admin = _client(persona("admin", runs["bench"].tenant))
    tenant = runs["bench"].tenant
    response = admin.post(
        reverse("admin:handover_tenantsettings_add"),
        {"tenant": tenant.pk, "helpdesk_ticket_url": "https://help.example.com/tickets/{ticket_id}"},
    )
    assert response.status_code == 302, response.content[:500]
    assert TenantSettings.objects.get(tenant=tenant).helpdesk_ticket_url.endswith("/{ticket_id}")


# --- the timeline -----------------------------------------------------------------------------


def test_the_timeline_says_each_outcome_and_shows_a_failure_in_red(
    make_run: Callable[..., Run], persona: Any, agent_actor: Actor
) -> None:
    run = make_run(ticket_id="T-41402")
    done = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-1"}, turn=1, actor=agent_actor
    ).intent
    services.outcome_record(intent=done, ok=True, receipt={"label": "RL-1"}, actor=agent_actor)
    failed = services.intent_record(
        run=run, tool="issue_refund", args={"order_id": "SU-1", "amount": "9.00"}, turn=2, actor=agent_actor
    ).intent
    services.outcome_record(
        intent=failed,
        ok=False,
        summary="card refused by the bank",
        error_class="permanent",
        actor=agent_actor,
    )
    body = _client(persona("support_staff", run.tenant)).get(reverse("handover:run_detail", args=[run.pk]))
    timeline = body.content.decode().split('<section class="timeline">', 1)[1].split("</section>", 1)[0]
    items = re.findall(r'<li class="event([^"]*)"[^>]*>.*?<span class="what">([^<]*)</span>', timeline, re.S)
    assert [(css.strip(), what) for css, what in items] == [
        ("", "Run created"),
        ("", "“Start return”: about to be sent"),
        ("outcome-done", "“Start return” done"),
        ("", "“Issue refund”: about to be sent"),
        ("outcome-failed", "“Issue refund” failed: card refused by the bank"),
    ]
    assert "Outcome recorded" not in timeline


def test_hostile_values_in_any_bulk_field_are_refused_without_a_5xx_or_a_write(
    runs: dict[str, Run], persona: Any
) -> None:
    """Every field of the bulk form and of the queue's filters it carries, given the values the
    page fuzzer sends (tests/security/test_page_fuzz.py): never a 5xx, and a refusal writes
    nothing (an empty optional field, such as no colleague, is a valid request)."""
    from tests.security.test_page_fuzz import HOSTILE

    client = _client(persona("support_staff", runs["bench"].tenant, "sam"))
    fields = ["action", "run", "colleague", "note", "q", "task_type", "reason", "status", "assignee", "sort"]
    statuses = set()
    for field in fields:
        for value in HOSTILE:
            post = {"action": "assign", "note": "x", "run": _ticked(runs["bench"]), field: value}
            before = AuditEntry.objects.count()
            response = client.post(reverse("handover:run_bulk"), post, headers=HTMX)
            statuses.add(response.status_code)
            assert response.status_code < 500, (field, value[:20], response.status_code)
            if response.status_code >= 400:
                assert AuditEntry.objects.count() == before, (field, value[:20])
    assert 400 in statuses
