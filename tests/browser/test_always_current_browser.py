"""The run page stays true in a real browser (issue 19, item 1), on the demo's runs: after each
action the header, reason, next action and buttons are drawn from the rows as they now are; a
change made elsewhere (a dead letter resolved on its own page) reaches an open page by its poll,
without a reload; a refresh that fails says the page is out of date, with a reload link; an
action refused while a poll was on its way still says so, on the run page, the queue and the dead
letters."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, Route, expect

from audit.models import AuditAction, AuditEntry
from compensations.models import DeadLetter
from console import actions
from console.actions import StaffContext
from console.dead_letters import dead_letter_take
from handover import run_state_token
from journal.models import Run
from tests.support.stuck_runs import demo_ticket, escalated_run

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

POLL_MS = 15_000  # the panel polls every 4 s; a loaded machine answers slower
QUEUE_POLL_MS = 30_000  # the queue polls every 10 s


def _person(persona: Callable[..., Any], run: Run, role: str, username: str) -> Any:
    user = persona(role, run.tenant, username)
    user.set_password(PASSWORD)
    user.save()
    return user


def _open(page: Page, run: Run) -> None:
    page.goto(f"/runs/{run.pk}/")
    expect(page.get_by_role("heading", level=1)).to_contain_text(run.ticket_id)
    page.evaluate("window.seamNoReload = true")


def _not_reloaded(page: Page) -> bool:
    return bool(page.evaluate("window.seamNoReload === true"))


def _confirm(page: Page, button: str, note: str, submit: str) -> None:
    page.get_by_role("button", name=button).first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Note").fill(note)
    dialog.get_by_role("button", name=submit, exact=True).click()


def test_resolving_t41402_redraws_the_header_and_it_leaves_the_queue(
    sandbox_tools: str, persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    run = demo_ticket(sandbox_tools, "T-41402")
    page = log_in(_person(persona, run, "support_staff", "sam"))
    expect(page.locator('#queue-results tr[data-ticket="T-41402"]')).to_be_visible()
    _open(page, run)
    heading = page.get_by_role("heading", level=1)
    expect(heading.locator(".pill.status-escalated")).to_have_text("Escalated")

    _confirm(page, "Resolve…", "told the buyer the credit was reversed", "Resolve")

    expect(page.get_by_role("status")).to_contain_text("Resolved.")
    expect(heading.locator(".pill.status-resolved")).to_have_text("Resolved")
    expect(heading).not_to_contain_text("Escalated")
    expect(heading.locator(".pill.reason")).to_have_text("was: Policy says a person decides")
    expect(page.locator("dd.answered")).to_contain_text("Resolved by sam at")
    expect(page.locator("dd.answered")).to_contain_text("told the buyer the credit was reversed")
    expect(page.locator(".next-action")).to_contain_text("Nothing waits on a person")
    expect(page.get_by_role("button", name="Resolve…")).to_have_count(0)
    assert _not_reloaded(page)
    assert AuditEntry.objects.filter(run=run, action=AuditAction.RESOLVE, username="sam").count() == 1

    page.get_by_role("link", name="Queue", exact=True).click()
    expect(page.locator("#queue-results")).to_be_visible()
    expect(page.locator('#queue-results tr[data-ticket="T-41402"]')).to_have_count(0)


def test_marking_t41518s_refund_answers_the_unknown_outcome_in_the_header(
    sandbox_tools: str, persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    run = demo_ticket(sandbox_tools, "T-41518")
    page = log_in(_person(persona, run, "support_staff", "sam"))
    _open(page, run)
    heading = page.get_by_role("heading", level=1)
    expect(heading.locator(".pill.reason")).to_have_text("A call's outcome is unknown")

    _confirm(page, "It happened…", "the payments portal shows the refund", "Mark performed")

    expect(page.get_by_role("status")).to_contain_text("Marked performed.")
    expect(heading.locator(".pill.reason")).to_have_text("was: A call's outcome is unknown")
    expect(page.locator("dd.answered")).to_contain_text("“Refund the buyer” marked performed by sam")
    expect(page.locator(".next-action")).not_to_contain_text("find out whether")
    expect(page.locator("section.uncertain")).to_contain_text("Nothing is in doubt.")
    assert _not_reloaded(page)
    assert AuditEntry.objects.get(run=run, action=AuditAction.MARK_PERFORMED).username == "sam"


def test_t41207s_open_page_follows_its_dead_letter_resolved_elsewhere(
    sandbox_tools: str, persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    run = demo_ticket(sandbox_tools, "T-41207")
    lead = _person(persona, run, "team_lead", "lead")
    letter = DeadLetter.objects.get(compensation__original__run=run)
    watching = log_in(_person(persona, run, "support_staff", "sam"))
    _open(watching, run)
    next_action = watching.locator(".next-action")
    expect(next_action).to_contain_text("take its dead letter")

    acting = log_in(lead)
    acting.get_by_role("link", name="Dead letters").click()
    card = acting.locator(f"#dl-{letter.pk}")
    card.get_by_placeholder("how it was settled (required)").fill(
        "the accounting desk had reversed the memo by hand"
    )
    card.get_by_role("button", name="Resolve").click()
    expect(acting.locator(f"#dl-{letter.pk}")).to_have_count(0)  # gone from the open letters

    # The watching page learns it by its poll, without a reload.
    expect(next_action).not_to_contain_text("take its dead letter", timeout=POLL_MS)
    expect(next_action).to_contain_text("resolved by lead: the accounting desk had reversed the memo by hand")
    expect(watching.get_by_role("heading", level=1).locator(".pill.reason")).to_have_text(
        "was: Compensation failed"
    )
    expect(watching.locator("#completed-issue_credit .compensation")).to_contain_text("resolved by lead")
    assert _not_reloaded(watching)
    assert DeadLetter.objects.get(pk=letter.pk).resolved_by == lead


@pytest.mark.parametrize("failure", ["unreachable", "server error"])
def test_a_refresh_that_fails_says_the_page_is_out_of_date(
    failure: str, sandbox_tools: str, persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    run = demo_ticket(sandbox_tools, "T-41518")
    page = log_in(_person(persona, run, "support_staff", "sam"))
    _open(page, run)
    notice = page.get_by_role("alert").filter(has_text="out of date")
    expect(notice).to_be_hidden()

    def fail(route: Route) -> None:
        if failure == "unreachable":
            route.abort("connectionrefused")
        else:
            route.fulfill(status=500, body="Server Error (500)")

    page.route(re.compile(r".*/panel/.*"), fail)
    expect(notice).to_be_visible(timeout=POLL_MS)
    expect(notice).to_contain_text("This page is out of date")
    reload = notice.get_by_role("link", name="Reload it")
    assert _not_reloaded(page)

    page.unroute(re.compile(r".*/panel/.*"))
    reload.click()
    page.wait_for_load_state()
    assert not _not_reloaded(page)
    expect(notice).to_be_hidden()


def _hold(page: Page, url: re.Pattern[str]) -> list[Route]:
    """Every request to `url` held until the test lets it through, so the order the answers land
    in is the test's, not the machine's."""
    held: list[Route] = []
    page.route(url, lambda route: held.append(route))
    return held


def _next_held(page: Page, held: list[Route], method: str, wait_ms: int) -> Route:
    """The first held request of `method`, once the page has sent one (waiting on the browser's
    own events, which is when Playwright hands the test what it held)."""
    for _ in range(wait_ms // 50):
        for route in held:
            if route.request.method == method:
                held.remove(route)
                return route
        page.wait_for_timeout(50)
    raise AssertionError(f"the page sent no {method} to hold")


def _let_the_poll_land(page: Page, poll: Route) -> None:
    """Sends the held poll and waits until the page has handled its answer (htmx's afterRequest,
    which reaches the document even when the poll's own element has been redrawn away)."""
    page.evaluate(
        """() => { window.seamPollsLanded = 0;
        document.addEventListener("htmx:afterRequest", (event) => {
          if (event.detail.requestConfig.verb === "get") window.seamPollsLanded += 1; }); }"""
    )
    poll.continue_()
    page.wait_for_function("() => window.seamPollsLanded > 0")


def _poll_answers_first(
    page: Page, requests: re.Pattern[str], wait_ms: int, meanwhile: Callable[[], object], press: Locator
) -> None:
    """The order that lost a refusal: the region's poll is on its way (held), a colleague changes
    the record (`meanwhile`), the person presses `press`, the poll's answer lands, and only then
    the action's. `requests` matches the poll and the action."""
    held = _hold(page, requests)
    poll = _next_held(page, held, "GET", wait_ms)
    meanwhile()
    press.click()
    action = _next_held(page, held, "POST", wait_ms)
    _let_the_poll_land(page, poll)
    action.continue_()


def test_a_refused_assign_is_shown_when_the_panels_poll_answers_first(
    make_run: Callable[..., Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    """The order that lost a refusal: the panel's poll is on its way when "Assign to me" is
    pressed, a colleague has taken the run meanwhile, and the poll's answer arrives first. The
    person must still read that nothing was applied, not believe the run is theirs."""
    run = escalated_run(make_run, ticket_id="T-40912", order_id="SU-90317")
    kim = _person(persona, run, "support_staff", "kim")
    page = log_in(_person(persona, run, "support_staff", "sam"))
    _open(page, run)
    assign = page.locator("#run-panel").get_by_role("button", name="Assign to me")
    expect(assign).to_be_visible()

    _poll_answers_first(
        page,
        re.compile(rf"/runs/{run.pk}/(panel|act/assign)/"),
        POLL_MS,
        lambda: actions.run_assign(
            StaffContext(user=kim, tenant=run.tenant), run_id=run.pk, state=run_state_token(run)
        ),
        assign,
    )

    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("This run changed while this was open; nothing was applied.")
    expect(dialog.locator(".changes")).to_contain_text("kim")
    expect(page.locator("#run-panel dl.facts")).to_contain_text("kim")
    assert _not_reloaded(page)
    assert Run.objects.get(pk=run.pk).assignee == kim


def test_a_refused_row_action_is_shown_when_the_queues_poll_answers_first(
    make_run: Callable[..., Run], persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    """The same order on the queue: a row's "Assign to me" pressed while the results' poll is on
    its way, the run taken by a colleague meanwhile, the poll's answer arriving first."""
    run = escalated_run(make_run, ticket_id="T-40912", order_id="SU-90317")
    kim = _person(persona, run, "support_staff", "kim")
    page = log_in(_person(persona, run, "support_staff", "sam"))
    row = page.locator('#queue-results tr[data-ticket="T-40912"]')
    assign = row.get_by_role("button", name="Assign to me")
    expect(assign).to_be_visible()

    _poll_answers_first(
        page,
        re.compile(rf"^https?://[^/]+/(\?.*)?$|/runs/{run.pk}/act/assign/$"),
        QUEUE_POLL_MS,
        lambda: actions.run_assign(
            StaffContext(user=kim, tenant=run.tenant), run_id=run.pk, state=run_state_token(run)
        ),
        assign,
    )

    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("This run changed; nothing was applied")
    expect(dialog.locator(".changes")).to_contain_text("kim")
    assert Run.objects.get(pk=run.pk).assignee == kim


def test_a_refused_take_of_a_dead_letter_is_shown_when_the_letters_poll_answers_first(
    sandbox_tools: str, persona: Callable[..., Any], log_in: Callable[[Any], Page]
) -> None:
    """The same order on the dead letters: "Take ownership" pressed while the page's poll is on
    its way, the letter taken by a colleague meanwhile, the poll's answer arriving first."""
    run = demo_ticket(sandbox_tools, "T-41207")
    letter = DeadLetter.objects.get(compensation__original__run=run)
    kim = _person(persona, run, "support_staff", "kim")
    page = log_in(_person(persona, run, "support_staff", "sam"))
    page.get_by_role("link", name="Dead letters").click()
    take = page.locator(f"#dl-{letter.pk}").get_by_role("button", name="Take ownership")
    expect(take).to_be_visible()

    _poll_answers_first(
        page,
        re.compile(rf"/dead-letters/(\?.*)?$|/dead-letters/{letter.pk}/take/$"),
        POLL_MS,
        lambda: dead_letter_take(
            StaffContext(user=kim, tenant=run.tenant), dead_letter_id=letter.pk, state=letter.state_token
        ),
        take,
    )

    expect(page.locator("#letters .error")).to_contain_text("This dead letter changed — nothing was applied.")
    expect(page.locator(f"#dl-{letter.pk}")).to_contain_text("kim")
    assert DeadLetter.objects.get(pk=letter.pk).owner == kim
