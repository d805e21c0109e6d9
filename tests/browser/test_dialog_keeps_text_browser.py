"""Nothing typed in a dialog is lost (issue 32, item 4), in Chromium at 1280 and 390 px:

- a click outside the dialog, Escape and Cancel ask before discarding a note; "Keep editing"
  keeps it, and only "Discard" throws it away;
- a form refused for its input comes back with everything typed in it;
- a refusal because the run changed meanwhile says what changed once, redraws the run behind,
  and keeps the note in a dialog a second try sends as it is.

With SEAM_SCREENSHOTS=1 the refusal also writes docs/screenshots/dialog-kept-note-<width>.png."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import Locator, Page, ViewportSize, expect

from audit.models import AuditAction, AuditEntry
from devtools.processes import ROOT
from handover import run_state_token
from journal.models import CustomerMessage, Run
from journal.validation import MAX_MESSAGE_CHARS
from tests.support.stuck_runs import escalated_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENS: list[ViewportSize] = [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]
NOTE = "told the buyer the credit was reversed; they agreed"


@pytest.fixture(params=SCREENS, ids=["1280", "390"])
def screen(request: pytest.FixtureRequest) -> ViewportSize:
    return request.param


@pytest.fixture
def run(make_run: Callable[..., Run]) -> Run:
    return escalated_run(make_run, ticket_id="T-40912", order_id="SU-90317")


@pytest.fixture
def run_page(
    run: Run, screen: ViewportSize, persona: Callable[..., Any], log_in: Callable[..., Page]
) -> Page:
    page = log_in(persona("support_staff", run.tenant, "sam"), viewport=screen)
    page.goto(reverse("handover:run_detail", args=[run.pk]))
    expect(page.locator("#run-panel h1")).to_contain_text("T-40912")
    return page


def _open(page: Page, button: str) -> Locator:
    page.locator("#run-panel").get_by_role("button", name=re.compile(rf"^{re.escape(button)}")).first.click()
    dialog = page.locator("dialog#dialog")
    expect(dialog).to_be_visible()
    return dialog


def _click_outside(page: Page) -> None:
    """A click on the backdrop, in the page's top left corner (the dialog is centred)."""
    page.mouse.click(4, 4)


def test_a_click_outside_escape_and_cancel_ask_before_discarding_a_note(run_page: Page) -> None:
    dialog = _open(run_page, "Resolve")
    note = dialog.get_by_label("Note (required)")
    note.fill(NOTE)
    ask = dialog.get_by_role("alertdialog", name="Discard what you typed?")

    for slip in (lambda: _click_outside(run_page), lambda: run_page.keyboard.press("Escape")):
        slip()
        expect(ask).to_be_visible()
        expect(dialog.get_by_role("button", name="Keep editing")).to_be_focused()
        dialog.get_by_role("button", name="Keep editing").click()
        expect(ask).to_have_count(0)
        expect(dialog).to_be_visible()
        expect(note).to_have_value(NOTE)
        expect(note).to_be_focused()

    # A second Escape (which Chromium does not let a page cancel) still loses nothing.
    run_page.keyboard.press("Escape")
    expect(ask).to_be_visible()
    run_page.keyboard.press("Escape")
    expect(dialog).to_be_visible()
    expect(note).to_have_value(NOTE)
    dialog.get_by_role("button", name="Keep editing").click()
    expect(ask).to_have_count(0)
    # The dialog's own Cancel asks as well.
    dialog.get_by_role("button", name="Cancel").click()
    expect(ask).to_be_visible()
    # Only Discard throws it away.
    dialog.get_by_role("button", name="Discard").click()
    expect(dialog).to_be_hidden()
    assert not AuditEntry.objects.filter(action=AuditAction.RESOLVE).exists()
    # An empty dialog closes at once, without asking.
    dialog = _open(run_page, "Resolve")
    _click_outside(run_page)
    expect(dialog).to_be_hidden()


