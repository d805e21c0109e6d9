"""What the reconciliation sweep costs per settled row, how it scales with workers, and what
finding its work costs when the journal is large.

One run measures, on databases of its own:

1. settle rate, in process, against a real sandbox subprocess: `reconcile_sweep` over N stale intents of the sandbox's `issue_refund` tool (a
   run that died: old rows, no heartbeat), half of them really performed on the sandbox under
   their keys and half never sent, as rows settled per second; against a baseline of the same
   number of lookups of the same keys made directly with the tool's connector (no claim, no
   settle, no journal event). sweep / baseline is what Seam adds per settled row. Measured at
   the sandbox's own lookup latency and with a persistent `slow:<ms>` fault on payments/lookup
   (default 50 ms), in alternating rounds (the order reversed every other round), medians;
2. rows settled per second by real `celery worker` processes (prefork, concurrency 1 each) with
   1, 2 and 4 workers, on Redis (database 12 unless SEAM_BENCH_REDIS_URL says otherwise, emptied
   before and after), against a downstream that answers at once: the `bench_refund` tool of
   bench/stub_tools, installed in the workers only (SEAM_APPS=bench.stub_tools). So what is
   measured is Seam's cost per settled row (claim, read, settle + journal event, and the Celery
   task around the sweep), not the sandbox's: a real downstream's lookup latency adds to it per
   row and per worker. Each round seeds N stale rows of a dead run (SQL), starts the workers,
   waits until each is ready, then keeps as many `reconciliation.sweep_stale_intents` tasks
   queued as there are workers (what beat does every SEAM_SWEEP_INTERVAL_SECONDS, without the
   wait) until every row is settled. The rate is N over the span from the first settle to the
   last (from settled_at); baselines: the same sweep run in this process with the same tool (no
   Celery), and 1 worker for the 2- and 4-worker figures. Rounds alternate the order (1, 2, 4
   then 4, 2, 1); medians;
3. the sweep's query at scale: 10,000,000 settled rows and 100 stale ones, in a database of its
   own (`seam_bench_sweep`, kept between runs and reused when it holds that volume; seeded with
   INSERT ... SELECT generate_series in chunks, the time printed), ANALYZEd; the time to evaluate
   `stale_intents(...)` as a list of ids, its EXPLAIN (ANALYZE, BUFFERS) plan, which must use the
   partial index intent_open_idx; against baselines measured in the same run: the same query on
   a small journal (the reconcile database: 100 stale rows among a few thousand), a primary-key
   read on the large table, and the same query with intent_open_idx dropped (inside a
   transaction that is rolled back).

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python -m bench.reconcile [--json] [--keep]

The database, `seam_bench_reconcile` unless `--database` says otherwise, on the server
DATABASE_URL names, is created and migrated by the script and dropped at the end unless `--keep`;
`--sweep-database` (default `seam_bench_sweep`) is kept, as seeding it takes minutes.
`--parts` picks what to measure (default: query,workers,settle).
`--json` prints only a JSON object of the figures on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import requests
from psycopg import sql

from bench.journal import BenchError, progress, with_database
from devtools.processes import Fleet, ProcessFailed, emptied_redis, running_sandbox

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/test"
TOOL = "issue_refund"
REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
SETTLED_ROWS = 10_000_000
STALE_ROWS = 100
SWEEP_ALIAS = "sweep"
SEED_CHUNK = 1_000_000
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/12"
SWEEP_TASK = "reconciliation.sweep_stale_intents"
# Issue 21's targets: rows per second one worker settles when every lookup is answered at once,
# and what two workers settle over what one does, on this 2-core machine.
WORKER_RATE_TARGET = 500
TWO_WORKER_SCALING_TARGET = 1.8
# Issue 34's: the same two at 50 ms a lookup, and a provider outage's 100,000 calls in doubt
# settled by two workers within five minutes.
RECOVERY_TARGET_S = 300


# --- the database -----------------------------------------------------------------------------


@contextlib.contextmanager
def maintenance(url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to the server's `postgres` database (CREATE/DROP DATABASE)."""
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        yield conn


