"""The insights page's selectors (insights.selectors) on known rows: each figure is the exact number
the rows make, another tenant's rows never count, and the period's bounds and the task type
filter are applied as the page says."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from audit.chain import audit_record
from audit.models import AuditAction
from compensations.models import Compensation, CompensationStatus, DeadLetter
from insights import selectors as insights
from journal import services, transitions
from journal.models import Escalation, Intent, IntentStatus, JournalEvent, Run, Tenant
from journal.services import Actor

pytestmark = pytest.mark.django_db

RECONCILER = Actor.system("reconciliation")
PERIOD = insights.InsightsFilters(since=date(2026, 11, 2), until=date(2026, 11, 15))


def at(day: int, hour: int = 0, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


@pytest.fixture
def runs(make_run: Callable[..., Run], other_tenant: Tenant) -> dict[str, Run]:
    return {
        "r1": make_run(task_type="returns", ticket_id="T-1"),
        "r2": make_run(task_type="returns", ticket_id="T-2"),
        "r3": make_run(task_type="warranty", ticket_id="T-3"),
        "acme": make_run(tenant=other_tenant, task_type="returns", ticket_id="T-9"),
    }


def _escalation(run: Run, reason: str, opened: datetime, resolved: datetime | None = None) -> None:
    Escalation.objects.create(run=run, reason=reason, created_at=opened, resolved_at=resolved)


def _intent(run: Run, tool: str, turn: int, agent_actor: Actor, *, performed: bool = False) -> Intent:
    intent = services.intent_record(
        run=run, tool=tool, args={"order_id": run.order_id, "turn": turn}, turn=turn, actor=agent_actor
    ).intent
    if performed:
        services.outcome_record(intent=intent, ok=True, receipt={"id": f"r-{turn}"}, actor=agent_actor)
        intent.refresh_from_db()
    return intent


def _went_unknown(intent: Intent, when: datetime) -> None:
    """As reconciliation settles a call it could not find out about (reconciliation.services)."""
    moved = transitions.intent_transition(
        intent=intent,
        source=IntentStatus.INTENDED,
        target=IntentStatus.UNKNOWN,
        actor=RECONCILER,
        event=JournalEvent.Kind.INTENT_RECONCILED,
        data={"status": IntentStatus.UNKNOWN, "how": "lookup", "tool": intent.tool},
        changes={"unknown_reason": "the downstream cannot say", "settled_at": when},
        at=when,
    )
    assert moved.moved


def _settled_by_person(intent: Intent, target: str, when: datetime) -> None:
    moved = transitions.intent_transition(
        intent=intent,
        source=intent.status,
        target=target,
        actor=Actor.system("a person"),
        event=JournalEvent.Kind.OUTCOME_RECORDED,
        at=when,
    )
    assert moved.moved


# --- escalations and time to resolve ----------------------------------------------------------


@pytest.fixture
def escalations(runs: dict[str, Run]) -> None:
    r1, r2, r3 = runs["r1"], runs["r2"], runs["r3"]
    _escalation(r1, "unknown_outcome", at(3, 10), at(3, 12))  # 2 h
    _escalation(r2, "unknown_outcome", at(3, 15), at(4, 1))  # 10 h
    _escalation(r3, "policy", at(5, 9), at(5, 13))  # 4 h
    _escalation(r1, "run_died_mid_sequence", at(10, 8), at(11, 8))  # 24 h, the week of the 9th
    _escalation(r2, "policy", at(12, 8))  # still open
    # Opened the day before the period (not counted per day), resolved in its first week (counted).
    _escalation(r3, "deadline_passed", at(1, 23), at(2, 1))  # 2 h
    _escalation(r1, "policy", at(16, 0))  # the first instant after the period
    _escalation(runs["acme"], "unknown_outcome", at(3, 9), at(3, 10))  # another tenant's


def _table(breakdown: insights.Breakdown) -> list[tuple[str, tuple[Any, ...]]]:
    return [(row.label, row.values) for row in breakdown.rows]


def test_escalations_per_day_count_each_reason_on_the_day_it_was_opened(
    tenant: Tenant, escalations: None
) -> None:
    result = insights.escalations_per_day(tenant=tenant, filters=PERIOD)

    assert [c.key for c in result.columns] == ["run_died_mid_sequence", "unknown_outcome", "policy"]
    assert len(result.rows) == 14  # every day of the period, the quiet ones at 0
    nonzero = [(label, values) for label, values in _table(result) if any(values)]
    assert nonzero == [
        ("2026-11-03", (0, 2, 0)),
        ("2026-11-05", (0, 0, 1)),
        ("2026-11-10", (1, 0, 0)),
        ("2026-11-12", (0, 0, 1)),
    ]
    assert result.rows[0].label == "2026-11-02" and result.rows[-1].label == "2026-11-15"


def test_escalations_per_day_of_one_task_type(tenant: Tenant, escalations: None) -> None:
    warranty = insights.InsightsFilters(since=PERIOD.since, until=PERIOD.until, task_type="warranty")
    result = insights.escalations_per_day(tenant=tenant, filters=warranty)

    assert [c.key for c in result.columns] == ["policy"]
    assert [(label, values) for label, values in _table(result) if any(values)] == [("2026-11-05", (1,))]


def test_time_to_resolve_is_the_median_and_90th_percentile_of_each_week(
    tenant: Tenant, escalations: None
) -> None:
    result = insights.time_to_resolve_per_week(tenant=tenant, filters=PERIOD)

    # Week of 2 Nov: 2, 2, 4 and 10 hours. Median (2+4)/2 = 3; p90 at 0.9 x 3 = 2.7 of the way:
    # 4 + 0.7 x (10 - 4) = 8.2. Week of 9 Nov: one of 24 hours.
    assert [c.key for c in result.columns] == ["median", "p90", "resolved"]
    assert _table(result) == [
        ("week of 2026-11-02", (3.0, 8.2, 4)),
        ("week of 2026-11-09", (24.0, 24.0, 1)),
    ]
    warranty = insights.time_to_resolve_per_week(
        tenant=tenant,
        filters=insights.InsightsFilters(since=PERIOD.since, until=PERIOD.until, task_type="warranty"),
    )
    # 2 and 4 hours: median 3, p90 2 + 0.9 x 2 = 3.8; nothing resolved in the second week.
    assert _table(warranty) == [
        ("week of 2026-11-02", (3.0, 3.8, 2)),
        ("week of 2026-11-09", (None, None, 0)),
    ]


# --- unknown outcomes -------------------------------------------------------------------------


def test_unknown_outcomes_per_tool_count_each_call_once_and_those_still_unknown(
    tenant: Tenant, runs: dict[str, Run], agent_actor: Actor
) -> None:
    r1, r2, r3 = runs["r1"], runs["r2"], runs["r3"]
    still = _intent(r1, "issue_refund", 1, agent_actor)
    _went_unknown(still, at(4))
    # Asked again by a person, unknown again: one call, counted once.
    _settled_by_person(still, IntentStatus.INTENDED, at(5))
    still.refresh_from_db()
    _went_unknown(still, at(5, 1))
    settled = _intent(r2, "issue_refund", 1, agent_actor)
    _went_unknown(settled, at(6))
    settled.refresh_from_db()
    _settled_by_person(settled, IntentStatus.PERFORMED, at(6, 5))
    _went_unknown(_intent(r3, "create_return_label", 1, agent_actor), at(7))
    _went_unknown(_intent(r1, "issue_refund", 2, agent_actor), at(20, month=10))  # before the period
    _went_unknown(_intent(runs["acme"], "issue_refund", 1, agent_actor), at(4))  # another tenant
    _intent(r2, "issue_refund", 2, agent_actor, performed=True)  # settled, never unknown

    result = insights.unknown_outcomes_per_tool(tenant=tenant, filters=PERIOD)

    assert [c.label for c in result.columns] == ["Went unknown", "Still unknown"]
    assert _table(result) == [("issue_refund", (2, 1)), ("create_return_label", (1, 1))]
    warranty = insights.InsightsFilters(since=PERIOD.since, until=PERIOD.until, task_type="warranty")
    assert _table(insights.unknown_outcomes_per_tool(tenant=tenant, filters=warranty)) == [
        ("create_return_label", (1, 1))
    ]


# --- compensations and dead letters -----------------------------------------------------------


def _compensation(original: Intent, status: str, created: datetime) -> Compensation:
    compensation = Compensation.objects.create(original=original, status=status)
    Compensation.objects.filter(pk=compensation.pk).update(created_at=created)
    return compensation


def _dead_letter(compensation: Compensation, created: datetime, *, resolved: bool = False) -> None:
    letter = DeadLetter.objects.create(
        compensation=compensation, error_class="permanent", error="no", attempts=3
    )
    DeadLetter.objects.filter(pk=letter.pk).update(
        created_at=created, resolved_at=timezone.now() if resolved else None
    )


def test_compensations_per_tool_by_how_they_ended(
    tenant: Tenant, runs: dict[str, Run], agent_actor: Actor
) -> None:
    r1, r2, r3 = runs["r1"], runs["r2"], runs["r3"]
    _compensation(_intent(r1, "start_return", 1, agent_actor, performed=True), CompensationStatus.DONE, at(3))
    _compensation(
        _intent(r2, "issue_refund", 1, agent_actor, performed=True), CompensationStatus.DEAD_LETTERED, at(6)
    )
    _compensation(
        _intent(r3, "issue_refund", 1, agent_actor, performed=True), CompensationStatus.PARTIAL, at(8)
    )
    _compensation(
        _intent(r2, "start_return", 2, agent_actor, performed=True), CompensationStatus.DONE, at(25, month=10)
    )
    _compensation(
        _intent(runs["acme"], "start_return", 1, agent_actor, performed=True), CompensationStatus.DONE, at(3)
    )

    result = insights.compensations_by_outcome(tenant=tenant, filters=PERIOD)

    assert [c.label for c in result.columns] == ["Done", "Partial", "Failed", "Not possible", "Pending"]
    assert _table(result) == [("issue_refund", (0, 1, 1, 0, 0)), ("start_return", (1, 0, 0, 0, 0))]
    returns = insights.InsightsFilters(since=PERIOD.since, until=PERIOD.until, task_type="returns")
    assert _table(insights.compensations_by_outcome(tenant=tenant, filters=returns)) == [
        ("issue_refund", (0, 0, 1, 0, 0)),
        ("start_return", (1, 0, 0, 0, 0)),
    ]


def test_open_dead_letters_by_how_long_they_have_waited(
    tenant: Tenant, runs: dict[str, Run], agent_actor: Actor
) -> None:
    now = timezone.now()
    r1, r2, r3 = runs["r1"], runs["r2"], runs["r3"]
    failed = CompensationStatus.DEAD_LETTERED
    _dead_letter(
        _compensation(_intent(r1, "issue_refund", 1, agent_actor, performed=True), failed, now),
        now - timedelta(days=2),
    )
    _dead_letter(
        _compensation(_intent(r2, "issue_refund", 1, agent_actor, performed=True), failed, now),
        now - timedelta(days=10),
    )
    _dead_letter(
        _compensation(_intent(r3, "issue_refund", 1, agent_actor, performed=True), failed, now),
        now - timedelta(hours=1),
    )
    _dead_letter(
        _compensation(_intent(r1, "start_return", 2, agent_actor, performed=True), failed, now),
        now - timedelta(days=40),
    )
    _dead_letter(  # resolved: not open
        _compensation(_intent(r2, "start_return", 2, agent_actor, performed=True), failed, now),
        now - timedelta(days=2),
        resolved=True,
    )
    _dead_letter(  # another tenant's
        _compensation(_intent(runs["acme"], "issue_refund", 1, agent_actor, performed=True), failed, now),
        now - timedelta(days=2),
    )

    result = insights.dead_letters_open_by_age(tenant=tenant, task_type="", now=now)

    assert _table(result) == [
        ("under 1 day", (1,)),
        ("1 to 3 days", (1,)),
        ("3 to 7 days", (0,)),
        ("7 to 30 days", (1,)),
        ("30 days or more", (1,)),
    ]
    warranty = insights.dead_letters_open_by_age(tenant=tenant, task_type="warranty", now=now)
    assert [values for _, values in _table(warranty)] == [(1,), (0,), (0,), (0,), (0,)]


# --- actions per person -----------------------------------------------------------------------


def test_actions_per_person_come_from_the_audit_trail(
    tenant: Tenant, other_tenant: Tenant, runs: dict[str, Run], persona: Any
) -> None:
    support = persona("support_staff", tenant)
    lead = persona("team_lead", tenant)
    outsider = persona("support_staff", other_tenant)
    with transaction.atomic():
        audit_record(user=support, tenant=tenant, action=AuditAction.ASSIGN, run=runs["r1"])
        audit_record(user=support, tenant=tenant, action=AuditAction.RESOLVE, run=runs["r1"])
        audit_record(user=lead, tenant=tenant, action=AuditAction.RESOLVE, run=runs["r3"])
        audit_record(user=lead, tenant=tenant, action=AuditAction.DEAD_LETTER_TAKE)
        audit_record(user=outsider, tenant=other_tenant, action=AuditAction.ASSIGN, run=runs["acme"])
        # Locked out after failed logins: audited, but not something the person did.
        audit_record(user=support, tenant=tenant, action=AuditAction.LOGIN_LOCKED_OUT)
    today = timezone.localdate()
    filters = insights.InsightsFilters(since=today - timedelta(days=1), until=today)

    result = insights.actions_per_person(tenant=tenant, filters=filters)

    assert [c.key for c in result.columns] == ["assign", "resolve", "dead_letter_take", "total"]
    assert result.charted_columns == (0, 1, 2)  # the total is in the table, not drawn
    assert _table(result) == [
        ("support_staff-sundry", (1, 1, 0, 2)),
        ("team_lead-sundry", (0, 1, 1, 2)),
    ]
    warranty = insights.InsightsFilters(since=filters.since, until=filters.until, task_type="warranty")
    assert _table(insights.actions_per_person(tenant=tenant, filters=warranty)) == [
        ("team_lead-sundry", (1, 1))
    ]
    yesterday = insights.InsightsFilters(since=today - timedelta(days=3), until=today - timedelta(days=1))
    assert _table(insights.actions_per_person(tenant=tenant, filters=yesterday)) == []


def test_percentile_cont_refuses_a_fraction_outside_0_to_1() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        insights.PercentileCont("created_at", fraction=1.5)
