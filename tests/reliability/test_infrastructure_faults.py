"""Infrastructure faults with real processes: workers SIGKILLed again and again, a Redis
killed and restarted, a PostgreSQL crashed and restarted, database connections terminated under
load, two beats beside a session that holds a row lock. After each, nothing is lost, nothing is
doubled, and the time to recover is measured (printed, and appended to
var/reliability-figures.jsonl).

The machine's shared PostgreSQL and Redis are never stopped: the restart tests start private
ones (tests/reliability/pg_cluster.py, a `redis-server` on a free port). Under CI a missing
binary fails the test instead of skipping it."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
import requests
from celery import Celery
from django.conf import settings
from django.db import connection
from django.db.models import Count, Q
from django.utils import timezone

from compensations.models import Compensation, CompensationStatus, DeadLetter
from compensations.services import compensation_request
from devtools.processes import ROOT, Fleet, database_url, emptied_redis, free_port, manage_py
from journal import services as journal
from journal.models import Intent, IntentStatus, JournalEvent, Run
from journal.tool_errors import ToolError
from reconciliation.services import reconcile_sweep
from sandbox.catalogue import catalogue_seed_defaults
from tests.reconciliation.test_workers import (
    _assert_settled_once_to_the_truth,
    _count_lookups,
    _open_count,
    _stale_intents_half_performed,
    _wait_for,
)
from tests.reliability.figures import record
from tests.reliability.pg_cluster import ClusterUnavailable, PrivateCluster, private_cluster
from tests.support.in_flight import open_calls_past_in_flight
from tools import services as tools

pytestmark = pytest.mark.django_db(transaction=True)

# A Redis database of this module's own on the shared server (the worker tests use 14).
SHARED_REDIS_URL = os.environ.get(
    "SEAM_RELIABILITY_TEST_REDIS_URL", settings.SEAM_TEST_REDIS_URLS["reliability"]
)
ACTOR = journal.Actor.system("chaos-test")
SETTLE_TIMEOUT = 120.0


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _missing(what: str) -> None:
    """Under CI a missing binary is a failure, as a missing service is; locally a skip."""
    if _in_ci():
        pytest.fail(what)
    pytest.skip(what)


def _refund(n: int) -> dict[str, str]:
    return {"order_id": f"SU-{90000 + n}", "amount": f"{10 + n}.95", "currency": "USD"}


# --- fixtures ---------------------------------------------------------------------------------


def _base_env(sandbox: str, broker_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(connection.settings_dict),
        "DJANGO_CONN_MAX_AGE": "0",
        "CELERY_BROKER_URL": broker_url,
        "SEAM_SANDBOX_URL": sandbox,
        "SEAM_SWEEP_INTERVAL_SECONDS": "1",
        "SEAM_STALE_AFTER_SECONDS": "0",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def shared_broker() -> Iterator[str]:
    with emptied_redis(SHARED_REDIS_URL):
        yield SHARED_REDIS_URL


@pytest.fixture
def fleet_factory(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], Fleet]]:
    fleets: list[Fleet] = []

    def make(env: dict[str, str]) -> Fleet:
        fleet = Fleet(env=env, logs_dir=tmp_path)
        fleets.append(fleet)
        return fleet

    try:
        yield make
    finally:
        for fleet in fleets:
            fleet.stop_all()


class PrivateRedis:
    """A `redis-server` of this test's own, with no persistence: killing it loses every message."""

    def __init__(self, root: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            _missing("redis-server is not installed; install it with: apt-get install -y redis-server")
        self.binary = str(binary)
        self.port = free_port()
        self.log_path = root / "private-redis.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> float:
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"private redis did not start:\n{self.log_path.read_text()}") from None
                time.sleep(0.02)
        client.close()
        return time.monotonic() - started

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


# --- 1. a worker SIGKILLed mid-task, five times in a row ---------------------------------------


