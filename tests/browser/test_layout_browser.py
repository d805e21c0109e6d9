"""Every page at a phone's width (390 by 844) and a laptop's (1280 by 800), in Chromium: the page
never scrolls sideways (a wide table scrolls in its own box), no table cell is narrower than
its longest word (no word broken mid-word), a list of ten runs is no taller than three screens
(on a phone its rows are cards), the header keeps the user's name on screen, and the
confirmation dialogs are native modals that fit the screen, close on Escape, give focus back,
and keep what was typed when the server refuses it.

With SEAM_SCREENSHOTS=1 each page is saved as docs/screenshots/<page>-<width>.png."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Page, expect

from audit.models import AuditAction, AuditEntry
from compensations.models import CompensationStatus, DeadLetter
from compensations.services import compensation_execute, compensation_request
from devtools.processes import ROOT
from journal.models import Run
from journal.services import Actor
from tests.support.stuck_runs import escalate_ticket, escalated_run

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = ROOT / "docs" / "screenshots"
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
WIDTHS = [pytest.param(PHONE, id="390"), pytest.param(LAPTOP, id="1280")]
TAP_TARGET_PX = 44  # the smallest a finger hits reliably (Apple's and Google's guidelines)
LIST_PAGES = ("queue", "runs")
SCREENS_FOR_TEN_ROWS = 3  # a page of ten runs, read on a phone, is at most three screens long


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


@pytest.fixture
def ten_runs(world: World, make_run: Callable[..., Run]) -> list[Run]:
    """Nine more runs waiting for a person beside T-40912, so the queue and All runs show ten: a
    long task type without a policy (a person decides), deadlines or none, some assigned."""
    soon = timezone.now() + timedelta(hours=5)
    made = [world.run]
    for n in range(9):
        fields: dict[str, Any] = {
            "ticket_id": f"T-5120{n}",
            "order_id": f"SU-{73000 + n}",
            "task_type": "warranty-replacement-claim",
            "deadline": soon + timedelta(hours=n) if n % 3 else None,
        }
        made.append(escalated_run(make_run, tenant=world.run.tenant, **fields))
    Run.objects.filter(pk__in=[run.pk for run in made[::2]]).update(assignee=world.lead)
    return made


def _open_as(browser: Any, live_server: Any, user: Any, viewport: dict[str, int]) -> Page:
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    page = context.new_page()
    page.goto("/accounts/login/?next=/")
    page.get_by_label("Username").fill(user.get_username())
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Queue")
    # The heading is drawn before the deferred scripts run; typing before htmx has set up the
    # search's listeners would send nothing.
    page.wait_for_load_state("load")
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


def _narrow_cells(page: Page) -> list[str]:
    """Table cells narrower than a word in them: the word drawn on more than one line (broken
    mid-word) or past the cell's right edge. Each word is measured where the browser laid it
    out, so a cell drawn as a card (a label beside its value) is measured as drawn. A word is
    letters and digits: a line may break after a hyphen or a slash (warranty-/replacement). Ids
    and keys in <code> are not words (they may break anywhere), and what is hidden but for
    screen readers (a 1 px box, as the cards' column headings) is not measured."""
    return list(
        page.evaluate(
            """() => {
                const narrow = [];
                const collapsed = el => {
                    for (; el && el.tagName !== 'BODY'; el = el.parentElement) {
                        const b = el.getBoundingClientRect();
                        if (b.width <= 1 || b.height <= 1) return true;
                    }
                    return false;
                };
                for (const cell of document.querySelectorAll('td, th')) {
                    const box = cell.getBoundingClientRect();
                    if (collapsed(cell)) continue;
                    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
                    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                        const holder = node.parentElement;
                        if (holder.closest('code, .visually-hidden') || !holder.getClientRects().length) continue;
                        for (const word of node.data.matchAll(/[\\p{L}\\p{N}_'\\u2019]+/gu)) {
                            const range = document.createRange();
                            range.setStart(node, word.index);
                            range.setEnd(node, word.index + word[0].length);
                            const rects = [...range.getClientRects()].filter(r => r.width > 0);
                            if (!rects.length) continue;
                            const first = rects[0];
                            const lines = rects.filter(r => r.top > first.top + first.height / 2).length + 1;
                            const right = Math.max(...rects.map(r => r.right));
                            if (lines > 1 || right > box.right + 1) {
                                narrow.push(`${cell.tagName.toLowerCase()} ${Math.round(box.width)}px: ` +
                                            `"${word[0]}" on ${lines} line(s)`);
                            }
                        }
                    }
                }
                return narrow.slice(0, 10);
            }"""
        )
    )


def _assert_words_whole(page: Page, name: str) -> None:
    narrow = _narrow_cells(page)
    assert narrow == [], f"{name} at {page.viewport_size} breaks words in table cells: {narrow}"


def _assert_list_fits(page: Page, name: str) -> None:
    """A list of runs needs no scrolling sideways, even in its own box, and ten of its runs are
    at most three screens long."""
    hidden = page.evaluate(
        "() => [...document.querySelectorAll('.table-box')].map(b => b.scrollWidth - b.clientWidth)"
    )
    assert hidden == [0], f"{name} at {page.viewport_size} hides {hidden} px of its list to the side"
    height = page.evaluate("() => document.documentElement.scrollHeight")
    screens = page.viewport_size["height"] * SCREENS_FOR_TEN_ROWS  # type: ignore[index]
    assert height <= screens, f"{name} with ten runs is {height}px tall, over {screens}px"


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
    world: World, ten_runs: list[Run], browser: Any, live_server: Any, viewport: dict[str, int]
) -> None:
    width = viewport["width"]
    pages: dict[Any, Page] = {}
    for name, path, user in _pages(world):
        page = pages.get(user.pk) or pages.setdefault(user.pk, _open_as(browser, live_server, user, viewport))
        page.goto(path)
        _assert_fits(page, name)
        if name != "admin":  # the Django admin's own tables are Django's
            _assert_words_whole(page, name)
        if name in LIST_PAGES:
            expect(page.locator("tbody tr")).to_have_count(len(ten_runs))
            _assert_list_fits(page, name)
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
    # (emptied by the dialog's close event, which the browser dispatches after hiding it)
    page.wait_for_function("() => document.getElementById('dialog').children.length === 0", timeout=5000)
    page.wait_for_function("() => document.activeElement.textContent.trim() === 'Resolve…'", timeout=5000)

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
