"""Edit before resume (issue 32, item 10), in Chromium at 1280 and 390 px: on a run waiting for a
person, "Edit arguments…" on the refund that was never sent opens a dialog with one labelled
field per argument; the changes are shown old → new before "Save the changes"; a refused value
is named and kept as typed; once saved, the resume dialog says the refund goes with the edited
amount. Driven once with the keyboard alone and once with the mouse."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import Locator, Page, ViewportSize, expect

from audit.models import AuditAction, AuditEntry
from journal.models import Run
from journal.selectors import plan_with_keys
from tests.support.stuck_runs import escalated_run, sandbox_tools_declared

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENS: list[ViewportSize] = [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]
MOST_TABS = 80


@pytest.fixture(params=SCREENS, ids=["1280", "390"])
def screen(request: pytest.FixtureRequest) -> ViewportSize:
    return request.param


@pytest.fixture(autouse=True)
def sandbox_schemas() -> Iterator[None]:
    with sandbox_tools_declared():
        yield


@pytest.fixture
def run(make_run: Callable[..., Run]) -> Run:
    return escalated_run(make_run, task_type="no-policy")


@pytest.fixture
def run_page(
    run: Run, screen: ViewportSize, persona: Callable[..., Any], log_in: Callable[..., Page]
) -> Page:
    page = log_in(persona("support_staff", run.tenant, "sam"), viewport=screen)
    page.goto(reverse("handover:run_detail", args=[run.pk]))
    expect(page.locator("#run-panel h1")).to_contain_text("T-40912")
    return page


def _refund(run: Run) -> dict[str, Any]:
    return next(s for s in plan_with_keys(Run.objects.get(pk=run.pk)) if s["tool"] == "issue_refund")


def _tab_to(page: Page, target: Locator, key: str = "Tab") -> None:
    """Press Tab (or Shift+Tab), from wherever focus is, until `target` has it."""
    for _ in range(MOST_TABS):
        page.keyboard.press(key)
        if target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"Tab never reached {target}")


def _edit_button(page: Page, run: Run) -> Locator:
    item = page.locator(f'section.not-done li[data-step-key="{_refund(run)["key"]}"]')
    return item.get_by_role("button", name="Edit arguments…")


def _saved(run: Run, old_key: str) -> None:
    refund = _refund(run)
    assert refund["args"] == {"order_id": "SU-90317", "amount": "9.95", "currency": "USD"}
    assert refund["key"] != old_key
    assert AuditEntry.objects.filter(run=run, action=AuditAction.EDIT_STEP).count() == 1


def test_a_step_is_edited_with_the_keyboard_alone(run: Run, run_page: Page) -> None:
    page = run_page
    old_key = _refund(run)["key"]
    _tab_to(page, _edit_button(page, run))
    page.keyboard.press("Enter")
    dialog = page.locator("dialog#dialog")
    expect(dialog).to_be_visible()
    amount = dialog.get_by_label("amount")
    expect(amount).to_have_value("14.95")
    _tab_to(page, amount)
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type("9.95")
    page.keyboard.press("Enter")  # the form's first button: "Show the changes"

    changed = dialog.locator('table.diff tr.changed[data-arg="amount"]')
    expect(changed).to_contain_text("14.95")
    expect(changed).to_contain_text("9.95")
    expect(dialog.locator('table.diff tr[data-arg="currency"]')).to_contain_text("unchanged")
    assert _refund(run)["key"] == old_key  # shown, not saved
    _tab_to(page, dialog.get_by_role("button", name="Save the changes"))
    page.keyboard.press("Enter")

    expect(dialog).to_be_hidden()
    expect(page.locator("#run-panel .flash")).to_contain_text("Arguments changed")
    _saved(run, old_key)

    # Back up the page from the step's button, which has focus again, to the next action's.
    _tab_to(page, page.locator("#run-panel").get_by_role("button", name="Resume…"), "Shift+Tab")
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    expect(dialog.locator("ul.effects")).to_contain_text("“Refund the buyer” is sent with the arguments")
    expect(dialog.locator("ul.effects")).to_contain_text("amount 9.95")
    expect(dialog.locator("ul.effects")).to_contain_text("amount was 14.95")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_a_step_is_edited_with_the_mouse_and_a_refused_value_is_kept(run: Run, run_page: Page) -> None:
    page = run_page
    old_key = _refund(run)["key"]
    _edit_button(page, run).click()
    dialog = page.locator("dialog#dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_label("amount").fill("nine")
    dialog.get_by_role("button", name="Show the changes").click()

    expect(dialog.get_by_role("alert")).to_contain_text("args.amount")
    expect(dialog.get_by_label("amount")).to_have_value("nine")
    assert _refund(run)["key"] == old_key

    dialog.get_by_label("amount").fill("9.95")
    dialog.get_by_role("button", name="Show the changes").click()
    expect(dialog.locator('table.diff tr.changed[data-arg="amount"]')).to_contain_text("9.95")
    dialog.get_by_role("button", name="Save the changes").click()

    expect(dialog).to_be_hidden()
    _saved(run, old_key)
    page.locator("#run-panel").get_by_role("button", name="Resume…").click()
    expect(dialog.locator("ul.effects")).to_contain_text("amount 9.95")
    expect(dialog.locator("ul.effects")).to_contain_text("amount was 14.95")


def test_escape_closes_an_untouched_edit_at_once_and_asks_once_a_value_changed(
    run: Run, run_page: Page
) -> None:
    """The fields arrive holding the recorded arguments: that is not text the person typed, so
    Escape closes the dialog without asking; a changed value is, so Escape asks first."""
    page = run_page
    dialog = page.locator("dialog#dialog")
    _edit_button(page, run).click()
    expect(dialog.get_by_label("amount")).to_have_value("14.95")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(dialog.locator(".discard-ask")).to_have_count(0)

    _edit_button(page, run).click()
    dialog.get_by_label("amount").fill("9.95")
    page.keyboard.press("Escape")
    expect(dialog.locator(".discard-ask")).to_be_visible()
    dialog.get_by_role("button", name="Keep editing").click()
    expect(dialog.get_by_label("amount")).to_have_value("9.95")
