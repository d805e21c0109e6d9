"""The handover of T-40912 as staff see it in a real browser: log in, find the ticket in the
queue, read its three lists, compensate the pickup, and watch the worker's result
arrive on the open page without a reload. Two people compensating at once make one compensation.

With SEAM_SCREENSHOTS=1 the first test also writes docs/screenshots/queue.png and run.png."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, Response, expect

from audit.models import AuditAction, AuditEntry
from compensations.models import Compensation
from devtools.processes import ROOT, Fleet
from journal.models import Run
from tests.support.stuck_runs import escalate_ticket

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = ROOT / "docs" / "screenshots"
WORKER_TIMEOUT_MS = 45_000  # the worker's undo, then the next 4-second poll of the page
# The finished undo's words: the pending one says "being undone now", which must not pass for it.
UNDONE = re.compile(r"^\s*undone\b")


@pytest.fixture
def t40912(sandbox_tools: str, worker: Fleet) -> Run:
    """T-40912 escalated after its run died mid-sequence, with a worker already starting up."""
    return escalate_ticket(sandbox_tools)


def _staff(persona: Callable[..., Any], run: Run, username: str) -> Any:
    user = persona("support_staff", run.tenant, username)
    user.set_password(PASSWORD)
    user.save()
    return user


def _pickup(run: Run) -> Any:
    return run.intents.get(tool="start_return")


def _undos(ledger: Any, run: Run) -> Any:
    return ledger.filter(undoes__idempotency_key=_pickup(run).idempotency_key)


def _mark_page(page: Page) -> None:
    """A marker that a reload or a navigation would wipe: its survival proves htmx did the work."""
    page.evaluate("window.seamNoReload = true")


def _was_not_reloaded(page: Page) -> bool:
    return bool(page.evaluate("window.seamNoReload === true"))


def _open_run_from_queue(page: Page, ticket_id: str) -> None:
    search = page.get_by_label("Search")
    search.fill("no-such-ticket")
    expect(page.locator("#queue-results")).to_contain_text("No run matches these filters.")
    search.fill(ticket_id)
    row = page.locator(f'#queue-results tr[data-ticket="{ticket_id}"]')
    expect(row).to_be_visible()
    expect(page.locator("#queue-results tbody tr")).to_have_count(1)
    row.get_by_role("link", name=ticket_id).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(ticket_id)


def _screenshot(page: Page, name: str) -> None:
    if os.environ.get("SEAM_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / name)


def _overflowing_the_lists(page: Page) -> list[str]:
    """What sticks out of the four lists as laid out: a list item whose text runs past its edge
    (an unbroken receipt id) or a button wider than its column (an undo naming a long tool)."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('.lists section')].flatMap(section => {
                const edge = section.getBoundingClientRect();
                const items = [...section.querySelectorAll('li')].filter(li => li.scrollWidth > li.clientWidth + 1);
                const buttons = [...section.querySelectorAll('button')].filter(b => {
                    const box = b.getBoundingClientRect();
                    return box.left < edge.left - 0.5 || box.right > edge.right + 0.5;
                });
                return [...items, ...buttons].map(el => el.textContent.trim().slice(0, 80));
            })"""
        )
    )


def _is_compensate_post(response: Response) -> bool:
    return response.request.method == "POST" and "/act/compensate-step/" in response.url


def _open_compensate_dialog(page: Page) -> None:
    page.get_by_role("button", name="Undo “Start the return”…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Undo “Start the return”")
    expect(dialog.locator(".effects")).to_contain_text("send “Cancel the pickup”")
    expect(dialog.locator(".effects")).to_contain_text("to undo “Start the return”")


def test_staff_compensate_the_pickup_and_see_the_run_update_without_a_reload(
    t40912: Run, persona: Callable[..., Any], log_in: Callable[[Any], Page], ledger: Any, worker: Fleet
) -> None:
    support = _staff(persona, t40912, "sam")
    page = log_in(support)
    _screenshot(page, "queue.png")

    _open_run_from_queue(page, "T-40912")

    completed = page.locator("section.completed")
    pickup = completed.locator("#completed-start_return")
    expect(pickup).to_contain_text("until collection")
    expect(completed.locator("#completed-offer_replacement")).to_be_visible()
    not_done = page.locator("section.not-done")
    expect(not_done).to_contain_text("Refund the buyer")
    expect(not_done).to_contain_text("$14.95 expedited delivery fee")
    told = page.locator("section.customer-told")
    expect(told).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC via chat: Return label sent\."))
    expect(page.locator("h1 .pill.reason")).to_have_text("Run died mid-sequence")
    assert _overflowing_the_lists(page) == []
    _screenshot(page, "run.png")

    _mark_page(page)
    _open_compensate_dialog(page)
    page.get_by_role("dialog").get_by_role("button", name="Undo", exact=True).click()

    expect(page.get_by_role("status")).to_contain_text("Compensation requested")
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(page.locator("#dialog")).to_be_attached()  # emptied, not replaced: the next dialog opens there
    entry = page.locator("table.audit-entries tr.audit-compensate_step")
    expect(entry).to_contain_text("Compensated one step")
    expect(entry).to_contain_text("sam")
    try:
        expect(pickup.locator(".compensation.status-done")).to_have_text(UNDONE, timeout=WORKER_TIMEOUT_MS)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{worker.logs()}") from exc
    assert _was_not_reloaded(page), "the page was reloaded; htmx should have updated it in place"

    undo = _undos(ledger, t40912).get()
    assert (undo.provider, undo.operation) == ("returns", "cancel_pickup")
    assert Compensation.objects.filter(original=_pickup(t40912)).count() == 1
    audit = AuditEntry.objects.exclude(action=AuditAction.ASSIGN).get(run=t40912)  # and sam took the run
    assert (audit.action, audit.username) == (AuditAction.COMPENSATE_STEP, "sam")


def test_two_browsers_compensating_at_once_make_one_compensation(
    t40912: Run, persona: Callable[..., Any], log_in: Callable[[Any], Page], ledger: Any, worker: Fleet
) -> None:
    pages = {name: log_in(_staff(persona, t40912, name)) for name in ("ana", "ben")}
    for page in pages.values():
        _open_run_from_queue(page, "T-40912")
        _mark_page(page)
        _open_compensate_dialog(page)

    # Both clicks are scheduled in the pages for the same wall-clock moment (the pages share
    # the machine's clock), so the two requests reach the server together.
    at = int(time.time() * 1000) + 500
    with (
        pages["ana"].expect_response(_is_compensate_post) as ana,
        pages["ben"].expect_response(_is_compensate_post) as ben,
    ):
        for page in pages.values():
            page.evaluate(
                """(at) => setTimeout(
                    () => document.querySelector('.confirm button.primary').click(), at - Date.now())""",
                at,
            )
    statuses = {"ana": ana.value.status, "ben": ben.value.status}
    assert sorted(statuses.values()) == [200, 409], statuses
    winner_name = next(name for name, status in statuses.items() if status == 200)
    winner = pages[winner_name]
    refused = next(page for name, page in pages.items() if name != winner_name)
    expect(winner.get_by_role("status")).to_contain_text("Compensation requested")
    expect(refused.get_by_role("alert").first).to_contain_text("This run changed")
    # The refused page shows the run as it now is: the undo the other person asked for.
    expect(refused.locator("#completed-start_return .compensation")).to_be_visible()
    try:
        expect(winner.locator("#completed-start_return .compensation.status-done")).to_have_text(
            UNDONE, timeout=WORKER_TIMEOUT_MS
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{worker.logs()}") from exc
    assert all(_was_not_reloaded(page) for page in pages.values())

    assert Compensation.objects.filter(original=_pickup(t40912)).count() == 1
    assert _undos(ledger, t40912).count() == 1
    who = list(AuditEntry.objects.filter(run=t40912).order_by("seq").values_list("action", "username"))
    # The winner's undo, and the run nobody had made theirs (console.claiming); nothing of the other.
    assert who == [(AuditAction.COMPENSATE_STEP, winner_name), (AuditAction.ASSIGN, winner_name)]
