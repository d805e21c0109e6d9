"""The console's first-week flows on a phone (390 by 844), in Chromium: find a run by part of its
ticket id in any case, read the keyboard help, resolve the run from its modal dialog and see the
header redrawn as resolved, then filter the audit trail, export what is shown, and see the chain's
verification. Each step also checks that the page still fits the screen."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from audit.models import AuditAction, AuditEntry

from .test_layout_browser import PHONE, World, _assert_fits, _open_as, world  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ONE_DATE_FORMAT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$")


def test_search_resolve_and_audit_on_a_phone(
    world: World,  # noqa: F811 (the fixture)
    browser: Any,
    live_server: Any,
) -> None:
    page = _open_as(browser, live_server, world.lead, PHONE)

    # Triage: part of the ticket id, in lower case, finds the run.
    page.get_by_label("Search").fill("t-409")
    # The unfiltered queue shows T-40912 too: wait for the search's own answer (its address is
    # pushed once it is drawn), or the click below may land on a row the answer then replaces.
    expect(page).to_have_url(re.compile(r"[?&]q=t-409"))
    row = page.locator('#queue-results tr[data-ticket="T-40912"]')
    expect(row).to_be_visible()
    _assert_fits(page, "queue, searched")

    # The keyboard help opens on `?` and closes on Escape.
    page.locator("h1").click()
    page.keyboard.press("?")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()

    # The run page: every moment in one format with its zone.
    row.get_by_role("link", name="T-40912").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("T-40912")
    _assert_fits(page, "run")
    moments = [t.strip() for t in page.locator("#run-panel .lists time").all_text_contents()]
    assert moments and all(ONE_DATE_FORMAT.match(m) for m in moments), moments

    # Resolved from its modal dialog: the header is redrawn from the rows, without a reload.
    page.get_by_role("button", name="Resolve…").click()
    dialog = page.locator("dialog#dialog")
    dialog.get_by_label("Note (required)").fill("Refund sent by hand; customer told by phone.")
    dialog.get_by_role("button", name="Resolve", exact=False).last.click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#run-panel h1 .pill.status-resolved")).to_have_text("Resolved")
    assert AuditEntry.objects.filter(action=AuditAction.RESOLVE, username=world.lead.username).count() == 1

    # The audit trail, filtered: the export carries the filter; the chain's verification is shown.
    page.goto(reverse("handover:audit"))
    page.get_by_label("Action").select_option(label=AuditAction.RESOLVE.label)
    expect(page.locator("#entries tbody tr")).to_have_count(1)
    export = page.get_by_role("link", name="Export CSV")
    expect(export).to_have_attribute("href", re.compile(r"action=resolve"))
    expect(page.locator("#verification")).to_be_visible()
    _assert_fits(page, "audit, filtered")