@pytest.mark.chaos
def test_workers_killed_five_times_mid_compensation_undo_each_refund_exactly_once(
    sandbox_tools: str,
    shared_broker: str,
    fleet_factory: Callable[[dict[str, str]], Fleet],
    make_run: Callable[..., Run],
    ledger: Any,
) -> None:
    """A batch of compensations, and the worker running them SIGKILLed (the whole process group,
    so its unacknowledged messages are the broker's to give back) five times, a new worker each
    time. Every refund is reversed exactly once; no compensation is lost or dead-lettered."""
    catalogue_seed_defaults()
    originals = [
        tools.tool_perform(
            run=make_run(plan=[]), tool="issue_refund", args=_refund(n), turn=1, actor=ACTOR
        ).intent
        for n in range(24)
    ]
    Run.objects.update(last_heartbeat_at=timezone.now() - timedelta(minutes=10))
    # Each reversal takes effect at once and answers 0.6 s later: kills land mid-call.
    rule = {"provider": "payments", "operation": "reverse", "fault": "slow:600", "remaining": 1_000_000}
    requests.post(f"{sandbox_tools}/sandbox/api/faults/", json=rule, timeout=5).raise_for_status()
    env = {
        **_base_env(sandbox_tools, shared_broker),
        "SEAM_STALE_AFTER_SECONDS": "3",  # a reversal in flight (0.6 s) is never swept
        "SEAM_LOOKUP_LEASE_SECONDS": "3",
        "SEAM_COMPENSATION_PENDING_RETRY_SECONDS": "1",
        "SEAM_BROKER_VISIBILITY_TIMEOUT": "8",
        "SEAM_BROKER_RESTORE_INTERVAL": "1",
        "SEAM_BROKER_RESTORE_THROTTLE": "1",
    }
    fleet = fleet_factory(env)
    fleet.beat("beat")
    fleet.worker("worker-0")
    compensations = [compensation_request(original=o, actor=ACTOR) for o in originals]
    app = Celery(broker=shared_broker, set_as_current=False)
    for compensation in compensations:
        app.send_task("compensations.compensate_step", args=[compensation.pk])
    undos = ledger.filter(provider="payments", undoes__isnull=False)

    kills = 5
    for k in range(kills):
        seen = undos.count()
        _wait_for(
            lambda seen=seen: undos.count() > seen,
            timeout=60,
            fleet=fleet,
            what=f"a reversal before kill {k + 1}",
        )
        time.sleep(random.uniform(0.1, 0.5))  # mid-call, not at a fixed phase
        fleet.kill(f"worker-{k}")
        fleet.worker(f"worker-{k + 1}")
    last_kill = time.monotonic()
    done_at_last_kill = Compensation.objects.filter(status=CompensationStatus.DONE).count()
    assert done_at_last_kill < len(compensations), "the kills came before the batch was done"

    def all_done() -> bool:
        return Compensation.objects.exclude(status=CompensationStatus.DONE).count() == 0 or bool(
            DeadLetter.objects.exists()
        )

    _wait_for(all_done, timeout=SETTLE_TIMEOUT, fleet=fleet, what="every compensation done")
    recovery = time.monotonic() - last_kill

    assert not DeadLetter.objects.exists(), list(DeadLetter.objects.values("error_class", "error"))
    per_original = Counter(
        undos.filter(undoes__idempotency_key__in=[o.idempotency_key for o in originals]).values_list(
            "undoes__idempotency_key", flat=True
        )
    )
    assert per_original == {o.idempotency_key: 1 for o in originals}, "each refund reversed exactly once"
    assert undos.count() == len(originals)
    for compensation in Compensation.objects.select_related("intent"):
        assert compensation.intent is not None and compensation.intent.status == IntentStatus.PERFORMED
    open_rows = list(
        Intent.objects.filter(status=IntentStatus.INTENDED).values(
            "id", "tool", "args", "occurrence", "step_id", "idempotency_key", "intended_at"
        )
    )
    assert not open_rows, (open_rows, list(JournalEvent.objects.filter(intent__status="intended").values()))
    record(
        "worker_sigkill_x5_mid_compensation",
        compensations=len(compensations),
        kills=kills,
        done_at_last_kill=done_at_last_kill,
        recovery_seconds=round(recovery, 2),
        broker_visibility_timeout_seconds=8,
    )


# --- 2. Redis killed and restarted mid-run -----------------------------------------------------


