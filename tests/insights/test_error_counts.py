"""The error panels' rollup (insights.error_counts) gives the numbers a full recount of the journal's
rows gives: on random runs across days, hours, tools, task types and tenants; for rows written
after the fold (counted live until the next fold); with two folds at once (each run counted
once); and for a period whose ends fall inside a UTC hour (a server time zone half an hour off
UTC). The recount stays the reference: `manage.py insights --recount` checks the page against it."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from insights import errors
from insights.error_counts import FOLD_MARGIN, errors_fold, hour_of
from insights.models import ErrorCount, ErrorFold
from insights.selectors import Breakdown, InsightsFilters
from journal import services
from journal.models import ErrorClass, Run, Tenant
from tests import factories

PANELS: list[Callable[..., Breakdown]] = [
    errors.errors_per_task_type,
    errors.errors_per_tool,
    errors.error_classes,
]
TOOLS = ["refund", "credit", "reserve", "ship"]
TASK_TYPES = ["returns", "exchanges", "refunds"]
LOOPING_WHY = {"code": "looping", "refusals": 5, "minutes": 10, "calls": []}
AGENT = services.Actor.agent("bot")


def _fold() -> None:
    """Fold with every event written so far older than the fold's margin."""
    errors_fold(now=timezone.now() + FOLD_MARGIN + timedelta(seconds=1))


def _random_run(rng: random.Random, tenant: Tenant, started: datetime, n: int) -> Run:
    """A run started at `started` with one to six calls, some failed (a class, or none), some
    repeated with the same arguments, its counters and maybe stopped for looping."""
    run = factories.run_via_service(tenant=tenant, actor=AGENT, task_type=rng.choice(TASK_TYPES))
    for k in range(rng.randint(1, 6)):
        status = rng.choice(["performed", "performed", "failed", "failed", "intended"])
        error_class = rng.choice([*ErrorClass.values, ""]) if status == "failed" else ""
        factories.call_row(
            run,
            rng.choice(TOOLS),
            {"n": rng.randint(0, 1)},
            status,
            n=n * 10 + k,
            at=started + timedelta(seconds=k),
            error_class=error_class,
        )
    Run.objects.filter(pk=run.pk).update(
        created_at=started,
        retries=rng.randint(0, 2),
        repairs=rng.randint(0, 1),
        replans=rng.randint(0, 1),
        reflections=rng.randint(0, 3),
        escalations=rng.randint(0, 1),
        outcome_why=LOOPING_WHY if rng.random() < 0.25 else {},
    )
    return run


def _seed(rng: random.Random, tenants: list[Tenant], first_day: date, days: int, runs: int) -> None:
    for n in range(runs):
        day = first_day + timedelta(days=rng.randrange(days))
        started = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(
            minutes=rng.randrange(24 * 60)
        )
        _random_run(rng, rng.choice(tenants), started, n)


def _assert_equal_to_recount(tenant: Tenant, filters: InsightsFilters) -> None:
    for panel in PANELS:
        got = panel(tenant=tenant, filters=filters)
        assert got == panel(tenant=tenant, filters=filters, recount=True), (panel.__name__, filters)


