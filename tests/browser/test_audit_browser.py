"""The audit page as a team lead uses it in Chromium: filter the trail, export what is shown (the
CSV has the rows the page lists, not the whole trail), and check the chain again, the result
arriving on the open page from a real worker without a reload. Support staff get the styled 403.

With SEAM_SCREENSHOTS=1 the first test also writes docs/screenshots/audit.png."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from playwright.sync_api import Page, expect

from audit.chain import audit_record
from audit.models import AuditAction, AuditEntry, AuditVerification
from devtools.processes import ROOT, Fleet
from journal.models import Tenant

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORKER_TIMEOUT_MS = 45_000


@pytest.fixture
def people(tenant: Tenant, persona: Callable[..., Any]) -> dict[str, Any]:
    """A lead and a support agent, and eight audited actions: five assignments by the agent,
    three customer messages by the lead."""
    support, lead = persona("support_staff", tenant), persona("team_lead", tenant)
    for user in (support, lead):
        user.set_password(PASSWORD)
        user.save()
    for user, action, count in ((support, AuditAction.ASSIGN, 5), (lead, AuditAction.CUSTOMER_TOLD, 3)):
        for _ in range(count):
            with transaction.atomic():
                audit_record(user=user, tenant=tenant, action=action, note=f"{action} by {user.username}")
    return {"support": support, "lead": lead}


def _csv_rows(path: Any) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as file:
        return list(csv.reader(io.StringIO(file.read())))[1:]


def test_a_lead_filters_exports_what_is_shown_and_rechecks_the_chain(
    people: dict[str, Any], log_in: Callable[[Any], Page], worker: Fleet, broker: str
) -> None:
    page = log_in(people["lead"])
    page.goto("/audit/")
    rows = page.locator("#entries tbody tr")
    expect(rows).to_have_count(8)
    page.evaluate("window.seamNoReload = true")

    page.get_by_label("Action").select_option(label="Recorded what the customer was told")
    expect(rows).to_have_count(3)
    expect(page.locator(".audit-tools")).to_contain_text("3 actions match.")
    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    exported = _csv_rows(download.value.path())
    assert len(exported) == 3
    assert {row[3] for row in exported} == {"customer_told"}

    section = page.locator("#verification")
    expect(section).to_contain_text("The chain has not been checked yet.")
    page.get_by_role("button", name="Check the chain again").click()
    expect(section).to_contain_text("Checking the chain again")
    # The worker walks the chain (eight rows and the one the request wrote); the section polls.
    expect(section.locator(".chain-ok")).to_contain_text(
        "The chain is intact: 9 rows checked", timeout=WORKER_TIMEOUT_MS
    )
    expect(page.get_by_role("button", name="Check the chain again")).to_be_visible()
    assert page.evaluate("window.seamNoReload === true")
    verification = AuditVerification.objects.get()
    assert (verification.requested_by, verification.checked, verification.broken_at) == (
        people["lead"],
        9,
        None,
    )
    assert AuditEntry.objects.get(action=AuditAction.AUDIT_VERIFY).username == people["lead"].username
    if os.environ.get("SEAM_SCREENSHOTS") == "1":
        page.screenshot(path=ROOT / "docs" / "screenshots" / "audit.png", full_page=True)


def test_support_staff_opening_the_audit_page_get_the_styled_403(
    people: dict[str, Any], log_in: Callable[[Any], Page]
) -> None:
    page = log_in(people["support"])
    response = page.goto("/audit/")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    # The site's own page: its header with the person's name and a way back.
    expect(page.locator("header.top")).to_contain_text(people["support"].username)
    page.get_by_role("link", name="Back to the queue").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Queue")