@pytest.mark.chaos
def test_a_private_redis_killed_and_restarted_mid_run_loses_no_row(
    sandbox_tools: str,
    private_redis: PrivateRedis,
    fleet_factory: Callable[[dict[str, str]], Fleet],
    make_run: Callable[..., Run],
    ledger: Any,
) -> None:
    """Redis dies (kill -9, no persistence) with sweeps under way and compensations queued, and
    comes back empty on the same port. The worker and beat reconnect; the stale rows are found
    again from PostgreSQL and settled once; the queued compensations, whose messages died with
    Redis, are found again from their rows and done once."""
    catalogue_seed_defaults()
    stale = _stale_intents_half_performed(make_run(plan=[]), 300)
    refunds = [
        tools.tool_perform(
            run=make_run(plan=[]), tool="issue_refund", args=_refund(n), turn=1, actor=ACTOR
        ).intent
        for n in range(5)
    ]
    _count_lookups(sandbox_tools, slow_ms=10)  # slow enough that the sweep is mid-way at the kill
    env = {
        **_base_env(sandbox_tools, private_redis.url),
        "SEAM_LOOKUP_LEASE_SECONDS": "3",
        "SEAM_COMPENSATION_REQUEUE_AFTER_SECONDS": "2",
    }
    fleet = fleet_factory(env)
    fleet.worker("worker")
    fleet.beat("beat")
    _wait_for(
        lambda: _open_count() <= len(stale.ids) - 30, timeout=60, fleet=fleet, what="the sweep under way"
    )
    # The worker freezes (SIGSTOP: it takes nothing more), the compensations are queued, and
    # Redis dies with them in it.
    worker = fleet.processes["worker"]
    os.killpg(worker.pid, signal.SIGSTOP)
    compensations = [compensation_request(original=r, actor=ACTOR) for r in refunds]
    app = Celery(broker=private_redis.url, set_as_current=False)
    for compensation in compensations:
        app.send_task("compensations.compensate_step", args=[compensation.pk])
    app.close()
    open_at_kill = _open_count()
    private_redis.kill()
    killed = time.monotonic()
    time.sleep(1.0)
    private_redis.start()
    restarted = time.monotonic()
    os.killpg(worker.pid, signal.SIGCONT)

    _wait_for(lambda: _open_count() == 0, timeout=SETTLE_TIMEOUT, fleet=fleet, what="rows after the restart")
    rows_recovered = time.monotonic() - restarted
    _wait_for(
        lambda: not Compensation.objects.exclude(status=CompensationStatus.DONE).exists(),
        timeout=SETTLE_TIMEOUT,
        fleet=fleet,
        what="the compensations whose messages Redis lost",
    )
    compensations_recovered = time.monotonic() - restarted

    # The stale rows against the world, leaving aside the five refunds (and undos) made here.
    _assert_settled_once_to_the_truth(
        stale, ledger.exclude(idempotency_key__in=[r.idempotency_key for r in refunds])
    )
    undone = Counter(
        ledger.filter(undoes__idempotency_key__in=[r.idempotency_key for r in refunds]).values_list(
            "undoes__idempotency_key", flat=True
        )
    )
    assert undone == {r.idempotency_key: 1 for r in refunds}
    record(
        "redis_killed_and_restarted",
        stale_intents=len(stale.ids),
        open_at_kill=open_at_kill,
        redis_down_seconds=round(restarted - killed, 2),
        rows_recovery_seconds=round(rows_recovered, 2),
        lost_compensations=len(compensations),
        compensations_recovery_seconds=round(compensations_recovered, 2),
    )


# --- 3. PostgreSQL crashed and restarted mid-run ----------------------------------------------


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line cut by the kill
            lines.append(json.loads(line))
    return lines


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    try:
        with private_cluster() as running:
            yield running
    except ClusterUnavailable as exc:
        _missing(str(exc))


