"""A backlog larger than one pass of the sweep (a provider outage's): the periodic sweep keeps
going for up to an interval and queues the next sweep itself (reconciliation.tasks), and a sweep
asks about its next batch while it settles the one before (reconciliation.services), each
downstream still within its declared bound."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from journal import services as journal
from journal.models import Intent, IntentStatus, JournalEvent, Run
from reconciliation import tasks
from reconciliation.services import reconcile_sweep
from tests.reconciliation.slow_downstream import CONCURRENCY, SEEN
from tests.support.plugins import declaring

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def slow_tools() -> Iterator[None]:
    SEEN.reset()
    with declaring("tests.reconciliation.slow_downstream"):
        yield


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The sweeps a sweep queued (their kwargs and options), instead of sending them to Redis."""
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(
        tasks.sweep_stale_intents,
        "apply_async",
        lambda kwargs=None, **options: sent.append({**options, **kwargs}),
    )
    return sent


def _dead_run_with_open_calls(make_run: Callable[..., Run], n: int) -> Run:
    run = make_run()
    for i in range(n):
        tool = "slow_write" if i % 2 else "slow_undo"  # two tools, one downstream
        journal.intent_record(run=run, tool=tool, args={"n": i}, turn=i + 1, actor=journal.Actor.agent("bot"))
    then = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    Intent.objects.filter(run=run).update(intended_at=then)
    return run


def _open(run: Run) -> int:
    return Intent.objects.filter(run=run, status=IntentStatus.INTENDED).count()


@override_settings(SEAM_SWEEP_INTERVAL_SECONDS=0, SEAM_RECONCILE_BATCH_SIZE=3)
def test_a_beats_sweep_that_leaves_rows_queues_a_helper_and_its_own_successor(
    slow_tools: None,
    make_run: Callable[..., Run],
    queued: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "SWEEP_PASS_ROWS", 3)
    run = _dead_run_with_open_calls(make_run, 10)

    counts = tasks.sweep_stale_intents.apply().get()

    # No time left after one pass (an interval of 0): three rows settled, seven left to the two
    # sweeps it queued, each expiring as beat's own do.
    assert counts["not_performed"] == 3 and _open(run) == 7
    assert queued == [{"follow_up": True, "expires": 0.0}] * 2


@override_settings(SEAM_SWEEP_INTERVAL_SECONDS=0, SEAM_RECONCILE_BATCH_SIZE=3)
def test_a_queued_sweep_queues_at_most_one_more(
    slow_tools: None,
    make_run: Callable[..., Run],
    queued: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "SWEEP_PASS_ROWS", 3)
    run = _dead_run_with_open_calls(make_run, 10)

    tasks.sweep_stale_intents.apply(kwargs={"follow_up": True}).get()

    assert _open(run) == 7
    assert queued == [{"follow_up": True, "expires": 0.0}]


@override_settings(SEAM_SWEEP_INTERVAL_SECONDS=60, SEAM_RECONCILE_BATCH_SIZE=3)
def test_within_its_interval_a_sweep_works_the_whole_backlog_and_queues_nothing_after(
    slow_tools: None,
    make_run: Callable[..., Run],
    queued: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "SWEEP_PASS_ROWS", 3)
    run = _dead_run_with_open_calls(make_run, 10)

    counts = tasks.sweep_stale_intents.apply(kwargs={"follow_up": True}).get()

    assert counts["not_performed"] == 10 and _open(run) == 0
    assert queued == []
    # Each row settled once, with its own event.
    reconciled = JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.INTENT_RECONCILED)
    assert reconciled.count() == 10 and reconciled.values("intent_id").distinct().count() == 10


@override_settings(SEAM_RECONCILE_BATCH_SIZE=4, SEAM_LOOKUP_THREADS=16)
def test_a_sweep_asking_about_a_batch_while_settling_the_last_stays_within_the_bound(
    slow_tools: None, make_run: Callable[..., Run]
) -> None:
    run = _dead_run_with_open_calls(make_run, 22)

    report = reconcile_sweep(run_id=run.pk, actor=journal.Actor.system("test-sweeper"))

    assert report.counts["not_performed"] == 22 and report.counts["skipped"] == 0
    assert sorted(r.intent_id for r in report.results) == sorted(
        Intent.objects.filter(run=run).values_list("pk", flat=True)
    )
    assert _open(run) == 0
    assert SEEN.most == CONCURRENCY  # reached, and never passed
    assert len(SEEN.starts) == 22, "each row asked about once"
