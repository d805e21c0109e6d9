"""What the reconciliation sweep costs per settled row, and what finding its work costs when the
journal is large.

One run measures, on a database of its own and against a real sandbox subprocess:

1. settle rate: `reconcile_sweep` over N stale intents of the sandbox's `issue_refund` tool (a
   run that died: old rows, no heartbeat), half of them really performed on the sandbox under
   their keys and half never sent, as rows settled per second; against a baseline of the same
   number of lookups of the same keys made directly with the tool's connector (no claim, no
   settle, no journal event). sweep / baseline is what Seam adds per settled row. Measured at
   the sandbox's own lookup latency and with a persistent `slow:<ms>` fault on payments/lookup
   (default 50 ms), in alternating rounds (the order reversed every other round), medians;
2. the sweep's query at scale: 1,000,000 settled rows (one INSERT ... SELECT generate_series)
   and 100 stale ones, ANALYZEd; the time to evaluate `stale_intents(...)` as a list of ids, its
   EXPLAIN (ANALYZE, BUFFERS) plan, which must use the partial index intent_open_idx, and the
   same query with that index dropped (inside a transaction that is rolled back) as baseline.

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python bench/reconcile.py [--json] [--keep]

The database, `seam_bench_reconcile` unless `--database` says otherwise, on the server
DATABASE_URL names, is created and migrated by the script and dropped at the end unless `--keep`.
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
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import requests
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/test"
TOOL = "issue_refund"
REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
SETTLED_ROWS = 1_000_000
STALE_ROWS = 100


class BenchError(RuntimeError):
    """The benchmark could not measure what it claims to."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the database -----------------------------------------------------------------------------


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


@contextlib.contextmanager
def maintenance(url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to the server's `postgres` database (CREATE/DROP DATABASE)."""
    with psycopg.connect(_with_database(url, "postgres"), autocommit=True) as conn:
        yield conn


def create_database(url: str, name: str) -> None:
    with maintenance(url) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            progress(f"creating database {name}")
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(url: str, name: str) -> None:
    with maintenance(url) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def setup_django(database: str) -> str:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["DJANGO_DEBUG"] = "false"
    url = _with_database(os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), database)
    if urlsplit(url).scheme not in ("postgres", "postgresql", "pgsql"):
        raise BenchError("the benchmark measures PostgreSQL; DATABASE_URL names another database")
    create_database(url, database)
    os.environ["DATABASE_URL"] = url

    import django
    from django.conf import settings

    django.setup()
    if settings.DATABASES["default"]["NAME"] != database:
        raise BenchError(f"settings point at {settings.DATABASES['default']['NAME']}, not {database}")
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    return url


# --- the world --------------------------------------------------------------------------------


class World:
    """A tenant of the run's own; each batch is a run that died ten minutes ago with `count`
    open refund intents, every other one really performed on the sandbox under its key."""

    def __init__(self, sandbox: str) -> None:
        from handover import services
        from handover.models import Tenant

        self.services = services
        self.sandbox = sandbox
        self.tenant = Tenant.objects.create(
            slug=f"bench-reconcile-{os.getpid()}-{time.time_ns()}", name="Bench"
        )
        self.actor = services.Actor.agent("bench-reconcile")
        self.batches = 0

    def stale_batch(self, count: int) -> tuple[Any, list[Any]]:
        from django.utils import timezone

        from handover.models import Intent, Run
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
    from handover.tool_errors import ToolError

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
    from handover.models import IntentStatus
    from handover.services import Actor
    from reconciliation.services import reconcile_sweep
    from tools.registry import get_tool

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
                connector.lookup(intent.idempotency_key, intent.args)
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


# --- 2. the sweep's query at scale ------------------------------------------------------------

BULK_INSERT = """
INSERT INTO handover_intent (run_id, step_id, turn, tool, args, occurrence, idempotency_key, status,
    error_class, outcome_summary, receipt, request_id, intended_at, settled_at, lookup_attempts,
    last_lookup_error, next_lookup_at, unknown_reason)
SELECT %(run)s, 'bulk:' || g, 1, 'issue_refund', '{}'::jsonb, g,
    md5('bulk-a:' || g) || md5('bulk-b:' || g), 'performed', '', 'bench', '{}'::jsonb, '',
    now() - interval '30 days' + g * interval '1 second', now() - interval '30 days' + g * interval '1 second',
    0, '', NULL, ''
FROM generate_series(1, %(n)s) AS g
"""