@pytest.mark.chaos
def test_postgresql_crashed_mid_run_no_call_leaves_without_its_committed_intent(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    """An agent performs journaled calls in a loop against a private PostgreSQL that is crashed
    (pg_ctl stop -m immediate) and started again. No call leaves whose intent is not committed;
    while the database is away the agent is told the intent could not be recorded and the call
    was not made; after the restart its calls go through again."""
    url = cluster.create_database("seam")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": url,
        "DJANGO_CONN_MAX_AGE": "0",
        "SEAM_SANDBOX_URL": "",  # no sandbox: the sandbox declares no tools
        "PYTHONUNBUFFERED": "1",
    }
    migrate = manage_py("migrate", "--noinput", env=env, timeout=300)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    out = tmp_path / "agent"
    out.mkdir()
    with (tmp_path / "agent.out").open("wb") as agent_out:
        agent = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.agent_loop", str(out)],
            cwd=ROOT,
            env=env,
            stdout=agent_out,
            stderr=subprocess.STDOUT,
        )
    try:

        def oks() -> int:
            return sum(1 for line in _read_jsonl(out / "agent.jsonl") if line.get("ok"))

        deadline = time.monotonic() + 60
        while oks() < 30:
            assert agent.poll() is None, (tmp_path / "agent.out").read_text()
            assert time.monotonic() < deadline, (tmp_path / "agent.out").read_text()
            time.sleep(0.05)
        down_at = time.time()
        cluster.stop("immediate")
        time.sleep(2.0)  # the agent keeps trying while the database is away
        assert agent.poll() is None, "the agent survived the outage"
        up_started = time.time()
        cluster.start()
        up_at = time.time()
        deadline = time.monotonic() + 60
        while not any(line.get("ok") and line["t"] > up_at for line in _read_jsonl(out / "agent.jsonl")):
            assert agent.poll() is None, (tmp_path / "agent.out").read_text()
            assert time.monotonic() < deadline, (
                f"no call succeeded within 60 s of the restart:\n{(out / 'agent.jsonl').read_text()[-3000:]}"
            )
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        (out / "stop").touch()
        try:
            agent.wait(timeout=15)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait(timeout=5)

    attempts = _read_jsonl(out / "agent.jsonl")
    dispatched = _read_jsonl(out / "dispatched.jsonl")
    errors = [a for a in attempts if a.get("ok") is False]
    assert errors, "the agent saw the outage"
    for error in errors:
        # Before the call: not recorded, not made. After it (the outcome's commit lost): made,
        # left open for reconciliation. Either way the words say which.
        if error["error"] == "JournalUnavailable":
            assert "could not be recorded" in error["message"], error
            assert "the call was not made" in error["message"], error
        else:
            assert error["error"] == "OutcomeNotRecorded", error
            assert "outcome could not be recorded" in error["message"], error
            assert "reconciliation will settle it" in error["message"], error
    with psycopg.connect(url) as conn:
        rows = dict(conn.execute("SELECT idempotency_key, status FROM journal_intent").fetchall())
    dispatched_keys = [d["key"] for d in dispatched]
    assert len(dispatched_keys) == len(set(dispatched_keys)), "no call was sent twice"
    missing = [key for key in dispatched_keys if key not in rows]
    assert not missing, f"{len(missing)} call(s) left without a committed intent"
    # Every performed row was dispatched; a row left `intended` is one whose outcome did not land
    # (or whose call never left): reconciliation's to settle, which it can by the key.
    assert {k for k, s in rows.items() if s == "performed"} <= set(dispatched_keys)
    failed_during = [e for e in errors if down_at <= e["t"] <= up_at + 1]
    first_ok_after = min(a["t"] for a in attempts if a.get("ok") and a["t"] > up_at)
    record(
        "postgresql_crashed_and_restarted",
        calls_dispatched=len(dispatched_keys),
        refused_while_down=len(failed_during),
        intents_left_open=sum(1 for s in rows.values() if s == "intended"),
        downtime_seconds=round(up_at - down_at, 2),
        restart_seconds=round(up_at - up_started, 2),
        restart_to_first_call_seconds=round(first_ok_after - up_at, 3),
        downtime_to_first_call_seconds=round(first_ok_after - down_at, 2),
    )


# --- 4. connections terminated under load ------------------------------------------------------