def create_database(url: str, name: str) -> None:
    with maintenance(url) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            progress(f"creating database {name}")
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(url: str, name: str) -> None:
    with maintenance(url) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def setup_django(database: str, *, sweep_database: str | None = None, broker: str | None = None) -> str:
    """Point Django at the bench database (and, as the `sweep` alias, at the large one), start it
    and migrate both. Returns the bench database's URL."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["DJANGO_DEBUG"] = "false"
    if broker:
        os.environ["CELERY_BROKER_URL"] = broker  # read by the settings: the bench's own Redis db
    url = with_database(os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), database)
    if urlsplit(url).scheme not in ("postgres", "postgresql", "pgsql"):
        raise BenchError("the benchmark measures PostgreSQL; DATABASE_URL names another database")
    create_database(url, database)
    if sweep_database:
        create_database(url, sweep_database)
    os.environ["DATABASE_URL"] = url

    import django
    from django.conf import settings

    if sweep_database:
        settings.DATABASES[SWEEP_ALIAS] = {**settings.DATABASES["default"], "NAME": sweep_database}
    django.setup()
    if settings.DATABASES["default"]["NAME"] != database:
        raise BenchError(f"settings point at {settings.DATABASES['default']['NAME']}, not {database}")
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    if sweep_database:
        call_command("migrate", database=SWEEP_ALIAS, interactive=False, verbosity=0)
    return url


# --- the world --------------------------------------------------------------------------------


class World:
    """A tenant of the run's own; each batch is a run that died ten minutes ago with `count`
    open refund intents, every other one really performed on the sandbox under its key."""

    def __init__(self, sandbox: str) -> None:
        from journal import services
        from journal.models import Tenant

        self.services = services
        self.sandbox = sandbox
        self.tenant = Tenant.objects.create(
            slug=f"bench-reconcile-{os.getpid()}-{time.time_ns()}", name="Bench"
        )
        self.actor = services.Actor.agent("bench-reconcile")
        self.batches = 0

    def stale_batch(self, count: int) -> tuple[Any, list[Any]]:
        from django.utils import timezone

        from journal.models import Intent, Run
        from tools.registry import get_tool

        self.batches += 1
        run = self.services.run_create(
            tenant=self.tenant,
            task_type="bench",
            versions={"schema": "1", "flow": "bench-1", "policy": "bench-1", "capability": "1"},
            external_id=f"batch-{self.batches}",
            actor=self.actor,
        ).run
        intents = [
            self.services.intent_record(
                run=run, tool=TOOL, args=REFUND, turn=1, occurrence=n, actor=self.actor
            ).intent
            for n in range(count)
        ]
        connector = get_tool(TOOL).get_connector()
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(
                pool.map(
                    lambda i: _retrying(lambda: connector.perform(REFUND, i.idempotency_key)), intents[::2]
                )
            )
        then = timezone.now() - dt.timedelta(minutes=10)
        Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
        Intent.objects.filter(run=run).update(intended_at=then)
        return run, intents

    def fault(self, rule: dict[str, Any] | None) -> None:
        requests.delete(f"{self.sandbox}/sandbox/api/faults/", timeout=5).raise_for_status()
        if rule:
            response = requests.post(f"{self.sandbox}/sandbox/api/faults/", json=rule, timeout=5)
            if response.status_code != 201:
                raise BenchError(f"the sandbox refused the fault rule {rule}: {response.text}")


def _retrying(call: Callable[[], Any]) -> Any:
    """The sandbox's listen backlog is short; a refused connection is retried (the key makes a
    repeat harmless)."""
    from journal.tool_errors import ToolError

    for attempt in range(5):
        try:
            return call()
        except ToolError:
            if attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))
    return None


# --- 1. settle rate ---------------------------------------------------------------------------


def measure_settle(world: World, *, rows: int, rounds: int, slow_ms: int) -> dict[str, Any]:
    from journal.models import IntentStatus
    from journal.services import Actor
    from reconciliation.services import reconcile_sweep
    from tools.registry import get_tool
    from tools.services import lookup_query

    connector = get_tool(TOOL).get_connector()
    actor = Actor.system("bench-reconcile-sweep")
    world.fault(
        {"provider": "payments", "operation": "lookup", "fault": f"slow:{slow_ms}", "remaining": 1_000_000}
        if slow_ms
        else None
    )
    sweep_s: list[float] = []
    lookup_s: list[float] = []
    for n in range(rounds):
        run, intents = world.stale_batch(rows)

        def baseline(intents: list[Any] = intents) -> None:
            t0 = time.perf_counter()
            for intent in intents:
                connector.lookup(lookup_query(intent))
            lookup_s.append(time.perf_counter() - t0)

        def sweep(run: Any = run) -> None:
            t0 = time.perf_counter()
            report = reconcile_sweep(older_than=dt.timedelta(0), run_id=run.pk, limit=rows, actor=actor)
            sweep_s.append(time.perf_counter() - t0)
            settled = report.counts["performed"] + report.counts["not_performed"]
            if settled != rows:
                raise BenchError(f"the sweep settled {settled} of {rows} rows: {report.counts}")

        for step in (baseline, sweep) if n % 2 == 0 else (sweep, baseline):
            step()
        performed = run.intents.filter(status=IntentStatus.PERFORMED).count()
        if performed != (rows + 1) // 2:
            raise BenchError(f"{performed} rows settled performed; {(rows + 1) // 2} were performed")
    world.fault(None)
    ratios = [s / b for s, b in zip(sweep_s, lookup_s, strict=True)]
    sweep_med, lookup_med = statistics.median(sweep_s), statistics.median(lookup_s)
    return {
        "lookup_latency_ms": slow_ms,
        "rows": rows,
        "rounds": rounds,
        "sweep_rows_per_s": rows / sweep_med,
        "baseline_lookups_per_s": rows / lookup_med,
        "sweep_ms_per_row": sweep_med / rows * 1e3,
        "baseline_ms_per_lookup": lookup_med / rows * 1e3,
        "seam_overhead_ms_per_row": (sweep_med - lookup_med) / rows * 1e3,
        "sweep_over_baseline": statistics.median(ratios),
    }


# --- 2. workers -------------------------------------------------------------------------------

# N open intents of a stub tool on one run, recorded a millisecond apart, the last ten minutes ago:
# a run that died. Each its own time, as calls recorded one by one have: rows sharing one
# intended_at would make every claim sort all of them by id (intent_open_idx orders by
# intended_at alone), a cost of the seed, not of a real backlog. The keys are 64 hex characters
# like the journal's; bench/stub_tools's lookups answer from the key.
STUB_INSERT = """
INSERT INTO journal_intent (run_id, run_created_at, step_id, turn, tool, args, occurrence, idempotency_key, status,
    error_class, outcome_summary, receipt, request_id, intended_at, settled_at, lookup_attempts,
    last_lookup_error, next_lookup_at, unknown_reason)
SELECT %(run)s, (SELECT created_at FROM journal_run WHERE id = %(run)s), %(run)s || ':1:' || %(tool)s || ':' || g, 1, %(tool)s, %(args)s::jsonb, g,
    md5(%(run)s || ':a:' || g) || md5(%(run)s || ':b:' || g), 'intended', '', '', '{}'::jsonb, '',
    now() - interval '10 minutes' - (%(n)s - g) * interval '1 millisecond', NULL, 0, '', NULL, ''