def measure_query(world: World, *, repetitions: int) -> dict[str, Any]:
    from django.db import connection, transaction

    from reconciliation.selectors import stale_intents

    settled_run, _ = world.stale_batch(0)
    progress(f"inserting {SETTLED_ROWS:,} settled rows (one INSERT ... SELECT generate_series)")
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(BULK_INSERT, {"run": settled_run.pk, "n": SETTLED_ROWS})
    insert_s = time.perf_counter() - t0
    # The stale rows: a dead run's open intents, never sent (no sandbox calls needed).
    stale_run, _ = stale_batch_unsent(world, STALE_ROWS)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE handover_intent")
        cursor.execute("ANALYZE handover_run")

    def query() -> list[int]:
        return list(stale_intents(older_than=dt.timedelta(seconds=60)).values_list("pk", flat=True))

    def timed(label: str) -> tuple[list[float], list[int]]:
        query()  # warm
        times, ids = [], []
        for _ in range(repetitions):
            t = time.perf_counter()
            ids = query()
            times.append(time.perf_counter() - t)
        progress(f"  {label}: median {statistics.median(times) * 1e3:.2f} ms over {repetitions}")
        return times, ids

    def explain() -> str:
        sql_text, params = (
            stale_intents(older_than=dt.timedelta(seconds=60))
            .values_list("pk", flat=True)
            .query.sql_with_params()
        )
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql_text, params)
            return "\n".join(row[0] for row in cursor.fetchall())

    indexed, ids = timed("with intent_open_idx")
    plan = explain()
    if len(ids) != STALE_ROWS:
        raise BenchError(f"stale_intents found {len(ids)} rows; {STALE_ROWS} are stale")
    if "intent_open_idx" not in plan:
        raise BenchError(f"the sweep's query does not use intent_open_idx:\n{plan}")

    class Rollback(Exception):
        pass

    # Baseline: the same query without the partial index. DROP INDEX is transactional, so the
    # index is back when the block rolls back.
    with contextlib.suppress(Rollback), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX intent_open_idx")
        unindexed, unindexed_ids = timed("without it (baseline)")
        plan_without = explain()
        raise Rollback
    if sorted(unindexed_ids) != sorted(ids):
        raise BenchError("the query without the index found different rows")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM handover_intent")
        (total,) = cursor.fetchone() or (0,)
    indexed_med, unindexed_med = statistics.median(indexed), statistics.median(unindexed)
    return {
        "rows_in_table": total,
        "stale_rows": STALE_ROWS,
        "insert_s": insert_s,
        "repetitions": repetitions,
        "query_ms_median": indexed_med * 1e3,
        "query_ms_without_partial_index": unindexed_med * 1e3,
        "without_over_with": unindexed_med / indexed_med,
        "uses_intent_open_idx": True,
        "plan": plan,
        "plan_without_partial_index": plan_without,
        "_stale_run": stale_run.pk,
    }


def stale_batch_unsent(world: World, count: int) -> tuple[Any, None]:
    from django.utils import timezone

    from handover.models import Intent, Run

    run, _ = world.stale_batch(0)
    for n in range(count):
        world.services.intent_record(run=run, tool=TOOL, args=REFUND, turn=2, occurrence=n, actor=world.actor)
    then = timezone.now() - dt.timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    Intent.objects.filter(run=run).update(intended_at=then)
    return run, None


