"""Every page at a phone's width (390 by 844) and a laptop's (1280 by 800), in Chromium: the page
never scrolls sideways (a wide table scrolls in its own box), the header keeps the user's name
on screen, and the confirmation dialogs are native modals that fit the screen, close on Escape,
give focus back, and keep what was typed when the server refuses it.

With SEAM_SCREENSHOTS=1 each page is saved as docs/screenshots/<page>-<width>.png."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from django.urls import reverse
from playwright.sync_api import Page, expect

from audit.models import AuditAction, AuditEntry
from compensations.models import CompensationStatus, DeadLetter
from compensations.services import compensation_execute, compensation_request
from devtools.processes import ROOT
from journal.models import Run
from journal.services import Actor
from tests.support.stuck_runs import escalate_ticket

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = ROOT / "docs" / "screenshots"
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
WIDTHS = [pytest.param(PHONE, id="390"), pytest.param(LAPTOP, id="1280")]
TAP_TARGET_PX = 44  # the smallest a finger hits reliably (Apple's and Google's guidelines)


@dataclass(frozen=True)
class World:
    run: Run
    letter: DeadLetter
    lead: Any
    support: Any
    admin: Any


def _with_password(user: Any) -> Any:
    user.set_password(PASSWORD)
    user.save()
    return user


@pytest.fixture
def world(sandbox_tools: str, persona: Callable[..., Any]) -> World:
    """T-40912 escalated after its run died mid-sequence, and a dead letter: the undo of its
    pickup failed because the courier had already collected the parcel."""
    run = escalate_ticket(sandbox_tools)
    lead = _with_password(persona("team_lead", run.tenant, "lena-lead"))
    support = _with_password(persona("support_staff", run.tenant, "sam-support"))
    admin = _with_password(persona("admin", run.tenant, "ada-admin"))
    pickup = run.intents.get(tool="start_return")
    requests.post(
        f"{sandbox_tools}/sandbox/api/returns/collect", json={"label": pickup.receipt["label"]}, timeout=5
    ).raise_for_status()
    executor = Actor.system("test-executor")
    failed = compensation_execute(
        compensation=compensation_request(original=pickup, actor=executor), actor=executor
    )
    assert failed.status == CompensationStatus.DEAD_LETTERED
    return World(run, DeadLetter.objects.get(compensation=failed), lead, support, admin)


def _open_as(browser: Any, live_server: Any, user: Any, viewport: dict[str, int]) -> Page:
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    page = context.new_page()
    page.goto("/accounts/login/?next=/")
    page.get_by_label("Username").fill(user.get_username())
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Queue")
    return page


def _screenshot(page: Page, name: str) -> None:
    if os.environ.get("SEAM_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / name, full_page=True)


def _misfits(page: Page) -> dict[str, Any]:
    """What does not fit the screen: the page's own horizontal scroll, and every visible element
    (outside a box that scrolls on its own) whose right edge passes the screen's."""
    return dict(
        page.evaluate(
            """() => {
                const width = document.documentElement.clientWidth;
                const scrollsOnItsOwn = el => el.parentElement && el.parentElement.closest('.table-box, dialog, pre');
                const sticking = [...document.querySelectorAll('body *')].filter(el => {
                    if (scrollsOnItsOwn(el)) return false;
                    const box = el.getBoundingClientRect();
                    return box.width > 0 && box.height > 0 && box.right > width + 1;
                }).map(el => el.tagName.toLowerCase() + (el.className ? '.' + el.className : '') +
                             ': ' + (el.textContent || '').trim().slice(0, 40));
                return {page: document.documentElement.scrollWidth - width, sticking: sticking.slice(0, 10)};
            }"""
        )
    )


def _assert_fits(page: Page, name: str) -> None:
    misfits = _misfits(page)
    assert misfits == {"page": 0, "sticking": []}, f"{name} does not fit {page.viewport_size}: {misfits}"


def _pages(world: World) -> list[tuple[str, str, Any]]:
    """(name, path, who opens it) for every page a person reaches from the header."""
    run_path = reverse("handover:run_detail", args=[world.run.pk])
    return [
        ("queue", reverse("handover:queue"), world.lead),
        ("runs", reverse("handover:run_list"), world.lead),
        ("run", run_path, world.lead),
        ("dead-letters", reverse("handover:dead_letters"), world.lead),
        ("audit", reverse("handover:audit"), world.lead),
        ("catalogue", reverse("handover:catalogue"), world.lead),
        ("insights", reverse("insights:page"), world.lead),
        ("forbidden", reverse("handover:audit"), world.support),
        ("not-found", run_path.replace(str(world.run.pk)[:8], "00000000"), world.lead),
        ("admin", reverse("admin:index"), world.admin),
    ]


@pytest.mark.parametrize("viewport", WIDTHS)
def test_every_page_fits_the_screen_with_the_header_and_user_name_on_it(
    world: World, browser: Any, live_server: Any, viewport: dict[str, int]
) -> None:
    width = viewport["width"]
    pages: dict[Any, Page] = {}
    for name, path, user in _pages(world):
        page = pages.get(user.pk) or pages.setdefault(user.pk, _open_as(browser, live_server, user, viewport))
        page.goto(path)
        _assert_fits(page, name)
        if name != "admin":  # the Django admin has its own header
            who = page.locator("header.top .who span")
            expect(who).to_have_text(user.get_username())
            box = who.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (name, box)
        _screenshot(page, f"{name}-{width}.png")

    page = pages[world.lead.pk]
    # The login page, logged out.
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    login = context.new_page()
    login.goto("/accounts/login/")
    _assert_fits(login, "login")
    _screenshot(login, f"login-{width}.png")

    # The calls and the run's audit, opened, stay within the screen (their tables in their box).
    page.goto(reverse("handover:run_detail", args=[world.run.pk]))
    for summary in page.locator("details summary").all():
        summary.click()
    _assert_fits(page, "run with its details open")


