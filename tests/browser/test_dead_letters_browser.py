"""The dead-letter page in a real browser (issue 32, item 9): Retry asks first in the page's
native <dialog> (never the browser's confirm()), every note box has its label, a retry that
failed again says so with the provider's error (never "Done."), and a change made elsewhere
reaches the open page by its poll, without a reload.

The dead letter is made as the product makes one: the courier collected the return's pickup in
the sandbox, so its compensating cancel_pickup is refused for good, and is again on retry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import requests
from django.test import Client
from django.urls import reverse
from playwright.sync_api import Dialog, Page, expect

from audit.models import AuditAction, AuditEntry
from compensations.models import CompensationStatus, DeadLetter
from compensations.services import compensation_execute, compensation_request
from journal import services as journal
from tools import services as tools

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EXECUTOR = journal.Actor.system("test-executor")
POLL_MS = 15_000  # the page polls every 4 s; a loaded machine answers slower


@pytest.fixture
def letter(sandbox_tools: str, make_run: Callable[..., Any], catalogue: None) -> DeadLetter:
    pickup = tools.tool_perform(
        run=make_run(), tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=EXECUTOR
    ).intent
    requests.post(
        f"{sandbox_tools}/sandbox/api/returns/collect", json={"label": pickup.receipt["label"]}, timeout=5
    ).raise_for_status()
    failed = compensation_execute(
        compensation=compensation_request(original=pickup, actor=EXECUTOR), actor=EXECUTOR
    )
    assert failed.status == CompensationStatus.DEAD_LETTERED
    return DeadLetter.objects.get(compensation=failed)


@pytest.fixture
def worker_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live server (a thread of this process) runs compensate_step at once, after commit, as
    an eager worker would: the retry's answer can say how it went."""
    from compensations.tasks import compensate_step

    monkeypatch.setattr(compensate_step, "delay", lambda pk: compensate_step.run(pk))


def _person(persona: Callable[..., Any], tenant: Any, role: str, username: str) -> Any:
    user = persona(role, tenant, username)
    user.set_password(PASSWORD)
    user.save()
    return user


def test_retry_asks_in_a_dialog_and_says_it_failed_again(
    letter: DeadLetter,
    persona: Callable[..., Any],
    tenant: Any,
    log_in: Callable[[Any], Page],
    worker_inline: None,
) -> None:
    lead = _person(persona, tenant, "team_lead", "lead")
    page = log_in(lead)
    browser_dialogs: list[str] = []

    def refuse(dialog: Dialog) -> None:  # a window.confirm()/alert() would land here
        browser_dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    page.get_by_role("link", name="Dead letters").click()
    card = page.locator(f"#dl-{letter.pk}")
    # The resolution's note box is labelled (its label names it to a screen reader).
    expect(card.get_by_label("Note:", exact=True)).to_be_visible()
    expect(card.get_by_label("Owner")).to_be_visible()

    card.get_by_role("button", name="Retry…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_contain_text("Send “Cancel the pickup” again?")
    note = dialog.get_by_label("Note (optional)")
    expect(note).to_be_focused()
    note.fill("the courier says it is still at the depot")
    dialog.get_by_role("button", name="Retry", exact=True).click()

    expect(page.get_by_role("dialog")).to_have_count(0)
    status = page.locator("#letters .flash")
    expect(status).to_contain_text("Retry failed again: HTTP 409: the courier collected")
    expect(page.locator("#letters")).not_to_contain_text("Done.")
    expect(card).to_contain_text("Last retry")
    assert browser_dialogs == []  # never the browser's confirm()
    entry = AuditEntry.objects.get(action=AuditAction.DEAD_LETTER_RETRY)
    assert (entry.username, entry.note) == ("lead", "the courier says it is still at the depot")
    assert DeadLetter.objects.get(pk=letter.pk).compensation.retry_round == 1


def test_cancel_closes_the_dialog_and_nothing_is_sent(
    letter: DeadLetter, persona: Callable[..., Any], tenant: Any, log_in: Callable[[Any], Page]
) -> None:
    page = log_in(_person(persona, tenant, "support_staff", "sam"))
    page.goto("/dead-letters/")
    retry = page.locator(f"#dl-{letter.pk}").get_by_role("button", name="Retry…")
    retry.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(retry).to_be_focused()  # focus back on the button that opened it
    assert DeadLetter.objects.get(pk=letter.pk).compensation.retry_round == 0
    assert not AuditEntry.objects.exists()


def test_the_open_page_follows_a_change_made_elsewhere(
    letter: DeadLetter, persona: Callable[..., Any], tenant: Any, log_in: Callable[[Any], Page]
) -> None:
    lead = _person(persona, tenant, "team_lead", "lead")
    page = log_in(lead)
    page.goto("/dead-letters/")
    page.evaluate("window.seamNoReload = true")
    owner = page.locator(f"#dl-{letter.pk}").locator("dd").nth(2)
    expect(owner).not_to_have_text("sam")

    support = _person(persona, tenant, "support_staff", "sam")
    elsewhere = Client()
    elsewhere.force_login(support)
    taken = elsewhere.post(
        reverse("handover:dead_letter_act", args=[letter.pk, "take"]),
        {"state": DeadLetter.objects.get(pk=letter.pk).state_token},
        headers={"HX-Request": "true"},
    )
    assert taken.status_code == 200

    expect(owner).to_have_text("sam", timeout=POLL_MS)
    assert page.evaluate("window.seamNoReload === true")  # redrawn in place, not reloaded
