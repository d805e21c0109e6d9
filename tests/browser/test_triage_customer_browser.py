"""Triage's frictions in a real browser (Chromium), at 1280 and at 390 px (issue 32, "Triage"):
logging in without `next=` shows the queue; a customer's reference, typed in any case and in
part, finds their run on the queue and on All runs, ended or not, and the run page says who the
run is for; an empty queue says one thing; the audit page finds a run's entries from any part of
its ticket or id."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import Browser, Page, ViewportSize, expect

from audit.chain import audit_record
from audit.models import AuditAction
from journal import services
from journal.models import Run, Tenant
from journal.services import Actor
from tests.support.stuck_runs import escalated_run

from .conftest import PASSWORD, TIMEOUT_MS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECONCILER = Actor.system("test-reconciler")
WIDTHS: list[ViewportSize] = [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]


def _log_in_without_next(browser: Browser, live_server: Any, user: Any, viewport: ViewportSize) -> Page:
    """The login form as a person reaches it by typing the site's address: no `next=`."""
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(user.get_username())
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Password").press("Enter")
    return page


@pytest.fixture
def runs(make_run: Callable[..., Run]) -> dict[str, Run]:
    past = timezone.now() - timedelta(hours=1)
    made = {
        "bench": escalated_run(make_run, ticket_id="T-40912", customer_ref="ada@example.com", deadline=past),
        "done": make_run(ticket_id="T-41207", order_id="SU-77120", customer_ref="ACC-7781"),
        "lamp": escalated_run(make_run, ticket_id="T-41402", order_id="SU-41402", deadline=past),
    }
    services.run_complete(run=made["done"], actor=RECONCILER)
    return made


@pytest.mark.parametrize("viewport", WIDTHS, ids=["1280", "390"])
def test_a_customers_reference_finds_their_run_from_the_queue_to_its_page(
    runs: dict[str, Run],
    persona: Callable[..., Any],
    browser: Browser,
    live_server: Any,
    viewport: ViewportSize,
) -> None:
    page = _log_in_without_next(
        browser, live_server, persona("support_staff", runs["bench"].tenant), viewport
    )
    expect(page.get_by_role("heading", name=re.compile(r"^Queue"))).to_be_visible()
    assert page.url.rstrip("/") == live_server.url
    # The queue's shortcuts come with its deferred script, which runs once the page has parsed:
    # a key pressed before then reaches no handler, so the test waits for the page to load.
    page.wait_for_load_state()

    # "/" puts the keyboard in the search; any part of the reference, in any case.
    page.keyboard.press("/")
    expect(page.get_by_label("Search")).to_be_focused()
    page.keyboard.type("acc-77")
    found = page.locator('#queue-results tr[data-ticket="T-41207"]')
    expect(page.locator("#queue-results tbody tr")).to_have_count(1)
    expect(found).to_contain_text("ACC-7781")
    expect(found).to_contain_text("Completed")

    page.get_by_role("link", name="All runs").click()
    page.get_by_label("Search").fill("ADA@EXAMPLE")
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    row = page.locator('#runs tr[data-ticket="T-40912"]')
    expect(row).to_contain_text("ada@example.com")
    row.get_by_role("link", name="T-40912").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("T-40912")
    expect(page.locator("dl.facts dd.customer-ref")).to_have_text("ada@example.com")


@pytest.mark.parametrize("viewport", WIDTHS, ids=["1280", "390"])
def test_an_empty_queue_says_once_that_nobody_is_waiting(
    tenant: Tenant, persona: Callable[..., Any], browser: Browser, live_server: Any, viewport: ViewportSize
) -> None:
    page = _log_in_without_next(browser, live_server, persona("support_staff", tenant), viewport)
    results = page.locator("#queue-results")
    expect(results.locator(".empty")).to_have_count(1)
    expect(results.locator(".empty")).to_have_text("Nobody is waiting for a person.")

    page.get_by_label("Search").fill("nobody-has-this")
    expect(results.locator(".empty")).to_have_text("No run matches these filters.")
    expect(results.locator(".empty")).to_have_count(1)
    expect(results).not_to_contain_text("Nobody is waiting")


def test_the_audit_page_finds_a_runs_entries_from_any_part_of_its_ticket_or_id(
    runs: dict[str, Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    tenant = runs["bench"].tenant
    lead = persona("team_lead", tenant)
    with transaction.atomic():
        for key in ("bench", "done", "lamp"):
            audit_record(user=lead, tenant=tenant, action=AuditAction.ASSIGN, run=runs[key])
    page = log_in(lead)
    page.goto("/audit/")
    entries = page.locator("#entries tbody tr")
    expect(entries).to_have_count(3)

    run_filter = page.get_by_role("searchbox", name="Run")
    run_filter.fill("t-4120")
    run_filter.press("Enter")
    expect(entries).to_have_count(1)
    expect(entries.first).to_contain_text("T-41207")

    run_filter.fill(str(runs["lamp"].pk)[:8].upper())
    run_filter.press("Enter")
    expect(entries).to_have_count(1)
    expect(entries.first).to_contain_text("T-41402")


@pytest.mark.parametrize("viewport", WIDTHS, ids=["1280", "390"])
def test_acting_on_a_run_nobody_had_makes_it_yours_and_a_lead_hands_it_on(
    runs: dict[str, Run],
    persona: Callable[..., Any],
    log_in: Callable[..., Page],
    viewport: ViewportSize,
) -> None:
    run = runs["lamp"]
    kim = persona("support_staff", run.tenant, "kim")
    page = log_in(persona("support_staff", run.tenant, "sam"), viewport=viewport)
    page.goto(f"/runs/{run.pk}/")
    facts = page.locator("#run-panel dl.facts")
    expect(facts).to_contain_text("nobody")

    page.locator("#run-panel").get_by_role(
        "button", name=re.compile(r"^Add what the customer was told")
    ).click()
    dialog = page.locator("dialog#dialog")
    dialog.get_by_label("What they were told").fill("We are looking into it.")
    dialog.get_by_role("button", name="Record").click()

    expect(page.locator("#run-panel .flash")).to_contain_text("now assigned to you")
    expect(facts).to_contain_text("sam")
    assert Run.objects.get(pk=run.pk).assignee.get_username() == "sam"  # type: ignore[union-attr]

    # Undone as any assignment is: a lead hands it to someone else from the same page.
    lead = log_in(persona("team_lead", run.tenant, "lee"), viewport=viewport)
    lead.goto(f"/runs/{run.pk}/")
    lead.get_by_role("button", name="assign to a colleague…").click()
    handing = lead.get_by_role("dialog")
    handing.get_by_label("Colleague").select_option(label="kim")
    handing.get_by_role("button", name="Assign", exact=True).click()
    expect(lead.locator("#run-panel dl.facts")).to_contain_text("kim")
    assert Run.objects.get(pk=run.pk).assignee == kim