def test_a_form_refused_for_its_input_keeps_everything_typed(run: Run, run_page: Page) -> None:
    dialog = _open(run_page, "Add what the customer was told")
    channel = dialog.get_by_label("Channel")
    other = CustomerMessage.Channel.values[-1]
    channel.select_option(other)
    body = dialog.get_by_label("What they were told")
    too_long = "x" * (MAX_MESSAGE_CHARS + 1)
    # Past the field's maxlength, as a paste through another tool would be (the server decides).
    body.evaluate("(el, text) => { el.value = text; }", too_long)

    dialog.get_by_role("button", name="Record").click()

    expect(dialog.get_by_role("alert")).to_contain_text("body")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Channel")).to_have_value(other)
    expect(dialog.get_by_label("What they were told")).to_have_value(too_long)
    assert not run.customer_messages.exists()
    # What came back is guarded like what was typed: a slip asks first.
    _click_outside(run_page)
    dialog.get_by_role("button", name="Keep editing").click()
    expect(dialog.get_by_label("What they were told")).to_have_value(too_long)


def test_a_refusal_because_the_run_changed_keeps_the_note_for_a_second_try(
    run: Run, run_page: Page, persona: Callable[..., Any]
) -> None:
    dialog = _open(run_page, "Resolve")
    dialog.get_by_label("Note (required)").fill(NOTE)
    # Meanwhile a lead takes the run for themselves.
    lead = Client()
    lead.force_login(persona("team_lead", run.tenant, "lee"))
    assigned = lead.post(
        reverse("handover:run_act", args=[run.pk, "assign"]), {"state": run_state_token(run)}
    )
    assert assigned.status_code in (200, 302), assigned.content[:300]
    assert Run.objects.get(pk=run.pk).assignee is not None

    dialog.get_by_role("button", name="Resolve", exact=True).click()

    changed = dialog.locator(".changed")
    expect(changed).to_contain_text("This run changed while this was open; nothing was applied.")
    # Said once, and what changed said once, in the dialog; the run behind is drawn as it is now.
    expect(changed.locator("li")).to_have_count(1)
    expect(changed.locator("li")).to_contain_text("lee")
    words = dialog.inner_text()
    assert words.lower().count("this run changed") == 1, words
    assert words.count("lee") == 1, words
    expect(run_page.locator("#run-panel")).to_contain_text("lee")
    note = dialog.get_by_label("Note (required)")
    expect(note).to_have_value(NOTE)
    assert Run.objects.get(pk=run.pk).awaiting_person
    if os.environ.get("SEAM_SCREENSHOTS") == "1":
        width = (run_page.viewport_size or {"width": 0})["width"]
        run_page.screenshot(path=ROOT / "docs" / "screenshots" / f"dialog-kept-note-{width}.png")

    dialog.get_by_role("button", name="Resolve", exact=True).click()

    expect(dialog).to_be_hidden()
    expect(run_page.locator("#run-panel h1 .status-resolved")).to_be_visible()
    entry = AuditEntry.objects.get(run=run, action=AuditAction.RESOLVE)
    assert (entry.username, entry.note) == ("sam", NOTE)
    assert not Run.objects.get(pk=run.pk).awaiting_person


def test_a_stale_action_from_the_queue_says_what_changed_once_and_the_queue_redraws(
    run: Run, screen: ViewportSize, persona: Callable[..., Any], log_in: Callable[..., Page]
) -> None:
    page = log_in(persona("support_staff", run.tenant, "sam"), viewport=screen)
    row = page.locator('#queue-results tr[data-ticket="T-40912"]')
    expect(row.locator(".assignee")).to_have_text("—")
    lead = Client()
    lead.force_login(persona("team_lead", run.tenant, "lee"))
    assert lead.post(
        reverse("handover:run_act", args=[run.pk, "assign"]), {"state": run_state_token(run)}
    ).status_code in (200, 302)

    row.get_by_role("button", name="Assign to me").click()

    dialog = page.locator("dialog#dialog")
    expect(dialog).to_contain_text("This run changed; nothing was applied")
    words = dialog.inner_text()
    assert words.lower().count("this run changed") == 1 and words.count("lee assigned") == 1, words
    # Redrawn at once by the refusal's event, well before the queue's next timed poll (10 s).
    expect(row.locator(".assignee")).to_have_text("lee", timeout=3000)
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    assert Run.objects.filter(pk=run.pk, assignee__username="lee").exists()