def test_backends_terminated_under_load_leave_every_call_accounted_for(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    """Agents (threads, each on its own connection) perform refunds while their database
    backends — and the sandbox's — are terminated again and again. Every call the caller was
    told failed said why in words; afterwards every intent is settled or open (and reconciliation
    settles it), every effect in the world has its intent, and no key has two effects."""
    agents, calls = 4, 25
    runs = [make_run(plan=[]) for _ in range(agents)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (main_pid,) = cursor.fetchone()
    errors: list[tuple[str, str]] = []
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def agent(index: int) -> None:
        from django.db import connection as thread_connection

        try:
            for n in range(calls):
                try:
                    tools.tool_perform(
                        run=runs[index],
                        tool="issue_refund",
                        args=_refund(index * 1000 + n),
                        turn=n + 1,
                        actor=journal.Actor.agent(f"agent-{index}"),
                    )
                    with lock:
                        outcomes["ok"] += 1
                except (journal.JournalError, ToolError) as exc:
                    with lock:
                        outcomes[type(exc).__name__] += 1
                        errors.append((type(exc).__name__, str(exc)))
                time.sleep(0.005)
        finally:
            thread_connection.close()

    terminated: list[int] = []

    def terminator() -> None:
        with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as conn:
            for _ in range(8):
                if stop.wait(0.25):
                    return
                killed = conn.execute(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %s) t",
                    [main_pid],
                ).fetchone()
                terminated.append(killed[0] if killed else 0)

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(agents)]
    killer = threading.Thread(target=terminator)
    started = time.monotonic()
    for thread in [*threads, killer]:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    stop.set()
    killer.join(timeout=10)
    elapsed = time.monotonic() - started

    assert sum(terminated) > 0, "backends were terminated"
    for kind, message in errors:
        assert kind in {"JournalUnavailable", "OutcomeNotRecorded", "ToolError"}, (kind, message)
        assert message and len(message) > 20, (kind, message)
    statuses = Counter(Intent.objects.values_list("status", flat=True))
    assert set(statuses) <= {IntentStatus.PERFORMED, IntentStatus.INTENDED, IntentStatus.FAILED}, statuses
    left_open = statuses.get(IntentStatus.INTENDED, 0)

    open_calls_past_in_flight()  # the backends' calls are over: none is still in flight
    swept = time.monotonic()
    reconcile_sweep(older_than=timedelta(0), actor=ACTOR)
    sweep_seconds = time.monotonic() - swept
    assert _open_count() == 0

    intents = {i.idempotency_key: i for i in Intent.objects.filter(run__in=runs)}
    effects = Counter(
        ledger.filter(provider="payments", operation="refund").values_list("idempotency_key", flat=True)
    )
    assert set(effects) <= set(intents), "no effect in the world without its intent"
    assert max(effects.values(), default=1) == 1, "no key has two effects"
    for key, intent in intents.items():
        expected = 1 if intent.status == IntentStatus.PERFORMED else 0
        assert effects.get(key, 0) == expected, (intent.step_id, intent.status, effects.get(key, 0))
    record(
        "backends_terminated_under_load",
        calls=agents * calls,
        terminations=sum(terminated),
        outcomes=dict(outcomes),
        left_open_then_reconciled=left_open,
        reconcile_seconds=round(sweep_seconds, 2),
        load_seconds=round(elapsed, 2),
    )


# --- 5. two beats and a session holding a lock --------------------------------------------------


def test_two_beats_beside_a_lock_holding_idle_session_settle_every_other_row_once(
    sandbox_tools: str,
    shared_broker: str,
    fleet_factory: Callable[[dict[str, str]], Fleet],
    make_run: Callable[..., Run],
    ledger: Any,
) -> None:
    """One session holds a stale intent's row lock (SELECT ... FOR UPDATE, then idle in
    transaction) and another an open read transaction. Two workers under two beats settle every
    other stale intent once without waiting on the lock; the locked one is settled, once, after
    the session ends."""
    stale = _stale_intents_half_performed(make_run(plan=[]), 60)
    locked_id = min(stale.ids)  # the oldest: the first row every sweep comes to
    url = database_url(connection.settings_dict)
    holder = psycopg.connect(url)
    reader = psycopg.connect(url)
    try:
        holder.execute("SELECT id FROM journal_intent WHERE id = %s FOR UPDATE", [locked_id])
        reader.execute("SELECT count(*) FROM journal_intent")
        fleet = fleet_factory(_base_env(sandbox_tools, shared_broker))
        for name in ("worker-a", "worker-b"):
            fleet.worker(name)
        for name in ("beat-a", "beat-b"):
            fleet.beat(name)
        others_settled = _wait_for(
            lambda: _open_count() == 1, timeout=60, fleet=fleet, what="every row but the locked one"
        )
        assert Intent.objects.get(pk=locked_id).status == IntentStatus.INTENDED
        time.sleep(2.0)  # several more sweeps come and go while the lock is held
        holder_state = reader.execute(
            "SELECT state FROM pg_stat_activity WHERE pid = %s", [holder.info.backend_pid]
        ).fetchone()
        assert holder_state == ("idle in transaction",)
    finally:
        holder.rollback()
        holder.close()
        reader.close()
    released = time.monotonic()
    _wait_for(lambda: _open_count() == 0, timeout=60, fleet=fleet, what="the locked row after release")
    locked_settled = time.monotonic() - released

    _assert_settled_once_to_the_truth(stale, ledger)
    reconciled = JournalEvent.objects.filter(
        intent_id__in=stale.ids, kind=JournalEvent.Kind.INTENT_RECONCILED
    ).aggregate(n=Count("id"), rows=Count("intent", distinct=True, filter=Q(intent__isnull=False)))
    assert reconciled == {"n": len(stale.ids), "rows": len(stale.ids)}
    record(
        "two_beats_beside_a_row_lock",
        stale_intents=len(stale.ids),
        others_settled_seconds=round(others_settled, 2),
        locked_row_settled_after_release_seconds=round(locked_settled, 2),
    )
