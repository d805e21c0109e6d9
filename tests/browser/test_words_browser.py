"""Words people use (issue 32, item 6), in Chromium at 1280 and 390 px, on the demo's T-40912:
the run page names steps by their tools' labels ("Undo “Start the return”…", not
"Compensate (cancel_pickup)"), its dialog says the undo by labels with the arguments behind a
closed "Details" disclosure, and the audit page says the action as a sentence; every raw id sits
inside a closed disclosure a keyboard opens (Tab to it, Enter)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import Locator, Page, ViewportSize, expect

from audit.models import AuditAction, AuditEntry
from journal.models import Run

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENS: list[ViewportSize] = [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]


@pytest.fixture(params=SCREENS, ids=["1280", "390"])
def screen(request: pytest.FixtureRequest) -> ViewportSize:
    return request.param


@pytest.fixture
def lead_page(
    escalated_bench: Run, screen: ViewportSize, persona: Callable[..., Any], log_in: Callable[..., Page]
) -> Page:
    lead = persona("team_lead", escalated_bench.tenant, "lena-lead")
    lead.set_password(PASSWORD)
    lead.save()
    page = log_in(lead, viewport=screen)
    page.goto(reverse("handover:run_detail", args=[escalated_bench.pk]))
    expect(page.locator("#run-panel h1")).to_contain_text("T-40912")
    return page


def _open_with_keyboard(page: Page, before: Locator, disclosure: Locator) -> None:
    """Focus the control just before the disclosure, Tab onto its summary, press Enter."""
    expect(disclosure).not_to_have_attribute("open", re.compile(".*"))
    before.focus()
    page.keyboard.press("Tab")
    expect(disclosure.locator("summary")).to_be_focused()
    page.keyboard.press("Enter")
    expect(disclosure).to_have_attribute("open", "")


def test_the_run_page_and_its_dialog_name_steps_by_label_with_ids_behind_details(
    lead_page: Page, escalated_bench: Run
) -> None:
    page = lead_page
    pickup = escalated_bench.intents.get(tool="start_return")
    step = page.locator(f'section.completed li[data-step="{pickup.step_id}"]')
    expect(step.locator("strong.tool")).to_have_text("Start the return")
    undo = step.get_by_role("button", name="Undo “Start the return”…")
    expect(undo).to_be_visible()
    expect(page.locator("#run-panel")).not_to_contain_text("Compensate (")
    # The step's id is on the page, but only inside its closed disclosure.
    raw = step.locator("details.raw")
    expect(raw.get_by_text(pickup.step_id)).to_be_hidden()
    _open_with_keyboard(page, undo, raw)
    expect(raw.get_by_text(pickup.step_id)).to_be_visible()

    # The dialog: the undo by labels; its arguments and the step id behind Details.
    undo.focus()
    page.keyboard.press("Enter")
    dialog = page.locator("dialog#dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_have_text("Undo “Start the return”")
    expect(dialog.locator("ul.effects")).to_contain_text(
        "send “Cancel the pickup” to undo “Start the return”"
    )
    expect(dialog.locator("ul.effects")).not_to_contain_text("label=")
    details = dialog.locator("details.raw")
    argument = details.get_by_text(f"arguments: label={pickup.receipt['label']}")
    expect(argument).to_be_hidden()
    summary = details.locator("summary")
    for _ in range(8):  # Tab through the dialog to its disclosure, whatever had focus on opening
        if summary.evaluate("element => element === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(summary).to_be_focused()
    page.keyboard.press("Enter")
    expect(argument).to_be_visible()
    dialog.get_by_role("button", name="Undo", exact=True).click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#run-panel")).to_contain_text("being undone now")
    assert AuditEntry.objects.filter(action=AuditAction.COMPENSATE_STEP, step_id=pickup.step_id).exists()

    # The audit page says it as a sentence, the step id and the states behind Details.
    page.goto(reverse("handover:audit"))
    row = page.locator("tr.audit-compensate_step").first
    expect(row.locator(".audit-sentence")).to_have_text("lena-lead asked to undo “Start the return”")
    assert "compensation: — →" not in row.inner_text()  # the states are behind Details
    raw = row.locator("details.raw")
    expect(raw.get_by_text(pickup.step_id)).to_be_hidden()
    _open_with_keyboard(page, row.get_by_role("link", name="T-40912"), raw)
    expect(raw.get_by_text(pickup.step_id)).to_be_visible()
