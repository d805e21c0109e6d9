"""The periodic sweep run the way production runs it: real `celery worker` and `celery beat`
processes (two of each, so every sweep is sent twice) on Redis, against the real sandbox. Every
stale intent is asked about once and settled once, to the truth the sandbox's ledger holds, and a
worker SIGKILLed mid-sweep loses nothing: the other settles the rest once its claims lapse.

Lookups are counted at the downstream, not with mocks in the worker processes: a persistent
sandbox fault rule `slow:<ms>` on payments/lookup is taken by every key lookup and decrements its
`remaining`, so what it used up is the number of lookups the sandbox served."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from django.conf import settings
from django.db import connection
from django.db.models import Count, Q
from django.test import override_settings
from django.utils import timezone

from devtools.processes import Fleet, database_url, emptied_redis
from journal import services as journal
from journal.models import Intent, IntentStatus, JournalEvent, Run
from journal.tool_errors import ToolError
from tools.registry import get_tool

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("SEAM_WORKERS_TEST_REDIS_URL", settings.SEAM_TEST_REDIS_URLS["workers"])
REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
COUNTER_BUDGET = 1_000_000  # the sandbox's largest `remaining`
SETTLE_TIMEOUT = 120.0


# --- the world --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StaleIntents:
    ids: list[int]
    performed_keys: frozenset[str]


def _stale_intents_half_performed(run: Run, count: int) -> StaleIntents:
    """`count` refund intents of a run that died ten minutes ago; every other one was really
    performed on the sandbox under its key (the call left, the outcome never landed), the rest
    were never sent."""
    actor = journal.Actor.agent("bot")
    intents = [
        journal.intent_record(
            run=run, tool="issue_refund", args=REFUND, turn=1, occurrence=n, actor=actor
        ).intent
        for n in range(count)
    ]
    performed = [i.idempotency_key for i in intents[::2]]
    connector = get_tool("issue_refund").get_connector()

    def perform(key: str) -> None:
        # The sandbox's listen backlog is short: a connection refused under this burst is
        # retried, which the key makes harmless (a repeat replays, it does not perform again).
        for attempt in range(5):
            try:
                connector.perform(REFUND, key)
                return
            except ToolError:
                if attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(perform, performed))
    then = timezone.now() - timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    Intent.objects.filter(run=run).update(intended_at=then)
    return StaleIntents(ids=[i.pk for i in intents], performed_keys=frozenset(performed))


def _count_lookups(sandbox: str, *, slow_ms: int = 0) -> Callable[[], int]:
    """Install the counting rule; return a function reading how many lookups took it."""
    response = requests.post(
        f"{sandbox}/sandbox/api/faults/",
        json={
            "provider": "payments",
            "operation": "lookup",
            "fault": f"slow:{slow_ms}",
            "remaining": COUNTER_BUDGET,
        },
        timeout=5,
    )
    assert response.status_code == 201, response.text
    rule_id = response.json()["id"]

    def used() -> int:
        rules = requests.get(f"{sandbox}/sandbox/api/faults/", timeout=5).json()["rules"]
        remaining = next((r["remaining"] for r in rules if r["id"] == rule_id), 0)
        return COUNTER_BUDGET - remaining

    return used


def _open_count() -> int:
    return Intent.objects.filter(status=IntentStatus.INTENDED).count()


def _wait_for(condition: Callable[[], bool], *, timeout: float, fleet: Fleet, what: str) -> float:
    return fleet.wait_for(
        condition, timeout=timeout, what=what, detail=lambda: f"{_open_count()} rows still intended"
    )


def _assert_settled_once_to_the_truth(stale: StaleIntents, ledger: Any) -> None:
    assert _open_count() == 0
    rows = Intent.objects.filter(pk__in=stale.ids).annotate(
        reconciled=Count("events", filter=Q(events__kind=JournalEvent.Kind.INTENT_RECONCILED))
    )
    assert len(rows) == len(stale.ids)
    assert sorted({r.reconciled for r in rows}) == [1], "every intent is reconciled exactly once"
    ledger_keys = set(
        ledger.filter(provider="payments", operation="refund").values_list("idempotency_key", flat=True)
    )
    assert ledger_keys == stale.performed_keys, "the sweep performed nothing itself"
    for row in rows:
        expected = (
            IntentStatus.PERFORMED if row.idempotency_key in ledger_keys else IntentStatus.NOT_PERFORMED
        )
        assert row.status == expected, (row.pk, row.status, row.unknown_reason)


# --- the processes ---------------------------------------------------------------------------


@pytest.fixture
def broker() -> Iterator[str]:
    """A Redis database of this module's own, emptied before and after. No Redis is a failure."""
    with emptied_redis(REDIS_URL):
        yield REDIS_URL


