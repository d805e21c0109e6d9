"""The run page reads plainly in a real browser (issue 19, item 2), on the demo's T-41207: at
1280x800 the four lists start above the fold under a one-line coverage block that promises
nothing since undone; the undone reship sits apart from what still stands; a disabled button
looks disabled and says why; one date format with its zone; the error pages are styled and the
favicon is served."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from journal.models import Run
from tests.support.stuck_runs import demo_ticket

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FOLD = ViewportSize(width=1280, height=800)


def _support(persona: Callable[..., Any], run: Run) -> Any:
    user = persona("support_staff", run.tenant, "sam")
    user.set_password(PASSWORD)
    user.save()
    return user


def _bottom(page: Page, selector: str) -> float:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return float(box["y"] + box["height"])


def test_t41207_reads_plainly_with_its_four_lists_above_the_fold(
    sandbox_tools: str, persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    run = demo_ticket(sandbox_tools, "T-41207")
    page = log_in(_support(persona, run))
    page.set_viewport_size(FOLD)
    page.goto(f"/runs/{run.pk}/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("T-41207")

    for heading in ("Completed", "Not done", "Uncertain", "Customer told"):
        selector = f".lists h2:has-text('{heading}')"
        expect(page.locator(selector)).to_be_visible()
        assert _bottom(page, selector) <= FOLD["height"], f"{heading} is below the fold"

    coverage = page.locator("section.coverage")
    expect(coverage).to_contain_text("Coverage 4/4")
    expect(coverage).not_to_contain_text("may be promised")
    expect(coverage).to_contain_text("since undone (“Ship a replacement”): promise nothing from it")

    undone = page.locator("section.completed ul.undone #completed-reship")
    expect(undone).to_be_visible()
    expect(undone).to_contain_text("undone at")
    assert undone.locator(".was").evaluate("e => getComputedStyle(e).textDecorationLine") == "line-through"
    expect(page.locator("section.completed ul.standing")).not_to_contain_text("reship")

    resume = page.get_by_role("button", name="Resume…")
    expect(resume).to_be_disabled()
    style = resume.evaluate(
        "b => ({cursor: getComputedStyle(b).cursor, border: getComputedStyle(b).borderStyle})"
    )
    assert style == {"cursor": "not-allowed", "border": "dashed"}, style
    why = page.locator("#resume-blocked")
    expect(why).to_be_visible()
    expect(why).to_contain_text("Not possible now:")
    assert float(why.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")) >= 12

    for time in page.locator("main time:not(.countdown)").all_text_contents():
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", time), time
    expect(page.locator("dd.deadline time.countdown")).to_have_text(re.compile(r" left$"))
    expect(page.locator("main")).not_to_contain_text("HTTP 409")


def test_a_forbidden_page_is_styled_and_the_favicon_is_served(
    sandbox_tools: str, persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    run = demo_ticket(sandbox_tools, "T-41402")
    page = log_in(_support(persona, run))

    response = page.goto("/audit/")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("Not allowed")
    expect(page.locator("header.top")).to_be_visible()
    expect(page.get_by_role("link", name="Back to the queue")).to_be_visible()
    icon = page.evaluate("document.querySelector('link[rel=icon]').href")
    assert icon.endswith("/static/favicon.svg")
    assert page.request.get(icon).status == 200

    response = page.goto(f"/runs/{run.pk}x/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("There is nothing here")