def _dialog(page: Page) -> Any:
    return page.locator("dialog#dialog")


def _assert_modal_on_screen(page: Page, viewport: dict[str, int]) -> None:
    dialog = _dialog(page)
    expect(dialog).to_be_visible()
    assert page.evaluate("() => document.getElementById('dialog').matches(':modal')")
    assert page.evaluate("() => document.getElementById('dialog').contains(document.activeElement)")
    box = dialog.bounding_box()
    assert box is not None
    assert box["x"] >= 0 and box["y"] >= 0, box
    assert box["x"] + box["width"] <= viewport["width"] and box["y"] + box["height"] <= viewport["height"], (
        box
    )
    for button in dialog.get_by_role("button").all():
        button_box = button.bounding_box()
        assert button_box is not None and button_box["x"] + button_box["width"] <= viewport["width"]
        if viewport["width"] == PHONE["width"]:
            assert button_box["height"] >= TAP_TARGET_PX, (button.text_content(), button_box)


@pytest.mark.parametrize("viewport", WIDTHS)
def test_dialogs_are_modal_fit_the_screen_close_on_escape_and_keep_what_was_typed(
    world: World, browser: Any, live_server: Any, viewport: dict[str, int]
) -> None:
    page = _open_as(browser, live_server, world.lead, viewport)
    page.goto(reverse("handover:run_detail", args=[world.run.pk]))

    # Opened: modal (the page behind is inert), on screen, focus inside.
    opener = page.get_by_role("button", name="Resolve…")
    opener.click()
    _assert_modal_on_screen(page, viewport)
    _screenshot(page, f"dialog-{viewport['width']}.png")
    behind = page.evaluate(
        """() => { const b = document.querySelector('#run-panel h1').getBoundingClientRect();
                   const el = document.elementFromPoint(b.left + 2, b.top + 2);
                   return el === null || el.closest('dialog') !== null || el.tagName === 'HTML'; }"""
    )
    assert behind or page.evaluate("() => document.getElementById('dialog').matches(':modal')")

    # Escape closes it, empties it, and gives focus back to the button that opened it.
    page.keyboard.press("Escape")
    expect(_dialog(page)).to_be_hidden()
    assert page.evaluate("() => document.getElementById('dialog').children.length") == 0
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Resolve…"

    # A note of blanks is refused with the field named; the dialog stays open with the form and
    # what was typed in it, and nothing is written.
    entries = AuditEntry.objects.count()
    opener.click()
    note = _dialog(page).get_by_label("Note (required)")
    note.fill("   \n  ")
    with page.expect_response(lambda r: "/act/resolve/" in r.url) as answer:
        _dialog(page).get_by_role("button", name="Resolve", exact=False).last.click()
    assert answer.value.status == 400
    _assert_modal_on_screen(page, viewport)
    expect(_dialog(page).get_by_role("alert")).to_contain_text("note")
    assert _dialog(page).get_by_label("Note (required)").input_value() == "   \n  "
    assert AuditEntry.objects.count() == entries

    # Cancel closes it too, and a real note then resolves the run from a fresh dialog.
    _dialog(page).get_by_role("button", name="Cancel").click()
    expect(_dialog(page)).to_be_hidden()
    opener.click()
    _dialog(page).get_by_label("Note (required)").fill("Customer called; refund sent by hand.")
    _dialog(page).get_by_role("button", name="Resolve", exact=False).last.click()
    expect(_dialog(page)).to_be_hidden()
    expect(page.locator("#run-panel .flash")).to_be_visible()
    assert AuditEntry.objects.filter(action=AuditAction.RESOLVE, username="lena-lead").count() == 1


@pytest.mark.parametrize("viewport", [pytest.param(PHONE, id="390")])
def test_a_dead_letter_note_of_blanks_is_refused_and_what_was_typed_stays(
    world: World, browser: Any, live_server: Any, viewport: dict[str, int]
) -> None:
    page = _open_as(browser, live_server, world.lead, viewport)
    page.on("dialog", lambda question: question.accept())  # the browser's own "are you sure?"
    page.goto(reverse("handover:dead_letters"))
    _assert_fits(page, "dead letters")
    resolve = page.locator(f"#dl-{world.letter.pk} form[action$='/resolve/']")
    resolve.locator("[name=note]").fill("   ")
    entries = AuditEntry.objects.count()
    with page.expect_response(lambda r: r.url.endswith("/resolve/")) as answer:
        resolve.get_by_role("button").click()
    assert answer.value.status == 400
    expect(page.locator("#letters")).to_contain_text("note")
    resolve = page.locator(f"#dl-{world.letter.pk} form[action$='/resolve/']")
    assert resolve.locator("[name=note]").input_value() == "   "
    world.letter.refresh_from_db()
    assert world.letter.resolved_at is None and AuditEntry.objects.count() == entries