FROM generate_series(1, %(n)s) AS g
"""


def stub_runs(world: World, *, runs: int, rows: int, tool: str) -> list[Any]:
    """`runs` dead runs with `rows` open intents of the stub `tool` each, inserted with SQL."""
    from django.db import connection
    from django.utils import timezone

    from bench.stub_tools import ARGS
    from journal.models import Run
    from reconciliation.decisions import decide_dead_runs

    # The runs of earlier rounds, their rows all settled, are dead runs that the next sweep
    # decides (the bench's task type has no recovery policy: each is escalated), reading the
    # run's 20,000 intents first: a second of a worker's CPU inside whichever round came next.
    # Decided here, outside every measurement.
    while decide_dead_runs(actor=world.actor):
        pass
    made = [world.stale_batch(0)[0] for _ in range(runs)]
    with connection.cursor() as cursor:
        # The rows earlier rounds settled leave dead entries in intent_open_idx, older than this
        # round's rows, so every claim would walk them first; between sweeps of a real backlog
        # autovacuum removes them. Each round starts from a vacuumed table, so rounds compare.
        cursor.execute("VACUUM (ANALYZE) journal_intent")
        for run in made:
            cursor.execute(
                STUB_INSERT, {"run": str(run.pk), "n": rows, "args": json.dumps(ARGS), "tool": tool}
            )
        cursor.execute("ANALYZE journal_intent")
    Run.objects.filter(pk__in=[run.pk for run in made]).update(
        last_heartbeat_at=timezone.now() - dt.timedelta(minutes=10)
    )
    return made


def settle_span(runs: list[Any]) -> tuple[int, float, dt.datetime | None]:
    """How many of the runs' rows are settled, the seconds from the first settle to the last, and
    when the last was."""
    from django.db.models import Count, Max, Min

    from journal.models import Intent, IntentStatus

    agg = (
        Intent.objects.filter(run__in=[run.pk for run in runs])
        .exclude(status=IntentStatus.INTENDED)
        .aggregate(n=Count("id"), first=Min("settled_at"), last=Max("settled_at"))
    )
    span = (agg["last"] - agg["first"]).total_seconds() if agg["n"] else 0.0
    return agg["n"], span, agg["last"]


def worker_env(url: str, broker: str) -> dict[str, str]:
    """The workers' environment: the bench's database and Redis, the stub tools installed."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": broker,
        "SEAM_APPS": "bench.stub_tools",
        "DJANGO_CONN_MAX_AGE": "60",  # persistent connections, as production
        "DJANGO_DEBUG": "false",
        "PYTHONUNBUFFERED": "1",
        # The slow stub's downstream publishes the most lookups it had in flight at once.
        "SEAM_BENCH_PEAK_REDIS_URL": broker,
    }


def any_open_row() -> bool:
    """Whether any row is still open: the first entry of the partial index of open rows. A count
    would visit every open row's heap tuple (a round's rows are fresh, not yet all-visible),
    about 5 ms a poll at 20,000 rows: CPU taken from the workers measured when two of them fill
    both cores, and none when one worker leaves a core idle."""
    from journal.models import Intent, IntentStatus

    return Intent.objects.filter(status=IntentStatus.INTENDED).exists()


def open_rows() -> int:
    from journal.models import Intent, IntentStatus

    return Intent.objects.filter(status=IntentStatus.INTENDED).count()


def workers_round(
    *, env: dict[str, str], logs: Path, client: Any, label: str, count: int, beat: bool, timeout: float
) -> dict[str, Any]:
    """Start `count` `celery worker` processes (concurrency 1 each, each the leader of its own
    process group), wait until each is ready, then feed them sweeps until no row is open: with
    `beat`, a real `celery beat` at the settings' interval, else the bench keeps one
    `reconciliation.sweep_stale_intents` queued per worker (what beat does every
    SEAM_SWEEP_INTERVAL_SECONDS, without the wait). Returns the seconds from the first task (or
    beat's start) until no row was open, when that was, and the stub downstream's peak lookups in
    flight in any one process."""
    from bench.stub_tools import PEAK_KEY
    from config.celery import app

    workers = Fleet(env=env, logs_dir=logs)
    names = [f"bench-{label}-{count}-{i}" for i in range(count)]
    try:
        for name in names:
            workers.worker(name, concurrency=1)
        workers.wait_ready(*names)
        started_at = dt.datetime.now(dt.UTC)
        started = time.perf_counter()
        if beat:
            workers.beat(f"bench-{label}-beat-{time.time_ns()}")
        deadline = time.monotonic() + timeout
        while any_open_row():
            workers.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(f"{count} workers left {open_rows()} rows open after {timeout:.0f} s")
            if not beat:
                # Keep one sweep waiting per worker: each takes the next one as it finishes.
                for _ in range(max(count - int(client.llen("celery")), 0)):
                    app.send_task(SWEEP_TASK)
            time.sleep(0.05)
        wall = time.perf_counter() - started
        peaks = [int(v) for v in client.mget(keys)] if (keys := client.keys(f"{PEAK_KEY}*")) else []
    finally:
        workers.stop_all(grace=10.0)
        client.flushdb()
    return {"wall_s": wall, "started_at": started_at, "peak_in_flight": max(peaks, default=0)}