@pytest.fixture
def fleet_env(sandbox_tools: str, broker: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(connection.settings_dict),
        "DJANGO_CONN_MAX_AGE": "0",
        "CELERY_BROKER_URL": broker,
        "SEAM_SANDBOX_URL": sandbox_tools,
        "SEAM_SWEEP_INTERVAL_SECONDS": "1",
        "SEAM_STALE_AFTER_SECONDS": "0",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def fleet(fleet_env: dict[str, str], tmp_path: Path) -> Iterator[Fleet]:
    fleet = Fleet(env=fleet_env, logs_dir=tmp_path)
    try:
        yield fleet
    finally:
        fleet.stop_all()


# --- the tests --------------------------------------------------------------------------------


# 2,000 calls on one run, past the default SEAM_MAX_INTENTS_PER_RUN: a batch job's run, admitted here
# so that the sweeps have one run's worth of rows to share.
@override_settings(SEAM_MAX_INTENTS_PER_RUN=0)
@pytest.mark.chaos  # a minute of two fleets settling 2,000 rows: in `make chaos` (CI runs it)
def test_two_workers_and_two_beats_settle_each_stale_intent_once_with_one_lookup(
    sandbox_tools: str, fleet: Fleet, make_run: Callable[..., Run], ledger: Any
) -> None:
    stale = _stale_intents_half_performed(make_run(), 2000)
    lookups = _count_lookups(sandbox_tools)

    for name in ("worker-a", "worker-b"):
        fleet.worker(name)
    for name in ("beat-a", "beat-b"):
        fleet.beat(name)
    _wait_for(lambda: _open_count() == 0, timeout=SETTLE_TIMEOUT, fleet=fleet, what="settling 2,000 intents")

    _assert_settled_once_to_the_truth(stale, ledger)
    # A failed lookup names its error, so a failure here says what the downstream answered.
    failed = list(
        JournalEvent.objects.filter(
            intent_id__in=stale.ids, kind=JournalEvent.Kind.LOOKUP_FAILED
        ).values_list("data", flat=True)
    )
    reconciled = JournalEvent.objects.filter(
        intent_id__in=stale.ids, kind=JournalEvent.Kind.INTENT_RECONCILED
    ).count()
    assert (reconciled, failed) == (2000, [])
    assert lookups() == 2000, "each intent was asked about exactly once, however many sweeps ran"
    # Both workers took sweeps: the single lookup per row is the claim's doing, not a lone worker.
    for name in ("worker-a", "worker-b"):
        assert "reconciliation.sweep_stale_intents" in fleet.log(name), fleet.logs()


@pytest.mark.chaos  # a worker SIGKILLed mid-sweep: in `make chaos` (CI runs it)
def test_a_worker_killed_mid_sweep_leaves_the_rest_to_the_other_once_its_claims_lapse(
    sandbox_tools: str,
    fleet: Fleet,
    fleet_env: dict[str, str],
    make_run: Callable[..., Run],
    ledger: Any,
) -> None:
    lease = 3.0
    fleet_env["SEAM_LOOKUP_LEASE_SECONDS"] = str(lease)
    stale = _stale_intents_half_performed(make_run(), 400)
    # Slow lookups, so that the sweep is still going when the worker dies.
    lookups = _count_lookups(sandbox_tools, slow_ms=20)
    fleet.worker("worker-a")
    for name in ("beat-a", "beat-b"):
        fleet.beat(name)
    _wait_for(
        lambda: _open_count() <= len(stale.ids) - 50,
        timeout=60,
        fleet=fleet,
        what="worker-a settling its first rows",
    )

    fleet.kill("worker-a")
    killed_at = timezone.now()
    open_at_kill = _open_count()
    # The rows worker-a had claimed and was asking about when it died: open, under its lease.
    orphaned = dict(
        Intent.objects.filter(status=IntentStatus.INTENDED, next_lookup_at__gt=killed_at).values_list(
            "pk", "next_lookup_at"
        )
    )
    assert "reconciliation.sweep_stale_intents" in fleet.log("worker-a")
    assert 0 < open_at_kill < len(stale.ids), "killed mid-sweep: some rows settled, some not"
    fleet.worker("worker-b")

    _wait_for(
        lambda: _open_count() == 0, timeout=SETTLE_TIMEOUT, fleet=fleet, what="worker-b settling the rest"
    )

    _assert_settled_once_to_the_truth(stale, ledger)
    settled_after_kill = JournalEvent.objects.filter(
        intent_id__in=stale.ids, kind=JournalEvent.Kind.INTENT_RECONCILED, at__gt=killed_at
    ).count()
    assert settled_after_kill == open_at_kill
    # worker-b took over the dead worker's claimed rows only once their lease had run out.
    for pk, lease_end in orphaned.items():
        event = JournalEvent.objects.get(intent_id=pk, kind=JournalEvent.Kind.INTENT_RECONCILED)
        assert event.at >= lease_end, (pk, event.at, lease_end)
    # The dead worker's claimed batches (each settled together, at its end) are asked about
    # again by worker-b: lookups are reads, and a batch's lookups run side by side
    # (reconciliation.lookups), so at most one whole batch per pool process of the dead worker
    # (two) is read twice, beyond one read per row.
    batch = settings.SEAM_RECONCILE_BATCH_SIZE
    assert len(stale.ids) <= lookups() <= len(stale.ids) + 2 * batch


def test_when_redis_loses_its_queue_the_rows_are_found_again(
    sandbox_tools: str, fleet: Fleet, broker: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    """PostgreSQL is the source of truth: flushing the broker mid-run (queued sweeps, beat's
    messages, unacknowledged tasks all gone) loses nothing, because the next sweep re-finds the
    open rows."""
    stale = _stale_intents_half_performed(make_run(), 200)
    client = redis.Redis.from_url(broker)
    fleet.worker("worker-a")
    fleet.beat("beat-a")
    for _ in range(5):  # the broker loses everything, repeatedly, while sweeps are under way
        time.sleep(0.4)
        client.flushdb()
    client.close()

    _wait_for(
        lambda: _open_count() == 0, timeout=SETTLE_TIMEOUT, fleet=fleet, what="settling after the flushes"
    )

    _assert_settled_once_to_the_truth(stale, ledger)
