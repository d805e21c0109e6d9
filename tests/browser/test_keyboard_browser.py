"""The queue with the keyboard alone, in Chromium: Tab and Enter do what the focused link or
button says (the shortcuts never take a key from a control), the shortcuts still work from the
page or from a run's row, and focus stays where it was through each redraw of the results and
comes back to the control that acted (or its row, when the action is no longer offered)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Locator, Page, expect

from journal.models import Run
from tests.support.stuck_runs import escalated_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MOST_TABS = 80  # more than the header, the filters, the bulk form and two rows hold


@pytest.fixture
def runs(make_run: Callable[..., Run]) -> list[Run]:
    """Two escalated runs, nearest deadline first: T-40912, then T-41402."""
    soon = timezone.now() + timedelta(hours=2)
    return [
        escalated_run(make_run, ticket_id="T-40912", order_id="SU-90317", deadline=soon),
        escalated_run(make_run, ticket_id="T-41402", order_id="SU-41207", deadline=soon + timedelta(hours=1)),
    ]


@pytest.fixture
def queue(runs: list[Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]) -> Page:
    page = log_in(persona("support_staff", runs[0].tenant, "sam"))
    expect(page.locator("#queue-results tbody tr")).to_have_count(2)
    return page


def _focused(page: Page) -> str:
    """What has focus, as a person would name it: its tag and words (or the row's ticket)."""
    return str(
        page.evaluate(
            """() => { const el = document.activeElement;
                       if (!el || el === document.body) return 'body';
                       const row = el.closest('tr[data-ticket]');
                       return el.tagName.toLowerCase() + ' ' + (el === row ? row.dataset.ticket : el.textContent.trim())
                              + (row && el !== row ? ' in ' + row.dataset.ticket : ''); }"""
        )
    )


def _tab_to(page: Page, target: Locator) -> None:
    """Press Tab, from wherever focus is, until `target` has it."""
    for _ in range(MOST_TABS):
        page.keyboard.press("Tab")
        if target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"Tab never reached {target}; focus ended on {_focused(page)}")


def _row(page: Page, ticket: str) -> Locator:
    return page.locator(f'#queue-results tr[data-ticket="{ticket}"]')


def test_enter_on_a_focused_link_follows_it_not_the_shortcut(queue: Page) -> None:
    page = queue
    _tab_to(page, page.locator("header.top").get_by_role("link", name="Dead letters"))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Dead letters")

    # The second row's ticket, not the first row's (nor the row the shortcuts are on).
    page.goto("/")
    page.keyboard.press("j")  # the shortcuts' row is T-40912
    _tab_to(page, _row(page, "T-41402").get_by_role("link", name="T-41402"))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_contain_text("T-41402")


def test_enter_on_assign_to_me_assigns_that_run_and_focus_comes_back_to_its_row(
    queue: Page, runs: list[Run]
) -> None:
    page = queue
    _tab_to(page, _row(page, "T-41402").get_by_role("button", name="Assign to me"))
    page.keyboard.press("Enter")
    expect(_row(page, "T-41402")).to_contain_text("sam")
    assert Run.objects.get(pk=runs[1].pk).assignee.get_username() == "sam"  # type: ignore[union-attr]
    assert Run.objects.get(pk=runs[0].pk).assignee is None
    # The button is no longer offered on that row: its row has focus, not the page.
    expect(_row(page, "T-41402")).to_be_focused()

    # Space on the other row's button does the same.
    _tab_to(page, _row(page, "T-40912").get_by_role("button", name="Assign to me"))
    page.keyboard.press("Space")
    expect(_row(page, "T-40912")).to_contain_text("sam")
    expect(_row(page, "T-40912")).to_be_focused()


def test_focus_stays_on_its_control_through_a_redraw_of_the_results(queue: Page) -> None:
    page = queue
    link = _row(page, "T-41402").get_by_role("link", name="T-41402")
    _tab_to(page, link)
    page.evaluate("() => document.getElementById('queue-results').setAttribute('data-drawn-before', '')")
    # What the 10 s poll does, now: the results drawn again from the server (awaited).
    page.evaluate(
        "() => htmx.ajax('GET', window.location.pathname,"
        " {source: '#queue-results', target: '#queue-results', swap: 'outerHTML'})"
    )
    expect(page.locator("#queue-results[data-drawn-before]")).to_have_count(0)
    expect(_row(page, "T-41402").get_by_role("link", name="T-41402")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_contain_text("T-41402")


def test_the_shortcuts_work_from_the_page_and_from_a_row(queue: Page) -> None:
    page = queue
    page.keyboard.press("j")
    expect(_row(page, "T-40912")).to_be_focused()
    page.keyboard.press("j")
    expect(_row(page, "T-41402")).to_be_focused()
    expect(_row(page, "T-41402")).to_have_attribute("aria-current", "true")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_contain_text("T-41402")

    # A row clicked (not its link) is the keyboard's row too.
    page.go_back()
    _row(page, "T-40912").locator("td.status").click()
    expect(_row(page, "T-40912")).to_be_focused()
    page.keyboard.press("o")
    expect(page.get_by_role("heading", level=1)).to_contain_text("T-40912")
