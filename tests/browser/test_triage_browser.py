"""Triage in a real browser (Chromium): finding a run by any part of its ticket or order id, ended
runs included, on the queue and on All runs; the Mine view; assigning a run to a colleague;
bulk resolve and bulk assign from the queue with what became of each run; the keyboard
shortcuts and their help on `?`; the tab title counting escalations that arrive while the queue
is open; and the run's timeline saying a failure in red."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from audit.models import AuditAction, AuditEntry
from console.models import TenantSettings
from journal import services
from journal.models import Run
from journal.services import Actor
from tests.support.stuck_runs import escalated_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECONCILER = Actor.system("test-reconciler")
POLL_MS = 30_000  # the queue polls every 10 s; a loaded machine is slow to draw


_escalated = escalated_run


@pytest.fixture
def runs(make_run: Callable[..., Run]) -> dict[str, Run]:
    soon = timezone.now() + timedelta(hours=2, minutes=30)
    made = {
        "bench": _escalated(make_run, ticket_id="T-40912", order_id="SU-90317", deadline=soon),
        "done": make_run(ticket_id="T-41207", order_id="SU-77120"),
        "lamp": _escalated(make_run, ticket_id="T-41402", order_id="SU-41207"),
    }
    services.run_complete(run=made["done"], actor=RECONCILER)
    return made


def _rows(page: Page) -> Any:
    return page.locator("#queue-results tbody tr")


def _tickets(page: Page) -> list[str]:
    return [row.get_attribute("data-ticket") or "" for row in _rows(page).all()]


def test_search_finds_any_part_of_an_id_in_any_case_ended_runs_included_on_the_queue_and_all_runs(
    runs: dict[str, Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    page = log_in(persona("support_staff", runs["bench"].tenant, "sam"))
    expect(_rows(page)).to_have_count(2)

    page.get_by_label("Search").fill("t-40912")
    expect(_rows(page)).to_have_count(1)
    expect(page.locator('#queue-results tr[data-ticket="T-40912"]')).to_be_visible()

    page.get_by_label("Search").fill("41207")
    expect(page.locator('#queue-results tr[data-ticket="T-41207"]')).to_contain_text("Completed")
    expect(_rows(page)).to_have_count(2)  # T-41207's ticket, T-41402's order SU-41207
    expect(page.locator("#queue-results .searching")).to_contain_text("ended ones included")
    assert "q=41207" in page.url  # the search is in the address, so it can be shared

    page.get_by_role("link", name="All runs").click()
    page.get_by_label("Search").fill("su-7712")
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    expect(page.locator('#runs tr[data-ticket="T-41207"]')).to_be_visible()


def test_mine_shows_the_runs_assigned_to_me_with_their_count(
    runs: dict[str, Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    page = log_in(persona("support_staff", runs["bench"].tenant, "sam"))
    mine = page.locator("#view-mine")
    expect(mine).to_have_text("Mine 0")

    page.locator('#queue-results tr[data-ticket="T-41402"]').get_by_role(
        "button", name="Assign to me"
    ).click()
    expect(mine).to_have_text("Mine 1")
    mine.click()
    expect(_rows(page)).to_have_count(1)
    expect(page.locator('#queue-results tr[data-ticket="T-41402"]')).to_contain_text("sam")
    expect(mine).to_have_attribute("aria-current", "page")


def test_assign_a_run_to_a_named_colleague_from_its_page(
    runs: dict[str, Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    run = runs["bench"]
    persona("support_staff", run.tenant, "kim")
    page = log_in(persona("team_lead", run.tenant, "lee"))
    page.goto(f"/runs/{run.pk}/")

    page.get_by_role("button", name="assign to a colleague…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Colleague").select_option(label="kim")
    dialog.get_by_role("button", name="Assign", exact=True).click()

    expect(page.locator("dl.facts")).to_contain_text("kim")
    assert Run.objects.get(pk=run.pk).assignee.get_username() == "kim"  # type: ignore[union-attr]
    entry = AuditEntry.objects.get(run=run)
    assert (entry.username, entry.action, entry.new_state) == ("lee", AuditAction.ASSIGN, {"assignee": "kim"})


def test_a_bulk_action_sent_while_a_filter_is_answering_is_still_reported(
    runs: dict[str, Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    """The order that lost a bulk report: a filter's redraw is on its way when Apply is pressed,
    and it arrives first. Every answer is held here until the test lets it through, so the order
    is the test's, not the machine's."""
    persona("support_staff", runs["bench"].tenant, "kim")
    page = log_in(persona("support_staff", runs["bench"].tenant, "sam"))
    page.get_by_label("Search").fill("T-4")
    expect(_rows(page)).to_have_count(3)

    held: list[Any] = []
    page.route(re.compile(r"/(\?.*)?$|/runs/bulk/$"), lambda route: held.append(route))

    def let_through(method: str) -> None:
        """Waits (on the browser's own events) for a request of `method` to be held, then sends
        it; a redraw held meanwhile (the queue's own poll) is sent too, as it would have been."""
        for _ in range(POLL_MS // 50):
            ready = [route for route in held if route.request.method in (method, "GET")]
            for route in ready:
                held.remove(route)
                route.continue_()
            if any(route.request.method == method for route in ready):
                return
            page.wait_for_timeout(50)
        raise AssertionError(f"no {method} request was sent")

    page.get_by_label("Order").select_option("oldest")  # the filter's redraw, held
    for ticket in ("T-40912", "T-41207"):
        page.get_by_label(f"select {ticket}").check()
    bulk = page.locator("#bulk-form")
    bulk.get_by_label("to").select_option(label="kim")
    bulk.get_by_role("button", name="Apply to selected").click()
    let_through("GET")  # the filter's answer arrives first
    expect(page.get_by_label("Order")).to_have_value("oldest")
    let_through("POST")
    page.unroute_all()

    report = page.locator(".bulk-report")
    expect(report).to_contain_text("T-40912: assigned")
    expect(report).to_contain_text("T-41207: assigned")
    expect(page.locator('#queue-results tr[data-ticket="T-40912"]')).to_contain_text("kim")
    assert Run.objects.get(ticket_id="T-40912").assignee.get_username() == "kim"  # type: ignore[union-attr]


def test_bulk_resolve_and_bulk_assign_from_the_queue_report_each_run(
    runs: dict[str, Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    persona("support_staff", runs["bench"].tenant, "kim")
    page = log_in(persona("support_staff", runs["bench"].tenant, "sam"))

    # Every run with "T-4" in its ticket, the ended T-41207 among them.
    page.get_by_label("Search").fill("T-4")
    expect(_rows(page)).to_have_count(3)
    for ticket in ("T-40912", "T-41207"):
        page.get_by_label(f"select {ticket}").check()
    bulk = page.locator("#bulk-form")
    bulk.get_by_label("to").select_option(label="kim")
    bulk.get_by_role("button", name="Apply to selected").click()
    report = page.locator(".bulk-report")
    expect(report).to_contain_text("T-40912: assigned")
    expect(report).to_contain_text("T-41207: assigned")
    expect(page.locator('#queue-results tr[data-ticket="T-40912"]')).to_contain_text("kim")

    for ticket in ("T-40912", "T-41207", "T-41402"):
        page.get_by_label(f"select {ticket}").check()
    bulk.get_by_label("Action").select_option("resolve")
    bulk.get_by_label("Note").fill("refunded by hand")
    bulk.get_by_role("button", name="Apply to selected").click()
    expect(report).to_contain_text("T-40912: resolved")
    expect(report).to_contain_text("T-41402: resolved")
    # The ended run cannot be resolved: said, not skipped.
    expect(report.locator("li.refused")).to_have_text(
        "T-41207: not done — this run has no open escalation to resolve"
    )

    resolved = AuditEntry.objects.filter(action=AuditAction.RESOLVE).order_by("seq")
    assert [e.run.ticket_id for e in resolved if e.run] == ["T-40912", "T-41402"]
    handed = AuditEntry.objects.filter(
        action=AuditAction.ASSIGN, username="sam", new_state={"assignee": "kim"}
    )
    assert handed.count() == 2
    # T-41402 had nobody: resolving it made it sam's (console.claiming).
    assert Run.objects.get(ticket_id="T-41402").assignee.get_username() == "sam"  # type: ignore[union-attr]
    assert not Run.objects.filter(awaiting_person=True).exists()


def test_keyboard_shortcuts_and_their_help_on_question_mark(
    runs: dict[str, Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    page = log_in(persona("support_staff", runs["bench"].tenant, "sam"))
    expect(_rows(page)).to_have_count(2)
    first, second = _tickets(page)

    page.keyboard.press("?")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).to_be_visible()
    expect(help_dialog).to_contain_text("next / previous run")
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()
    # Hidden to the accessibility tree can come before the modal's close has run (Chromium
    # closes on Escape through a close watcher); the shortcuts stand aside while it is open.
    page.wait_for_function("() => !document.getElementById('shortcuts-help').open")

    page.keyboard.press("j")
    expect(page.locator(f'#queue-results tr[data-ticket="{first}"]')).to_have_attribute(
        "aria-current", "true"
    )
    page.keyboard.press("j")
    expect(page.locator(f'#queue-results tr[data-ticket="{second}"]')).to_have_attribute(
        "aria-current", "true"
    )
    page.keyboard.press("k")
    expect(page.locator(f'#queue-results tr[data-ticket="{first}"]')).to_have_attribute(
        "aria-current", "true"
    )
    page.keyboard.press("x")
    expect(page.get_by_label(f"select {first}")).to_be_checked()

    page.keyboard.press("/")
    expect(page.get_by_label("Search")).to_be_focused()
    page.keyboard.type("j")  # typed into the search, not taken as a shortcut
    expect(page.get_by_label("Search")).to_have_value("j")
    page.get_by_label("Search").fill("")
    page.locator("h1").click()

    page.keyboard.press("m")
    expect(page).to_have_url(re.compile(r"assignee=me"))
    page.goto("/")
    page.keyboard.press("j")
    page.keyboard.press("o")
    expect(page.get_by_role("heading", level=1)).to_contain_text(first)


def test_the_tab_title_counts_escalations_that_arrive_while_the_queue_is_open(
    runs: dict[str, Run],
    make_run: Callable[..., Run],
    persona: Callable[..., Any],
    log_in: Callable[[Any], Page],
) -> None:
    page = log_in(persona("support_staff", runs["bench"].tenant, "sam"))
    expect(page).to_have_title("Queue · Seam")
    expect(page.locator('#queue-results tr[data-ticket="T-40912"] time.countdown')).to_have_text(
        re.compile(r"^2 h (29|30) min left$")
    )

    _escalated(make_run, ticket_id="T-42001")
    _escalated(make_run, ticket_id="T-42002")
    expect(page).to_have_title("(2) Queue · Seam", timeout=POLL_MS)
    expect(page.locator('#queue-results tr[data-ticket="T-42002"]')).to_be_visible()


def test_the_timeline_shows_each_outcome_and_a_failure_in_red(
    make_run: Callable[..., Run],
    persona: Callable[..., Any],
    log_in: Callable[[Any], Page],
    agent_actor: Actor,
) -> None:
    run = make_run(ticket_id="T-41402", order_id="SU-41207")
    intent = services.intent_record(
        run=run,
        tool="reverse_credit",
        args={"order_id": "SU-41207", "amount": "9.00"},
        turn=1,
        actor=agent_actor,
    ).intent
    services.outcome_record(
        intent=intent, ok=False, summary="the card was closed", error_class="permanent", actor=agent_actor
    )
    TenantSettings.objects.create(
        tenant=run.tenant, helpdesk_ticket_url="https://help.example.com/t/{ticket_id}"
    )
    page = log_in(persona("support_staff", run.tenant, "sam"))
    page.goto(f"/runs/{run.pk}/")

    failed = page.locator(".timeline li.outcome-failed")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("“Reverse credit” failed: the card was closed")
    assert failed.evaluate("el => getComputedStyle(el).color") == "rgb(185, 28, 28)"
    expect(page.locator(".timeline")).not_to_contain_text("Outcome recorded")
    expect(page.get_by_role("heading", level=1).get_by_role("link", name="T-41402")).to_have_attribute(
        "href", "https://help.example.com/t/T-41402"
    )
