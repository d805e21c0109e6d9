"""Escalations and compensations carry their run's tenant and task type (and a compensation its
original's tool), copied when they are written, and the insights panels count them by those
copies: the numbers equal a full recount through the runs, on random rows across tenants, task
types, days and tools, and `manage.py insights --recount` names a row whose copy went wrong."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone

from compensations.models import Compensation, CompensationStatus, DeadLetter
from compensations.services import compensation_request
from insights import recoveries
from insights import selectors as insights
from journal import services
from journal.models import Escalation, Intent, OutcomeReason, Run, Tenant
from journal.services import Actor
from journal.why import RunWhy, why

pytestmark = pytest.mark.django_db

TASK_TYPES = ["returns", "exchanges", "refunds"]
TOOLS = ["issue_refund", "create_label", "reserve"]
REASONS = [OutcomeReason.POLICY, OutcomeReason.UNKNOWN_OUTCOME, OutcomeReason.DEADLINE_PASSED]
STATUSES = [CompensationStatus.DONE, CompensationStatus.PARTIAL, CompensationStatus.DEAD_LETTERED]
PERIOD = insights.InsightsFilters(since=date(2026, 11, 2), until=date(2026, 11, 15))
SWEEPER = Actor.system("sweep")


def _performed(run: Run, tool: str, turn: int, agent_actor: Actor) -> Intent:
    intent = services.intent_record(
        run=run, tool=tool, args={"turn": turn}, turn=turn, actor=agent_actor
    ).intent
    services.outcome_record(intent=intent, ok=True, receipt={"id": f"r-{turn}"}, actor=agent_actor)
    intent.refresh_from_db()
    return intent


def test_the_journal_and_the_compensations_copy_the_run_onto_their_rows(
    make_run: Callable[..., Run], agent_actor: Actor
) -> None:
    run = make_run(task_type="exchanges")
    original = _performed(run, "issue_refund", 1, agent_actor)
    compensation = compensation_request(original=original, actor=SWEEPER)
    with transaction.atomic():
        escalation = services.run_hand_over(
            run=run,
            reason=OutcomeReason.POLICY,
            why=why(RunWhy.NO_POLICY, task_type="exchanges"),
            actor=SWEEPER,
        )
    assert escalation is not None
    assert Escalation.objects.filter(pk=escalation.pk).values_list("tenant_id", "task_type").get() == (
        run.tenant_id,
        "exchanges",
    )
    assert Compensation.objects.filter(pk=compensation.pk).values_list(
        "tenant_id", "task_type", "tool"
    ).get() == (
        run.tenant_id,
        "exchanges",
        "issue_refund",
    )
    assert insights.copies_differing() == {"escalations": 0, "compensations": 0}


def _random_rows(
    rng: random.Random, tenants: list[Tenant], make_run: Callable[..., Run], agent_actor: Actor
) -> None:
    """Runs of both tenants and three task types, with escalations opened (and some resolved) and
    compensations requested (some dead-lettered, some of those resolved) on days in and around
    the period."""
    for n in range(24):
        run = make_run(tenant=rng.choice(tenants), task_type=rng.choice(TASK_TYPES), ticket_id=f"T-{n}")
        for _ in range(rng.randint(0, 2)):
            opened = datetime(2026, 10, 30, tzinfo=UTC) + timedelta(hours=rng.randint(0, 24 * 20))
            resolved = opened + timedelta(hours=rng.randint(1, 90)) if rng.random() < 0.6 else None
            Escalation.objects.create(
                run=run, reason=rng.choice(REASONS), created_at=opened, resolved_at=resolved
            )
        for turn in range(1, rng.randint(1, 3) + 1):
            original = _performed(run, rng.choice(TOOLS), turn, agent_actor)
            compensation = Compensation.objects.create(original=original, status=rng.choice(STATUSES))
            created = datetime(2026, 10, 30, tzinfo=UTC) + timedelta(hours=rng.randint(0, 24 * 20))
            Compensation.objects.filter(pk=compensation.pk).update(created_at=created)
            if compensation.status == CompensationStatus.DEAD_LETTERED:
                letter = DeadLetter.objects.create(
                    compensation=compensation, error_class="permanent", error="no", attempts=3
                )
                if rng.random() < 0.5:
                    DeadLetter.objects.filter(pk=letter.pk).update(resolved_at=created + timedelta(days=1))


def _in(at: datetime, filters: insights.InsightsFilters) -> bool:
    return filters.start <= at < filters.end


def _recount(tenant: Tenant, filters: insights.InsightsFilters) -> dict[str, Any]:
    """The panels' numbers counted in Python from every row, each reaching its tenant, task type
    and tool through its run and original (the reference)."""
    wanted = {"tenant": tenant.pk, "task_type": filters.task_type}

    def ours(run: Run) -> bool:
        return run.tenant_id == wanted["tenant"] and (
            not wanted["task_type"] or run.task_type == wanted["task_type"]
        )

    escalations = [e for e in Escalation.objects.select_related("run") if ours(e.run)]
    compensations = [c for c in Compensation.objects.select_related("original__run") if ours(c.original.run)]
    letters = DeadLetter.objects.filter(resolved_at__isnull=True).select_related(
        "compensation__original__run"
    )
    return {
        "per_day": Counter(
            (timezone.localtime(e.created_at).date(), e.reason)
            for e in escalations
            if _in(e.created_at, filters)
        ),
        "why": Counter(e.why.get("code", "") for e in escalations if _in(e.created_at, filters)),
        "resolved": sum(1 for e in escalations if e.resolved_at and _in(e.resolved_at, filters)),
        "compensations": Counter(
            (c.original.tool, c.status) for c in compensations if _in(c.created_at, filters)
        ),
        "open_letters": sum(1 for d in letters if ours(d.compensation.original.run)),
        "task_types": sorted({e.run.task_type for e in escalations if e.run.tenant_id == tenant.pk}),
    }


def _panels(tenant: Tenant, filters: insights.InsightsFilters) -> dict[str, Any]:
    """The same numbers read from the panels."""
    per_day = insights.escalations_per_day(tenant=tenant, filters=filters)
    by_why = recoveries.escalations_by_why(tenant=tenant, filters=filters)
    resolve = insights.time_to_resolve_per_week(tenant=tenant, filters=filters)
    undone = insights.compensations_by_outcome(tenant=tenant, filters=filters)
    letters = insights.dead_letters_open_by_age(
        tenant=tenant, task_type=filters.task_type, now=datetime.now(UTC)
    )
    return {
        "per_day": Counter(
            {
                (date.fromisoformat(row.key), column.key): n
                for row in per_day.rows
                for column, n in zip(per_day.columns, row.values, strict=True)
                if n
            }
        ),
        "why": Counter({row.key: row.values[0] for row in by_why.rows}),
        "resolved": sum(row.values[2] or 0 for row in resolve.rows),
        "compensations": Counter(
            {
                (row.key, column.key): n
                for row in undone.rows
                for column, n in zip(undone.columns, row.values, strict=True)
                if n
            }
        ),
        "open_letters": sum(row.values[0] or 0 for row in letters.rows),
        "task_types": insights.insights_task_types(tenant=tenant),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_panels_equal_a_recount_through_the_runs(
    seed: int, tenant: Tenant, other_tenant: Tenant, make_run: Callable[..., Run], agent_actor: Actor
) -> None:
    _random_rows(random.Random(seed), [tenant, other_tenant], make_run, agent_actor)
    counted = 0
    for who in (tenant, other_tenant):
        for task_type in ("", "returns"):
            filters = insights.InsightsFilters(since=PERIOD.since, until=PERIOD.until, task_type=task_type)
            expected, got = _recount(who, filters), _panels(who, filters)
            if task_type:  # the task-type list is the tenant's, whatever the filter
                expected["task_types"] = got["task_types"]
            assert got == expected, (who.slug, task_type)
            counted += got["per_day"].total() + got["compensations"].total()
    assert counted > 0  # the random rows fell in the period


def test_the_recount_check_names_a_row_whose_copy_differs_from_its_run(
    tenant: Tenant, other_tenant: Tenant, make_run: Callable[..., Run], agent_actor: Actor
) -> None:
    run = make_run(task_type="returns")
    escalation = Escalation.objects.create(run=run, reason=OutcomeReason.POLICY, created_at=datetime.now(UTC))
    Compensation.objects.create(original=_performed(run, "reserve", 1, agent_actor))
    out = StringIO()
    call_command("insights", "--tenant", tenant.slug, "--recount", stdout=out)
    assert "escalations: 0 with a tenant" in out.getvalue()
    # Written past the journal's services, with another tenant's number: the check says so.
    Escalation.objects.filter(pk=escalation.pk).update(tenant=other_tenant)
    with pytest.raises(CommandError, match="the copied columns of 1 escalations"):
        call_command("insights", "--tenant", tenant.slug, "--recount", stdout=StringIO())
    assert insights.copies_differing() == {"escalations": 1, "compensations": 0}


def test_a_row_inserted_without_the_copies_gets_them_from_the_database(
    make_run: Callable[..., Run], agent_actor: Actor
) -> None:
    """The previous release, while web nodes roll, inserts rows that name none of the copies."""
    run = make_run(task_type="refunds")
    original = _performed(run, "reserve", 1, agent_actor)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO journal_escalation (run_id, reason, detail, created_at, resolution_note, why)"
            " VALUES (%s, 'policy', '', now(), '', '{}') RETURNING tenant_id, task_type",
            [run.pk],
        )
        assert cursor.fetchone() == (run.tenant_id, "refunds")
        cursor.execute(
            "INSERT INTO compensations_compensation (original_id, status, not_undone, attempts, last_error,"
            " retry_round, created_at, updated_at) VALUES (%s, 'pending', '', 0, '', 0, now(), now())"
            " RETURNING run_id, tenant_id, task_type, tool",
            [original.pk],
        )
        assert cursor.fetchone() == (run.pk, run.tenant_id, "refunds", "reserve")
    assert insights.copies_differing() == {"escalations": 0, "compensations": 0}
