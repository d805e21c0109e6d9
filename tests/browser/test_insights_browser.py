"""The insights page as a team lead sees it in Chromium, at a desktop width (1280x800) and a phone
width (390x844): six charts, each an accessible SVG (title and description) with bars drawn, a
table of the same numbers beside it, the task type filter redrawing them in place, and no
horizontal scroll of the page (wide tables scroll in their own box).

With SEAM_SCREENSHOTS=1 it writes docs/screenshots/insights-1280.png and insights-390.png."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from playwright.sync_api import Page, expect

from audit.chain import audit_record
from audit.models import AuditAction
from compensations.models import Compensation, CompensationStatus, DeadLetter
from devtools.processes import ROOT
from insights.views import PANELS
from journal import services
from journal.models import Escalation, Tenant
from tests import factories
from tests.insights.test_selectors import _went_unknown as went_unknown

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = ROOT / "docs" / "screenshots"
AGENT = services.Actor.agent("returns-bot")
REASONS = ["unknown_outcome", "policy", "run_died_mid_sequence", "deadline_passed"]
TOOLS = ["start_return", "issue_refund", "create_return_label"]


# Retries in the seeded month come at once: no spacing between them (journal.attempts).
NO_SPACING = {"*": {**settings.SEAM_ERROR_BUDGETS["*"], "retry_spacing_seconds": 0.0}}


def _failed_then_retried(run: Any, intent: Any, n: int) -> None:
    services.outcome_record(
        intent=intent, ok=False, summary="label service busy", error_class="transient", actor=AGENT
    )
    with override_settings(SEAM_ERROR_BUDGETS=NO_SPACING):
        retry = services.intent_record(
            run=run, tool=intent.tool, args=intent.args, turn=4, occurrence=1, actor=AGENT
        ).intent
    services.outcome_record(intent=retry, ok=True, receipt={"label": f"RL-{n}-2"}, actor=AGENT)


def _month_of_work(tenant: Tenant, people: list[Any]) -> None:
    """Three weeks of escalations (most resolved), unknown outcomes, compensations of each ending,
    open dead letters of several ages, and people's actions in the audit trail."""
    now = timezone.now()
    for n in range(24):
        run = factories.run_via_service(
            tenant=tenant,
            actor=AGENT,
            task_type="returns" if n % 3 else "warranty",
            ticket_id=f"T-{60000 + n}",
        )
        opened = now - timedelta(days=n % 21, hours=n)
        Escalation.objects.create(
            run=run,
            reason=REASONS[n % len(REASONS)],
            created_at=opened,
            resolved_at=opened + timedelta(hours=1 + n * 3) if n % 4 else None,
        )
        intents = [
            services.intent_record(run=run, tool=tool, args={"n": n}, turn=turn, actor=AGENT).intent
            for turn, tool in enumerate(TOOLS, start=1)
        ]
        if n % 2 == 0:
            went_unknown(intents[1 + n // 2 % 2], opened)
        else:  # a label the downstream failed to make for now, made on the retry
            _failed_then_retried(run, intents[2], n)
        services.outcome_record(intent=intents[0], ok=True, receipt={"label": f"RL-{n}"}, actor=AGENT)
        status = [CompensationStatus.DONE, CompensationStatus.PARTIAL, CompensationStatus.DEAD_LETTERED][
            n // 3 % 3
        ]
        compensation = Compensation.objects.create(original=intents[0], status=status)
        if status == CompensationStatus.DEAD_LETTERED:
            letter = DeadLetter.objects.create(
                compensation=compensation, error_class="permanent", error="refused", attempts=5
            )
            DeadLetter.objects.filter(pk=letter.pk).update(created_at=now - timedelta(days=n * 2, hours=1))
        with transaction.atomic():
            for k, person in enumerate(people):
                for action in list(AuditAction)[: 1 + (n + k) % 4]:
                    audit_record(user=person, tenant=tenant, action=action, run=run)


@pytest.fixture
def lead(persona: Callable[..., Any], tenant: Tenant) -> Any:
    people = [persona("support_staff", tenant, name) for name in ("sam", "robin.alvarez-fitzgerald")]
    user = persona("team_lead", tenant, "lee")
    user.set_password(PASSWORD)
    user.save()
    _month_of_work(tenant, [*people, user])
    return user


def _open_insights(log_in: Callable[..., Page], user: Any, width: int, height: int) -> Page:
    page = log_in(user, viewport={"width": width, "height": height})
    page.get_by_role("link", name="Insights").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Insights")
    return page


def _page_overflow(page: Page) -> int:
    """How many pixels the page is wider than the window (0: no horizontal scroll)."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def _charts_and_tables_render(page: Page) -> None:
    for key, spec in PANELS.items():
        section = page.locator(f"#insight-{key}")
        expect(section.get_by_role("heading", level=2)).to_have_text(spec.title)
        chart = section.get_by_role("img", name=spec.title)
        expect(chart).to_be_visible()
        assert chart.locator("desc").text_content()
        assert chart.locator("rect").count() > 0, f"{key}: no bars drawn"
        box = chart.bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 80, (key, box)
        table = section.locator("table.insight-table")
        expect(table).to_be_visible()
        assert table.locator("tbody tr").count() > 0
        expect(section.get_by_role("link", name="CSV")).to_be_visible()


def _screenshot(page: Page, name: str) -> None:
    if os.environ.get("SEAM_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / name, full_page=True)


def test_a_lead_reads_the_insights_at_desktop_width(log_in: Callable[..., Page], lead: Any) -> None:
    page = _open_insights(log_in, lead, 1280, 800)

    _charts_and_tables_render(page)
    assert _page_overflow(page) <= 0
    # At this width each table sits beside its chart, not under it.
    chart = page.locator("#insight-escalations figure.chart").bounding_box()
    table = page.locator("#insight-escalations .table-box").bounding_box()
    assert (
        chart and table and table["x"] > chart["x"] + chart["width"] - 1 and abs(table["y"] - chart["y"]) < 5
    )
    _screenshot(page, "insights-1280.png")

    # The task type filter redraws the panels in place, and the address keeps it.
    page.evaluate("window.seamNoReload = true")
    before = page.locator("#insight-escalations tbody").inner_text()
    page.locator("select[name=task_type]").select_option("warranty")
    expect(page).to_have_url(re.compile(r"[?&]task_type=warranty"))
    expect(page.locator("#insight-escalations tbody")).not_to_have_text(before)
    assert page.evaluate("window.seamNoReload === true")
    _charts_and_tables_render(page)


def test_a_lead_reads_the_insights_on_a_phone(log_in: Callable[..., Page], lead: Any) -> None:
    page = _open_insights(log_in, lead, 390, 844)

    _charts_and_tables_render(page)
    assert _page_overflow(page) <= 0
    # Each table is under its chart, within the screen.
    chart = page.locator("#insight-actions figure.chart").bounding_box()
    box = page.locator("#insight-actions .table-box")
    table = box.bounding_box()
    assert chart and table and table["y"] >= chart["y"] + chart["height"] - 1
    assert table["x"] + table["width"] <= 390
    # A table wider than the phone scrolls in its own box, never the page.
    assert box.evaluate("(el) => getComputedStyle(el).overflowX") == "auto"
    _screenshot(page, "insights-390.png")


def test_support_staff_have_no_insights_link_and_are_refused(
    persona: Callable[..., Any], tenant: Tenant, log_in: Callable[..., Page]
) -> None:
    support = persona("support_staff", tenant, "sam")
    support.set_password(PASSWORD)
    support.save()
    page = log_in(support)
    expect(page.get_by_role("link", name="Insights")).to_have_count(0)
    answer = page.goto("/insights/")
    assert answer is not None and answer.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("Not allowed")
    expect(page.get_by_role("link", name="Back to the queue")).to_be_visible()