# --- the run ----------------------------------------------------------------------------------


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

    from tests.sandbox.process import running_sandbox

    url = setup_django(args.database)
    started = time.perf_counter()
    try:
        with running_sandbox(url) as (sandbox, _process):
            progress(f"sandbox at {sandbox}")
            with override_settings(SEAM_TOOL_MODULES=["tools.sandbox_tools"], SEAM_SANDBOX_URL=sandbox):
                world = World(sandbox)
                settle = []
                for slow_ms, rows in ((0, args.rows), (args.slow_ms, args.slow_rows)):
                    progress(
                        f"settle rate at +{slow_ms} ms lookup latency: {args.rounds} rounds of {rows} rows"
                    )
                    settle.append(measure_settle(world, rows=rows, rounds=args.rounds, slow_ms=slow_ms))
                progress("the sweep's query over a large journal")
                query = measure_query(world, repetitions=args.repetitions)
                info = machine()
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            progress(f"dropping database {args.database}")
            drop_database(url, args.database)
    query.pop("_stale_run")
    return {"machine": info, "settle": settle, "query": query, "elapsed_s": time.perf_counter() - started}


def render(result: dict[str, Any]) -> str:
    m, q = result["machine"], result["query"]
    lines = [
        f"reconciliation sweep — {m['date']} on {m['host']} ({m['platform']}, {m['cpus']} CPUs, "
        f"Python {m['python']}, PostgreSQL {m['postgresql']})",
        "",
        "1. settle rate: reconcile_sweep vs the same lookups made directly with the connector",
        f"   {'lookup latency':>16} {'rows':>5} {'sweep rows/s':>13} {'lookups/s':>10} "
        f"{'sweep ms/row':>13} {'lookup ms':>10} {'Seam ms/row':>12} {'ratio':>6}",
    ]
    for s in result["settle"]:
        lines.append(
            f"   {'+' + str(s['lookup_latency_ms']) + ' ms':>16} {s['rows']:>5} {s['sweep_rows_per_s']:>13.1f} "
            f"{s['baseline_lookups_per_s']:>10.1f} {s['sweep_ms_per_row']:>13.2f} {s['baseline_ms_per_lookup']:>10.2f} "
            f"{s['seam_overhead_ms_per_row']:>12.2f} {s['sweep_over_baseline']:>6.2f}"
        )
    lines += [
        f"   (medians over {result['settle'][0]['rounds']} alternating rounds; ratio = sweep / direct lookups, "
        "paired by round; Seam ms/row = claim + settle + journal event per row)",
        "",
        f"2. the sweep's query: {q['rows_in_table']:,} intent rows, {q['stale_rows']} stale "
        f"(bulk insert took {q['insert_s']:.1f} s)",
        f"   stale_intents(...) as a list of ids: {q['query_ms_median']:.2f} ms median over {q['repetitions']}",
        f"   without intent_open_idx (baseline): {q['query_ms_without_partial_index']:.2f} ms "
        f"-> the partial index is {q['without_over_with']:.0f}x faster",
        f"   uses intent_open_idx: {'yes' if q['uses_intent_open_idx'] else 'NO'}",
        "   EXPLAIN (ANALYZE, BUFFERS):",
        *(f"     {line}" for line in q["plan"].splitlines()),
        "   without the partial index:",
        *(f"     {line}" for line in q["plan_without_partial_index"].splitlines()),
        "",
        f"elapsed {result['elapsed_s']:.0f} s",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300, help="stale intents per round at 0 ms (default 300)")
    parser.add_argument("--slow-ms", type=int, default=50, help="added lookup latency (default 50)")
    parser.add_argument(
        "--slow-rows", type=int, default=100, help="stale intents per slow round (default 100)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--repetitions", type=int, default=20, help="query repetitions (default 20)")
    parser.add_argument(
        "--database", default="seam_bench_reconcile", help="database (default seam_bench_reconcile)"
    )
    parser.add_argument("--keep", action="store_true", help="do not drop the database at the end")
    parser.add_argument("--json", action="store_true", help="print only a JSON object of the figures")
    args = parser.parse_args(argv)
    if args.rows < 2 or args.slow_rows < 2 or args.rounds < 1 or args.repetitions < 1 or args.slow_ms < 1:
        parser.error("need --rows >= 2, --slow-rows >= 2, --rounds >= 1, --repetitions >= 1, --slow-ms >= 1")
    if "bench" not in args.database:
        parser.error("the database is dropped at the end: its name must contain 'bench'")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        result = measure(args)
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