def measure_workers(
    world: World, *, url: str, broker: str, counts: list[int], rows: int, slow_rows: int, rounds: int
) -> dict[str, Any]:
    from django.test import modify_settings

    from bench.stub_tools import LOOKUP_LATENCY, SLOW_CONCURRENCY, SLOW_TOOL, TOOL
    from journal.services import Actor
    from reconciliation.services import reconcile_sweep

    env = worker_env(url, broker)
    slow_counts = [1, 2]
    rates: dict[str, list[float]] = {
        "in_process": [],
        **{str(k): [] for k in counts},
        **{f"slow{k}": [] for k in slow_counts},
    }
    wall_rates: dict[str, list[float]] = {k: [] for k in rates if k != "in_process"}
    peaks: list[int] = []
    actor = Actor.system("bench-reconcile-sweep")

    def in_process() -> None:
        runs = stub_runs(world, runs=1, rows=rows, tool=TOOL)
        with modify_settings(INSTALLED_APPS={"append": "bench.stub_tools"}):
            while True:
                report = reconcile_sweep(run_id=runs[0].pk, limit=500, actor=actor)
                if not any(report.counts.values()):
                    break
        settled, span, _ = settle_span(runs)
        if settled != rows:
            raise BenchError(f"in process: {settled} of {rows} rows settled")
        rates["in_process"].append(rows / span)

    def with_workers(key: str, logs: Path, client: Any) -> None:
        slow = key.startswith("slow")
        count = int(key.removeprefix("slow"))
        n = slow_rows if slow else rows
        runs = stub_runs(world, runs=1, rows=n, tool=SLOW_TOOL if slow else TOOL)
        done = workers_round(
            env=env, logs=logs, client=client, label=key, count=count, beat=False, timeout=300
        )
        settled, span, _ = settle_span(runs)
        if settled != n:
            raise BenchError(f"{key} workers: {settled} of {n} rows settled")
        rates[key].append(n / span)
        wall_rates[key].append(n / done["wall_s"])
        if slow:
            peaks.append(done["peak_in_flight"])
        latency = f" at +{LOOKUP_LATENCY * 1e3:.0f} ms" if slow else ""
        progress(f"  {count} worker(s){latency}: {n / span:.0f} rows/s ({n} rows in {span:.2f} s)")

    keys = [str(k) for k in counts] + [f"slow{k}" for k in slow_counts]
    with emptied_redis(broker) as client, tempfile.TemporaryDirectory(prefix="bench-workers-") as logs:
        for n in range(rounds):
            order = keys if n % 2 == 0 else keys[::-1]
            progress(f"round {n + 1}/{rounds}: in process, then {', '.join(order)} worker(s)")
            in_process()
            progress(f"  in process: {rates['in_process'][-1]:.0f} rows/s")
            for key in order:
                with_workers(key, Path(logs), client)
    medians = {k: statistics.median(v) for k, v in rates.items()}
    one = str(counts[0])

    def paired(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(rates[a], rates[b], strict=True))

    per_worker = medians[one]
    two_over_one = paired("2", one)
    slow_per_worker = medians["slow1"]
    slow_two_over_one = paired("slow2", "slow1")
    peak = max(peaks, default=0)
    if peak > SLOW_CONCURRENCY:
        raise BenchError(f"the slow downstream had {peak} lookups in flight; it declared {SLOW_CONCURRENCY}")
    ms = f"{LOOKUP_LATENCY * 1e3:.0f} ms"
    return {
        "targets": [
            {
                "name": "reconciliation: rows settled per second by 1 worker, lookups answered at once",
                "value": per_worker,
                "bound": f">= {WORKER_RATE_TARGET}",
                "met": per_worker >= WORKER_RATE_TARGET,
            },
            {
                "name": "reconciliation: 2 workers / 1 worker, rows per second (paired by round)",
                "value": two_over_one,
                "bound": f">= {TWO_WORKER_SCALING_TARGET}",
                "met": two_over_one >= TWO_WORKER_SCALING_TARGET,
            },
            {
                "name": f"reconciliation: rows settled per second by 1 worker, lookups answered after {ms}",
                "value": slow_per_worker,
                "bound": f">= {WORKER_RATE_TARGET}",
                "met": slow_per_worker >= WORKER_RATE_TARGET,
            },
            {
                "name": f"reconciliation: 2 workers / 1 worker at {ms} a lookup (paired by round)",
                "value": slow_two_over_one,
                "bound": f">= {TWO_WORKER_SCALING_TARGET}",
                "met": slow_two_over_one >= TWO_WORKER_SCALING_TARGET,
            },
        ],
        "connector": "bench/stub_tools bench_refund: every lookup answered at once, no I/O",
        "rows_per_round": rows,
        "rounds": rounds,
        "in_process_rows_per_s": medians["in_process"],
        "workers": {
            k: {
                "workers": int(k),
                "rows_per_s": medians[k],
                "rows_per_s_per_worker": medians[k] / int(k),
                "rows_per_s_wall": statistics.median(wall_rates[k]),
                "over_1_worker": paired(k, one),
                "over_in_process": paired(k, "in_process"),
            }
            for k in map(str, counts)
        },
        "latency": {
            "connector": f"bench/stub_tools {SLOW_TOOL}: every lookup answered after {ms}",
            "lookup_latency_ms": LOOKUP_LATENCY * 1e3,
            "declared_concurrency": SLOW_CONCURRENCY,
            "peak_in_flight_per_process": peak,
            "rows_per_round": slow_rows,
            "workers": {
                str(k): {
                    "workers": k,
                    "rows_per_s": medians[f"slow{k}"],
                    "rows_per_s_per_worker": medians[f"slow{k}"] / k,
                    "rows_per_s_wall": statistics.median(wall_rates[f"slow{k}"]),
                    "over_1_worker": paired(f"slow{k}", "slow1"),
                    # What the latency costs: the same workers with every lookup answered at once.
                    "over_zero_latency": paired(f"slow{k}", str(k)),
                }
                for k in slow_counts
            },
        },
    }


