"""The catalogue editor as a tenant's admin uses it in Chromium, at 1280 and 390 px: from the
catalogue to an entry's form, a mapping typed in, the preview counting the tool's recorded
receipts and naming the open run it changes, then saved as the tenant's own entry. The page
passes the site's Content-Security-Policy (the browser fixture fails on a violation).

With SEAM_SCREENSHOTS=1 it also writes docs/screenshots/catalogue-editor-<width>.png."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, ViewportSize, expect

from audit.models import AuditAction, AuditEntry
from compensations.models import CatalogueEntry
from devtools.processes import ROOT
from journal.models import IntentStatus, Run, RunStatus, Tenant
from tests import factories

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOOL = "start_return"


@pytest.fixture
def admin(tenant: Tenant, persona: Callable[..., Any], make_run: Any) -> Any:
    """A tenant's admin; the default entry of start_return; three of its receipts, two with a
    tracking number, in an escalated run (its steps not undone)."""
    CatalogueEntry.objects.update_or_create(
        tenant=None,
        tool=TOOL,
        defaults={
            "description": "Book the return's courier pickup",
            "compensating_tool": "cancel_pickup",
            "argument_mapping": {"label": "receipt.label"},
            "reversibility": "reversible_until",
            "until_condition": "until collection",
        },
    )
    run = make_run(ticket_id="T-CAT-1")
    for n, receipt in enumerate(
        [{"label": "RL-1", "tracking": "TR-1"}, {"label": "RL-2", "tracking": "TR-2"}, {"label": "RL-3"}], 1
    ):
        factories.call_row(
            run,
            TOOL,
            {"order_id": "SU-1"},
            IntentStatus.PERFORMED,
            n=n,
            at=timezone.now() - timedelta(minutes=10 - n),
            receipt=receipt,
        )
    Run.objects.filter(pk=run.pk).update(status=RunStatus.ESCALATED)
    user = persona("tenant_admin", tenant)
    user.set_password(PASSWORD)
    user.save()
    return user


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}])
def test_an_admin_previews_then_saves_an_entry(
    viewport: ViewportSize, admin: Any, tenant: Tenant, log_in: Callable[..., Page]
) -> None:
    page = log_in(admin, viewport)
    page.goto("/catalogue/")
    page.get_by_role("link", name=f"Edit {TOOL}").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(TOOL)

    mapping = page.get_by_label("Argument mapping")
    mapping.fill(json.dumps({"label": "receipt.label", "tracking": "receipt.tracking"}))
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#catalogue-preview")
    expect(preview).to_contain_text("The undo could be built from 2 of the last 3 receipts")
    expect(preview.locator(".preview-missing")).to_contain_text("receipt.tracking is missing from 1")
    expect(preview.get_by_role("link", name="T-CAT-1")).to_be_visible()
    # Nothing is saved by a preview.
    assert not CatalogueEntry.objects.filter(tenant=tenant).exists()

    # Bad input: refused in place, naming the field.
    mapping.fill('{"label": "reciept.label"}')
    page.get_by_role("button", name="Preview").click()
    expect(preview.get_by_role("alert")).to_contain_text("Argument mapping")

    mapping.fill(json.dumps({"label": "receipt.label", "tracking": "receipt.tracking"}))
    page.get_by_role("button", name="Preview").click()
    expect(preview).to_contain_text("2 of the last 3")
    # The form and its preview fit the screen: no sideways scroll at either width.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    if os.environ.get("SEAM_SCREENSHOTS") == "1":
        path = ROOT / "docs" / "screenshots" / f"catalogue-editor-{viewport['width']}.png"
        page.screenshot(path=path, full_page=True)
    page.get_by_label("Why (kept in the audit trail)").fill("the courier wants tracking too")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Saved.")
    own = CatalogueEntry.objects.get(tenant=tenant, tool=TOOL)
    assert own.argument_mapping == {"label": "receipt.label", "tracking": "receipt.tracking"}
    audit = AuditEntry.objects.get(action=AuditAction.CATALOGUE_EDIT)
    assert (audit.user_id, audit.note) == (admin.pk, "the courier wants tracking too")