def _periods(today: date) -> list[InsightsFilters]:
    return [
        InsightsFilters(since=today - timedelta(days=29), until=today),
        InsightsFilters(since=today - timedelta(days=12), until=today - timedelta(days=5)),
        InsightsFilters(since=today - timedelta(days=29), until=today, task_type="returns"),
        InsightsFilters(since=today - timedelta(days=3), until=today - timedelta(days=3)),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_rollup_equals_a_full_recount_of_random_runs(
    seed: int, tenant: Tenant, other_tenant: Tenant
) -> None:
    rng = random.Random(seed)
    today = timezone.localdate()
    _seed(rng, [tenant, other_tenant], today - timedelta(days=20), days=20, runs=60)

    _fold()

    assert ErrorCount.objects.filter(tenant=tenant).exists()
    for filters in _periods(today):
        _assert_equal_to_recount(tenant, filters)
        _assert_equal_to_recount(other_tenant, filters)
    # The page's numbers came from the rollup: a change the journal did not record (no event, so
    # no fold or page sees it) moves the recount and not them.
    filters = _periods(today)[0]
    before = errors.errors_per_task_type(tenant=tenant, filters=filters)
    Run.objects.filter(tenant=tenant).update(reflections=100)
    assert errors.errors_per_task_type(tenant=tenant, filters=filters) == before
    assert errors.errors_per_task_type(tenant=tenant, filters=filters, recount=True) != before


@pytest.mark.django_db
def test_rows_written_after_the_fold_are_counted_live_then_folded(tenant: Tenant) -> None:
    rng = random.Random(7)
    today = timezone.localdate()
    _seed(rng, [tenant], today - timedelta(days=10), days=10, runs=20)
    _fold()
    filters = InsightsFilters(since=today - timedelta(days=29), until=today)
    before = errors.errors_per_tool(tenant=tenant, filters=filters)

    # Through the journal's services: a new run that failed twice, and an old run's count.
    run = factories.run_via_service(tenant=tenant, actor=AGENT, task_type="returns")
    for turn in (1, 2):
        intent = services.intent_record(
            run=run, tool="parcel", args={"to": turn}, turn=turn, actor=AGENT
        ).intent
        services.outcome_record(
            intent=intent, ok=False, summary="refused", error_class="conflict", actor=AGENT
        )
    old = Run.objects.filter(tenant=tenant).order_by("created_at").first()
    assert old is not None
    services.run_count(run=old, kind="reflection", actor=AGENT)

    after = errors.errors_per_tool(tenant=tenant, filters=filters)
    assert after != before
    assert "parcel (Conflict)" in [row.label for row in after.rows]
    assert not ErrorCount.objects.filter(tool="parcel").exists()  # not folded yet: counted live
    _assert_equal_to_recount(tenant, filters)

    _fold()
    assert ErrorCount.objects.filter(tool="parcel", grain="tool").get().failed == 2
    _assert_equal_to_recount(tenant, filters)


@pytest.mark.django_db(transaction=True)
def test_two_folds_at_once_count_each_run_once(tenant: Tenant) -> None:
    rng = random.Random(11)
    today = timezone.localdate()
    _seed(rng, [tenant], today - timedelta(days=5), days=5, runs=30)
    ErrorFold.objects.create(pk=1)  # as after a migration: both folds find it
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def fold() -> None:
        try:
            start.wait(timeout=10)
            _fold()
        except BaseException as failure:  # any failure, reported by the assertion below
            failures.append(failure)
        finally:
            connection.close()

    threads = [threading.Thread(target=fold) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert failures == []
    assert ErrorFold.objects.get().counted_before is not None
    total = sum(ErrorCount.objects.filter(tenant=tenant, grain="run").values_list("runs", flat=True))
    assert total == Run.objects.filter(tenant=tenant).count() == 30
    _assert_equal_to_recount(tenant, InsightsFilters(since=today - timedelta(days=29), until=today))


@pytest.mark.django_db
@override_settings(TIME_ZONE="Asia/Kolkata")
def test_a_period_whose_ends_fall_inside_an_hour(tenant: Tenant) -> None:
    """In UTC+5:30 a day starts at half past the UTC hour: runs in the half-hours at either end
    of the period are counted by whether they fall inside it, not by their UTC hour."""
    rng = random.Random(5)
    today = timezone.localdate()
    filters = InsightsFilters(since=today - timedelta(days=6), until=today - timedelta(days=2))
    assert filters.start != hour_of(filters.start)  # the period starts inside a UTC hour
    inside = [filters.start + timedelta(minutes=5), filters.end - timedelta(minutes=5)]
    outside = [filters.start - timedelta(minutes=5), filters.end + timedelta(minutes=5)]
    for n, started in enumerate([*inside, *outside]):
        run = _random_run(rng, tenant, started, n)
        Run.objects.filter(pk=run.pk).update(task_type="edges", outcome_why={})
    _seed(rng, [tenant], today - timedelta(days=9), days=9, runs=30)

    _fold()

    _assert_equal_to_recount(tenant, filters)
    per_type = errors.errors_per_task_type(tenant=tenant, filters=filters)
    edges = next(row for row in per_type.rows if row.key == "edges")
    assert edges.values[-2] == len(inside)


@pytest.mark.django_db
def test_the_recount_check_passes_and_names_a_panel_the_rollup_got_wrong(tenant: Tenant) -> None:
    rng = random.Random(3)
    today = timezone.localdate()
    _seed(rng, [tenant], today - timedelta(days=5), days=5, runs=15)
    out: Any = __import__("io").StringIO()

    call_command("insights", "--tenant", tenant.slug, "--fold", "--recount", stdout=out)
    assert "folded" in out.getvalue()
    assert "errors: equals the recount" in out.getvalue()
    _fold()  # the runs' events now older than the margin: the rollup answers for their hours
    call_command("insights", "--tenant", tenant.slug, "--recount", stdout=out)

    ErrorCount.objects.filter(tenant=tenant, grain="class").update(calls=999)
    with pytest.raises(CommandError, match="error-classes"):
        call_command("insights", "--tenant", tenant.slug, "--recount", stdout=out)