def measure_recovery(
    world: World, *, url: str, broker: str, rows: int, runs: int, workers: int, zero_latency: float | None
) -> dict[str, Any]:
    """A provider outage's backlog: `rows` calls in doubt across `runs` dead runs, all of the slow
    stub tool, recovered by `workers` real workers fed by a real `celery beat` at the settings'
    interval (nothing else queues sweeps). The time is from beat's start (the workers already
    up) until no row is open."""
    from django.conf import settings

    from bench.stub_tools import LOOKUP_LATENCY, SLOW_CONCURRENCY, SLOW_TOOL

    made = stub_runs(world, runs=runs, rows=rows // runs, tool=SLOW_TOOL)
    total = rows // runs * runs
    progress(f"  {total:,} open rows over {runs} dead runs; {workers} workers and beat")
    with emptied_redis(broker) as client, tempfile.TemporaryDirectory(prefix="bench-recovery-") as logs:
        done = workers_round(
            env=worker_env(url, broker),
            logs=Path(logs),
            client=client,
            label="recovery",
            count=workers,
            beat=True,
            timeout=RECOVERY_TARGET_S * 2,
        )
    settled, span, last = settle_span(made)
    if settled != total:
        raise BenchError(f"recovery: {settled} of {total} rows settled")
    if done["peak_in_flight"] > SLOW_CONCURRENCY:
        raise BenchError(f"the slow downstream had {done['peak_in_flight']} lookups in flight")
    assert last is not None
    seconds = (last - done["started_at"]).total_seconds()
    rate = total / seconds
    progress(f"  recovered {total:,} rows in {seconds:.1f} s ({rate:.0f} rows/s)")
    return {
        "targets": [
            {
                "name": (
                    f"reconciliation: seconds to settle {total:,} calls in doubt, {workers} workers and "
                    f"beat, lookups answered after {LOOKUP_LATENCY * 1e3:.0f} ms"
                ),
                "value": seconds,
                "bound": f"<= {RECOVERY_TARGET_S}",
                "met": seconds <= RECOVERY_TARGET_S,
            }
        ],
        "rows": total,
        "runs": runs,
        "workers": workers,
        "sweep_interval_s": float(settings.SEAM_SWEEP_INTERVAL_SECONDS),
        "lookup_latency_ms": LOOKUP_LATENCY * 1e3,
        "seconds": seconds,
        "settle_span_s": span,
        "rows_per_s": rate,
        "peak_in_flight_per_process": done["peak_in_flight"],
        # Against the rate the same number of workers reach with lookups answered at once.
        "zero_latency_rows_per_s": zero_latency,
        "over_zero_latency": rate / zero_latency if zero_latency else None,
    }


# --- 3. the sweep's query at scale ------------------------------------------------------------

BULK_INSERT = """
INSERT INTO journal_intent (run_id, run_created_at, step_id, turn, tool, args, occurrence, idempotency_key,
    status, error_class, outcome_summary, receipt, request_id, intended_at, settled_at, lookup_attempts,
    last_lookup_error, next_lookup_at, unknown_reason)
SELECT %(run)s, (SELECT created_at FROM journal_run WHERE id = %(run)s), 'bulk:' || g, 1, 'issue_refund', '{}'::jsonb, g,
    md5('bulk-a:' || g) || md5('bulk-b:' || g), 'performed', '', 'bench', '{}'::jsonb, '',
    now() - interval '30 days' + g * interval '200 milliseconds',
    now() - interval '30 days' + g * interval '200 milliseconds' + interval '1 second',
    0, '', NULL, ''
FROM generate_series(%(first)s, %(last)s) AS g
"""
STALE_INSERT = """
INSERT INTO journal_intent (run_id, run_created_at, step_id, turn, tool, args, occurrence, idempotency_key,
    status, error_class, outcome_summary, receipt, request_id, intended_at, settled_at, lookup_attempts,
    last_lookup_error, next_lookup_at, unknown_reason)
SELECT %(run)s, (SELECT created_at FROM journal_run WHERE id = %(run)s), 'stale:' || g, 2, 'issue_refund', '{}'::jsonb, g,
    md5('stale-a:' || g) || md5('stale-b:' || g), 'intended', '', '', '{}'::jsonb, '',
    now() - interval '10 minutes', NULL, 0, '', NULL, ''
FROM generate_series(1, %(n)s) AS g
"""
SWEEP_TENANT = "bench-sweep"


def seed_sweep_database(settled_rows: int) -> dict[str, Any]:
    """The large journal: one dead run with `settled_rows` settled intents, one with STALE_ROWS
    open ones. Reused when it is already there at that volume."""
    from django.db import connections
    from django.utils import timezone

    from journal.models import Intent, IntentStatus, Run, Tenant

    intents = Intent.objects.using(SWEEP_ALIAS)
    tenant = Tenant.objects.using(SWEEP_ALIAS).filter(slug=SWEEP_TENANT).first()
    if tenant is not None:
        settled = intents.filter(run__external_id="sweep-settled").count()
        stale = intents.filter(run__external_id="sweep-stale", status=IntentStatus.INTENDED).count()
        if (settled, stale) == (settled_rows, STALE_ROWS):
            progress(f"reusing {settled:,} settled + {stale} stale rows in the sweep database")
            return {"reused": True, "seed_s": None}
        progress(f"the sweep database holds {settled:,} + {stale}: seeding again")
        with connections[SWEEP_ALIAS].cursor() as cursor:
            cursor.execute(
                "TRUNCATE journal_journalevent, journal_intent, journal_run, journal_tenant CASCADE"
            )
    started = time.perf_counter()
    tenant = Tenant.objects.using(SWEEP_ALIAS).create(slug=SWEEP_TENANT, name="Bench sweep")
    then = timezone.now() - dt.timedelta(minutes=10)
    runs = {}
    for name in ("sweep-settled", "sweep-stale"):
        runs[name] = Run.objects.using(SWEEP_ALIAS).create(
            tenant=tenant,
            external_id=name,
            task_type="bench",
            schema_version="1",
            flow_version="bench-1",
            policy_version="bench-1",
            capability_version="1",
            last_heartbeat_at=then,
        )
    with connections[SWEEP_ALIAS].cursor() as cursor:
        for first in range(1, settled_rows + 1, SEED_CHUNK):
            last = min(first + SEED_CHUNK - 1, settled_rows)
            t0 = time.perf_counter()
            cursor.execute(BULK_INSERT, {"run": runs["sweep-settled"].pk, "first": first, "last": last})
            progress(f"  seeded settled rows {first:,}..{last:,} in {time.perf_counter() - t0:.1f} s")
        cursor.execute(STALE_INSERT, {"run": runs["sweep-stale"].pk, "n": STALE_ROWS})
        cursor.execute("VACUUM ANALYZE journal_intent")
        cursor.execute("ANALYZE journal_run")
        # Write out the seeding's dirty pages now: a checkpoint due later would take the disk and
        # a core from the measurements that follow (the workers' scaling most of all).
        cursor.execute("CHECKPOINT")
    seed_s = time.perf_counter() - started
    progress(f"seeded the sweep database in {seed_s:.0f} s")
    return {"reused": False, "seed_s": seed_s}


def measure_query(world: World, *, repetitions: int, settled_rows: int) -> dict[str, Any]:
    from django.db import connection, connections, transaction

    from journal.models import Intent, IntentStatus, Run
    from journal.selectors import stale_intents

    seeding = seed_sweep_database(settled_rows)
    # The small journal: 100 stale rows in the reconcile database (the baseline).
    small_run, _ = stale_batch_unsent(world, STALE_ROWS)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE journal_intent")
        cursor.execute("ANALYZE journal_run")

    def query(alias: str) -> list[int]:
        return list(
            stale_intents(older_than=dt.timedelta(seconds=60)).using(alias).values_list("pk", flat=True)
        )

    large_pk = Intent.objects.using(SWEEP_ALIAS).order_by("-pk").values_list("pk", flat=True).first()

    def pk_read() -> list[int]:
        return list(Intent.objects.using(SWEEP_ALIAS).filter(pk=large_pk).values_list("pk", flat=True))

    def timed(label: str, call: Callable[[], list[int]], reps: int) -> tuple[list[float], list[int]]:
        call()  # warm
        times, ids = [], []
        for _ in range(reps):
            t = time.perf_counter()
            ids = call()
            times.append(time.perf_counter() - t)
        progress(f"  {label}: median {statistics.median(times) * 1e3:.3f} ms over {reps}")
        return times, ids

    def explain(alias: str) -> str:
        sql_text, params = (
            stale_intents(older_than=dt.timedelta(seconds=60))
            .using(alias)
            .values_list("pk", flat=True)
            .query.sql_with_params()
        )
        with connections[alias].cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql_text, params)
            return "\n".join(row[0] for row in cursor.fetchall())

    # Alternating: large, small, primary key; then reversed; the medians over all repetitions.
    large_t: list[float] = []
    small_t: list[float] = []
    pk_t: list[float] = []
    ids: list[int] = []
    small_ids: list[int] = []
    half = max(repetitions // 2, 1)
    for n in range(2):
        steps = ["large", "small", "pk"]
        for name in steps if n == 0 else steps[::-1]:
            if name == "pk":
                pk_t += timed("primary-key read, 10M table (baseline)", pk_read, half)[0]
            elif name == "large":
                t, ids = timed(
                    f"stale_intents, {settled_rows:,} settled rows", lambda: query(SWEEP_ALIAS), half
                )
                large_t += t
            else:
                t, small_ids = timed(
                    "stale_intents, small journal (baseline)", lambda: query("default"), half
                )
                small_t += t
    plan = explain(SWEEP_ALIAS)
    plan_small = explain("default")
    if len(ids) != STALE_ROWS or len(small_ids) != STALE_ROWS:
        raise BenchError(f"stale_intents found {len(ids)} and {len(small_ids)} rows; {STALE_ROWS} are stale")
    if "intent_open_idx" not in plan:
        raise BenchError(f"the sweep's query does not use intent_open_idx:\n{plan}")

    class Rollback(Exception):
        pass

    # The same query without the partial index: DROP INDEX is transactional, so the index is back
    # when the block rolls back. A scan of the whole table, so fewer repetitions.
    with contextlib.suppress(Rollback), transaction.atomic(using=SWEEP_ALIAS):
        with connections[SWEEP_ALIAS].cursor() as cursor:
            cursor.execute("DROP INDEX intent_open_idx")
        unindexed, unindexed_ids = timed("without intent_open_idx", lambda: query(SWEEP_ALIAS), 3)
        plan_without = explain(SWEEP_ALIAS)
        raise Rollback
    if sorted(unindexed_ids) != sorted(ids):
        raise BenchError("the query without the index found different rows")
    total = Intent.objects.using(SWEEP_ALIAS).count()
    small_total = Intent.objects.count()
    # The small journal's stale rows are settled by hand, so the workers' sweeps do not see them.
    Intent.objects.filter(run=small_run, status=IntentStatus.INTENDED).update(
        status=IntentStatus.NOT_PERFORMED
    )
    Run.objects.filter(pk=small_run.pk).update(status="cancelled")
    large, small, pk = statistics.median(large_t), statistics.median(small_t), statistics.median(pk_t)
    return {
        "rows_in_table": total,
        "rows_in_small_table": small_total,
        "stale_rows": STALE_ROWS,
        "reused_seed": seeding["reused"],
        "seed_s": seeding["seed_s"],
        "repetitions": len(large_t),
        "query_ms_median": large * 1e3,
        "query_ms_p95": statistics.quantiles(large_t, n=20, method="inclusive")[18] * 1e3,
        "small_journal_query_ms_median": small * 1e3,
        "pk_read_ms_median": pk * 1e3,
        "large_over_small_journal": large / small,
        "large_over_pk_read": large / pk,
        "query_ms_without_partial_index": statistics.median(unindexed) * 1e3,
        "without_over_with": statistics.median(unindexed) / large,
        "uses_intent_open_idx": True,
        "plan": plan,
        "plan_small_journal": plan_small,
        "plan_without_partial_index": plan_without,
    }


def stale_batch_unsent(world: World, count: int) -> tuple[Any, None]:
    from django.utils import timezone

    from journal.models import Intent, Run

    run, _ = world.stale_batch(0)
    for n in range(count):
        world.services.intent_record(run=run, tool=TOOL, args=REFUND, turn=2, occurrence=n, actor=world.actor)
    then = timezone.now() - dt.timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    Intent.objects.filter(run=run).update(intended_at=then)
    return run, None


# --- the run ----------------------------------------------------------------------------------

PARTS = ("query", "workers", "recovery", "settle")


def machine() -> dict[str, Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        (pg,) = cursor.fetchone() or ("?",)
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "postgresql": pg,
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from django.test import override_settings

    broker = os.environ.get("SEAM_BENCH_REDIS_URL", DEFAULT_REDIS_URL)
    url = setup_django(
        args.database, sweep_database=args.sweep_database if "query" in args.parts else None, broker=broker
    )
    started = time.perf_counter()
    result: dict[str, Any] = {"parts": args.parts}
    try:
        with running_sandbox(url) as (sandbox, _process):
            progress(f"sandbox at {sandbox}")
            with override_settings(SEAM_SANDBOX_URL=sandbox):
                world = World(sandbox)
                # The query first: its small-journal baseline wants a journal of 100 stale rows.
                if "query" in args.parts:
                    progress(f"the sweep's query over {args.settled_rows:,} settled rows")
                    result["query"] = measure_query(
                        world, repetitions=args.repetitions, settled_rows=args.settled_rows
                    )
                if "workers" in args.parts:
                    progress(f"celery workers: {args.worker_rounds} rounds of {args.worker_rows} rows")
                    result["workers"] = measure_workers(
                        world,
                        url=url,
                        broker=broker,
                        counts=[1, 2, 4],
                        rows=args.worker_rows,
                        slow_rows=args.slow_worker_rows,
                        rounds=args.worker_rounds,
                    )
                if "recovery" in args.parts:
                    progress(f"recovery of {args.recovery_rows:,} calls in doubt by 2 workers")
                    zero = result.get("workers", {}).get("workers", {}).get("2", {}).get("rows_per_s")
                    result["recovery"] = measure_recovery(
                        world,
                        url=url,
                        broker=broker,
                        rows=args.recovery_rows,
                        runs=args.recovery_runs,
                        workers=2,
                        zero_latency=zero,
                    )
                if "settle" in args.parts:
                    settle = []
                    for slow_ms, rows in ((0, args.rows), (args.slow_ms, args.slow_rows)):
                        progress(
                            f"settle rate at +{slow_ms} ms lookup latency: {args.rounds} rounds of {rows} rows"
                        )
                        settle.append(measure_settle(world, rows=rows, rounds=args.rounds, slow_ms=slow_ms))
                    result["settle"] = settle
                result["machine"] = machine()
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            progress(f"dropping database {args.database}")
            drop_database(url, args.database)
    result["elapsed_s"] = time.perf_counter() - started
    return result


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"reconciliation sweep — {m['date']} on {m['host']} ({m['platform']}, {m['cpus']} CPUs, "
        f"Python {m['python']}, PostgreSQL {m['postgresql']})",
    ]
    if "settle" in result:
        lines += [
            "",
            "1. settle rate, in process: reconcile_sweep vs the same lookups made directly with the connector",
            f"   {'lookup latency':>16} {'rows':>5} {'sweep rows/s':>13} {'lookups/s':>10} "
            f"{'sweep ms/row':>13} {'lookup ms':>10} {'Seam ms/row':>12} {'ratio':>6}",
        ]
        for s in result["settle"]:
            lines.append(
                f"   {'+' + str(s['lookup_latency_ms']) + ' ms':>16} {s['rows']:>5} {s['sweep_rows_per_s']:>13.1f} "
                f"{s['baseline_lookups_per_s']:>10.1f} {s['sweep_ms_per_row']:>13.2f} {s['baseline_ms_per_lookup']:>10.2f} "
                f"{s['seam_overhead_ms_per_row']:>12.2f} {s['sweep_over_baseline']:>6.2f}"
            )
        lines.append(
            f"   (medians over {result['settle'][0]['rounds']} alternating rounds; ratio = sweep / direct "
            "lookups, paired by round; Seam ms/row = claim + settle + journal event per row)"
        )
    if "workers" in result:
        w = result["workers"]
        lines += [
            "",
            f"2. rows settled per second by celery workers ({w['connector']}; {w['rows_per_round']} rows "
            f"per round, medians over {w['rounds']} rounds)",
            f"   in process, no Celery (baseline): {w['in_process_rows_per_s']:.0f} rows/s",
            f"   {'workers':>8} {'rows/s':>8} {'per worker':>11} {'incl. start':>12} {'/ 1 worker':>11} "
            f"{'/ in process':>13}",
        ]
        for k in w["workers"].values():
            lines.append(
                f"   {k['workers']:>8} {k['rows_per_s']:>8.0f} {k['rows_per_s_per_worker']:>11.0f} "
                f"{k['rows_per_s_wall']:>12.0f} {k['over_1_worker']:>11.2f} {k['over_in_process']:>13.2f}"
            )
        lines.append(
            "   (rows/s: first settle to last; incl. start: from the first task sent, workers already up)"
        )
        lat = w["latency"]
        lines += [
            "",
            f"   at +{lat['lookup_latency_ms']:.0f} ms a lookup ({lat['connector']}; {lat['rows_per_round']} rows per "
            f"round; declared {lat['declared_concurrency']} in flight per process, peak seen "
            f"{lat['peak_in_flight_per_process']})",
            f"   {'workers':>8} {'rows/s':>8} {'per worker':>11} {'incl. start':>12} {'/ 1 worker':>11} "
            f"{'/ at 0 ms':>13}",
        ]
        for k in lat["workers"].values():
            lines.append(
                f"   {k['workers']:>8} {k['rows_per_s']:>8.0f} {k['rows_per_s_per_worker']:>11.0f} "
                f"{k['rows_per_s_wall']:>12.0f} {k['over_1_worker']:>11.2f} {k['over_zero_latency']:>13.2f}"
            )
        lines += [
            f"   target: {t['name']}: {t['value']:.2f} {t['bound']}: {'met' if t['met'] else 'NOT MET'}"
            for t in w["targets"]
        ]
    if "recovery" in result:
        r = result["recovery"]
        against = (
            f"; / the same workers at 0 ms: {r['over_zero_latency']:.2f}" if r["over_zero_latency"] else ""
        )
        lines += [
            "",
            f"2b. recovery: {r['rows']:,} calls in doubt over {r['runs']} dead runs, {r['workers']} workers and "
            f"celery beat every {r['sweep_interval_s']:.0f} s, +{r['lookup_latency_ms']:.0f} ms a lookup",
            f"   {r['seconds']:.1f} s from beat's start to the last settle ({r['rows_per_s']:.0f} rows/s{against}; "
            f"peak {r['peak_in_flight_per_process']} lookups in flight per process)",
            *(
                f"   target: {t['name']}: {t['value']:.2f} {t['bound']}: {'met' if t['met'] else 'NOT MET'}"
                for t in r["targets"]
            ),
        ]
    if "query" in result:
        q = result["query"]
        seeded = "reused" if q["reused_seed"] else f"seeded in {q['seed_s']:.0f} s"
        lines += [
            "",
            f"3. the sweep's query: {q['rows_in_table']:,} intent rows, {q['stale_rows']} stale ({seeded})",
            f"   stale_intents(...) as a list of ids: {q['query_ms_median']:.3f} ms median, "
            f"p95 {q['query_ms_p95']:.3f} ms, over {q['repetitions']}",
            f"   baseline, the same query on a journal of {q['rows_in_small_table']:,} rows: "
            f"{q['small_journal_query_ms_median']:.3f} ms -> ratio {q['large_over_small_journal']:.2f}",
            f"   baseline, a primary-key read on the large table: {q['pk_read_ms_median']:.3f} ms "
            f"-> ratio {q['large_over_pk_read']:.2f}",
            f"   without intent_open_idx: {q['query_ms_without_partial_index']:.1f} ms "
            f"-> the partial index is {q['without_over_with']:.0f}x faster",
            f"   uses intent_open_idx: {'yes' if q['uses_intent_open_idx'] else 'NO'}",
            "   EXPLAIN (ANALYZE, BUFFERS):",
            *(f"     {line}" for line in q["plan"].splitlines()),
            "   without the partial index:",
            *(f"     {line}" for line in q["plan_without_partial_index"].splitlines()),
        ]
    lines += ["", f"elapsed {result['elapsed_s']:.0f} s"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300, help="stale intents per round at 0 ms (default 300)")
    parser.add_argument("--slow-ms", type=int, default=50, help="added lookup latency (default 50)")
    parser.add_argument(
        "--slow-rows", type=int, default=100, help="stale intents per slow round (default 100)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument(
        "--worker-rows", type=int, default=20000, help="stale intents per worker round (default 20000)"
    )
    parser.add_argument("--worker-rounds", type=int, default=3, help="worker rounds (default 3)")
    parser.add_argument(
        "--slow-worker-rows",
        type=int,
        default=10000,
        help="stale intents per worker round at 50 ms a lookup (default 10000)",
    )
    parser.add_argument(
        "--recovery-rows", type=int, default=100_000, help="calls in doubt to recover (default 100,000)"
    )
    parser.add_argument(
        "--recovery-runs", type=int, default=100, help="dead runs they belong to (default 100)"
    )
    parser.add_argument("--repetitions", type=int, default=20, help="query repetitions (default 20)")
    parser.add_argument(
        "--settled-rows",
        type=int,
        default=SETTLED_ROWS,
        help=f"settled rows in the sweep database (default {SETTLED_ROWS:,})",
    )
    parser.add_argument(
        "--parts",
        type=lambda v: [p for p in v.split(",") if p],
        default=list(PARTS),
        help="what to measure, comma-separated: query,workers,recovery,settle (default all)",
    )
    parser.add_argument(
        "--database", default="seam_bench_reconcile", help="database (default seam_bench_reconcile)"
    )
    parser.add_argument(
        "--sweep-database",
        default="seam_bench_sweep",
        help="the large journal's database, kept between runs (default seam_bench_sweep)",
    )
    parser.add_argument("--keep", action="store_true", help="do not drop the database at the end")
    parser.add_argument("--json", action="store_true", help="print only a JSON object of the figures")
    args = parser.parse_args(argv)
    if args.rows < 2 or args.slow_rows < 2 or args.rounds < 1 or args.repetitions < 2 or args.slow_ms < 1:
        parser.error("need --rows >= 2, --slow-rows >= 2, --rounds >= 1, --repetitions >= 2, --slow-ms >= 1")
    if args.worker_rows < 10 or args.slow_worker_rows < 10 or args.worker_rounds < 1 or args.settled_rows < 1:
        parser.error(
            "need --worker-rows >= 10, --slow-worker-rows >= 10, --worker-rounds >= 1, --settled-rows >= 1"
        )
    if args.recovery_runs < 1 or args.recovery_rows < args.recovery_runs:
        parser.error("need --recovery-runs >= 1 and --recovery-rows >= --recovery-runs")
    if set(args.parts) - set(PARTS) or not args.parts:
        parser.error(f"--parts takes a comma-separated subset of {','.join(PARTS)}")
    if "bench" not in args.database or "bench" not in args.sweep_database:
        parser.error("the databases are emptied or dropped: their names must contain 'bench'")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        result = measure(args)
    except (BenchError, ProcessFailed) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
