"""What the journal costs per side-effecting call, against the two commits it cannot avoid.

Every journaled call commits twice: the intent before the call leaves, the outcome after. The
floor is therefore two durable commits on PostgreSQL, and the journal is worth its place only if
it stays close to that floor. One run measures, against the same database:

1. the floor the target is set against: raw psycopg 3 doing the same two commits as the journal on
   the same database, per call the INSERT of an `intended` row into journal_intent (every NOT
   NULL column filled, a fresh idempotency key and step id, on a run of its own) and the UPDATE
   of that row to its outcome (the columns the journal's settle writes), each an autocommit
   statement prepared on the server. It pays journal_intent's real indexes, constraints and
   foreign key, but not the journal events nor any of Seam's Python;
2. the journal's own two statements (handover/journal_sql.py) run the same raw way, which splits
   the gap into what the journal events cost and what Seam's Python costs;
3. the journal in process: `journal.services.perform` with a dispatch that does nothing, so
   what is timed is recording the intent and the outcome (each call has new arguments, so each
   records a new intent);
4. for reference, without a target: the same two writes on a minimal table of the same shape
   (unique text key, jsonb arguments, status, timestamps) that the benchmark creates and drops,
   i.e. what journal_intent's own indexes and constraints cost (the open-intent index that the
   sweep reads, the step-per-run and key uniqueness, the run's foreign key);

and prints journal / floor beside the target (at most 1.3), split into the journal's statements /
floor (what the journal events cost) and journal / its statements (what Seam's Python costs).
Then:

5. the REST path: intent POST + outcome POST to a real gunicorn server on loopback, from one
   client and from several concurrent clients (threads, each with its own HTTP session and its
   own run), as latency per call and calls per second;
6. the peer: DBOS Transact (the `dbos` package, the "bench" extra) recording the same no-op call
   on the same PostgreSQL server, in a system database of its own: one workflow with one
   `@DBOS.step()` per call, its natural unit (bench/dbos_peer.py). DBOS is launched last, and
   measured in rounds of its own against the journal measured beside it (DBOS's background
   threads would otherwise slow the journal's rounds against the floors). journal / DBOS per
   recorded call is printed beside the target (below 1: the journal is faster). `--no-dbos`
   leaves it out.

Each measurement is warmed up first, then run in alternating rounds (the order reversed every
other round) so that machine noise falls on all of them alike: 31 rounds of the floors and the
journal, whose ratios are paired by round, then 9 of REST with the floor beside it (REST's ratio
to the floor is paired by round too), then 9 of DBOS beside the journal.
The figures printed are medians over the rounds. Run it from the project root:

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python -m bench.journal [--calls N] [--json]

`--json` prints only a JSON object of the figures on stdout; progress always goes to stderr.
`--profile` adds a cProfile of in-process calls (SQL statements per call, where the time goes).

The database. The journal refuses to forget (a trigger on journal_journalevent refuses UPDATE
and DELETE), so the benchmark keeps away from the suite's database: it uses one of its own,
`seam_bench` unless `--database` says otherwise, on the server DATABASE_URL names (default
postgres://postgres@127.0.0.1:5432/test). It creates that database if it is missing (connecting
to `postgres`, or else to DATABASE_URL's own database, in autocommit), migrates it, and gives
each run a tenant of its own. When the database's name contains "bench", every handover table
(tenants, tokens, runs, intents, journal events) is emptied with TRUNCATE at the end, which the
trigger does not cover (`--keep-rows` leaves them for inspection); any other database keeps the
run's rows under their own tenant. Do not point two runs at the same bench database at once.

The server is started with production's gunicorn configuration (config/gunicorn.conf.py: gthread
workers keeping each client's connection alive; `--worker-class` and `--threads` override it),
`--workers` workers, the same settings module, DEBUG off, a throwaway secret key and
DJANGO_CONN_MAX_AGE=60 (persistent database connections, as production has by default; see
`--server-conn-max-age`), bound to a free port on 127.0.0.1, and stopped at the end whatever
happens. Each REST client keeps one HTTP/1.1 connection (http.client) for all its calls, as
seam_client keeps its httpx connection. REST's targets are printed as met or not: 1 client within 5 x the floor, and
8 clients at 3 x the 80 calls/s the REST path managed before (issue 21).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import http.client
import io
import itertools
import json
import os
import pstats
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from devtools.processes import GUNICORN_CONF, ProcessFailed, gunicorn_server, wait_until_serving

TARGET_RATIO = 1.3
# REST's targets (issue 21): intent + outcome at one client within 5 x the floor, and at 8 clients
# at least 3 x the calls/s measured before (74-136 calls/s over the runs of bench/journal.py then,
# on the 2-core machine; the issue takes 80 as its baseline).
REST_1_TARGET_OVER_FLOOR = 5.0
REST_MANY_BASELINE_CALLS_PER_S = 80.0
REST_MANY_TARGET_OVER_BASELINE = 3.0
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/test"
VERSIONS = {"schema": "1", "flow": "bench-1", "policy": "bench-1", "capability": "1"}
TOOL = "bench_call"
# Production's CONN_MAX_AGE (config/settings/base.py): with 0, every REST request would also pay
# for a new PostgreSQL connection, which is not what a deployed server does.
SERVER_CONN_MAX_AGE = 60


class BenchError(RuntimeError):
    """The benchmark could not measure what it claims to (a refused request, a dead server)."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the database -----------------------------------------------------------------------------


def with_database(url: str, name: str) -> str:
    """The same server URL naming another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def ensure_database(url: str, name: str) -> None:
    """Create the bench database if it is missing. CREATE DATABASE cannot run in a transaction,
    so this connects in autocommit to a database that already exists."""
    parts = urlsplit(url)
    candidates = ["postgres", parts.path.lstrip("/") or "postgres"]
    last_error: Exception | None = None
    for maintenance in dict.fromkeys(candidates):
        try:
            conn = psycopg.connect(with_database(url, maintenance), autocommit=True)
        except psycopg.OperationalError as exc:
            last_error = exc
            continue
        with conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                return
            progress(f"creating database {name}")
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # another run was quicker
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            return
    raise BenchError(f"cannot reach PostgreSQL at {parts.hostname}:{parts.port}: {last_error}")


def setup_django(database: str) -> str:
    """Point Django at the bench database, start it and migrate. Returns the database URL the
    server process must be given."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    # The floor is measured without debugging overheads, so the journal must be too.
    os.environ["DJANGO_DEBUG"] = "false"
    url = with_database(os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), database)
    if urlsplit(url).scheme not in ("postgres", "postgresql", "pgsql"):
        raise BenchError("the benchmark measures PostgreSQL; DATABASE_URL names another database")
    ensure_database(url, database)
    os.environ["DATABASE_URL"] = url

    import django
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = database
    django.setup()
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        raise BenchError(f"{os.environ['DJANGO_SETTINGS_MODULE']} does not use PostgreSQL")

    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    return url


def raw_connection() -> psycopg.Connection[Any]:
    """A plain psycopg connection to the same database, with the journal's session options
    (synchronous_commit=on): the floor must commit as durably as the journal does."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    params: dict[str, Any] = {
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        "dbname": db["NAME"],
        "options": db.get("OPTIONS", {}).get("options"),
    }
    return psycopg.connect(autocommit=True, **{k: v for k, v in params.items() if v})


# --- measurements -----------------------------------------------------------------------------


@dataclass
class Sample:
    """One round of one measurement: the latency of each call, the wall time of the round and
    the CPU time this process spent in it (Python and driver work, not waiting on a server)."""

    latencies: list[float]
    wall: float
    cpu: float

    @property
    def calls(self) -> int:
        return len(self.latencies)


@dataclass
class Series:
    name: str
    samples: list[Sample] = field(default_factory=list)

    def per_round(self, figure: Callable[[Sample], float]) -> list[float]:
        return [figure(s) for s in self.samples]

    def summary(self) -> dict[str, float]:
        def p99(s: Sample) -> float:
            return statistics.quantiles(s.latencies, n=100, method="inclusive")[98]

        return {
            "mean_ms": statistics.median(self.per_round(lambda s: statistics.fmean(s.latencies))) * 1e3,
            "p50_ms": statistics.median(self.per_round(lambda s: statistics.median(s.latencies))) * 1e3,
            "p99_ms": statistics.median(self.per_round(p99)) * 1e3,
            "calls_per_s": statistics.median(self.per_round(lambda s: s.calls / s.wall)),
            "own_cpu_ms": statistics.median(self.per_round(lambda s: s.cpu / s.calls)) * 1e3,
            "calls_per_round": self.samples[0].calls if self.samples else 0,
            "rounds": len(self.samples),
        }


def ratio_of_means(numerator: Series, denominator: Series) -> float:
    """Paired by round (they ran next to each other), then the median over rounds. For two
    series measured in rounds of their own (REST against the journal in process), see
    ratio_of_medians."""
    return statistics.median(
        statistics.fmean(a.latencies) / statistics.fmean(b.latencies)
        for a, b in zip(numerator.samples, denominator.samples, strict=True)
    )


def ratio_of_medians(numerator: Series, denominator: Series) -> float:
    """The ratio of the two series' median per-round means (not paired: different rounds)."""
    return numerator.summary()["mean_ms"] / denominator.summary()["mean_ms"]


def run_rounds(series: dict[str, Series], runners: dict[str, Callable[[], Sample]], rounds: int) -> None:
    """Alternating rounds, the order reversed every other round, so that drift in the machine's
    speed falls on every measurement alike."""
    order = list(runners)
    for round_number in range(rounds):
        this_round = order if round_number % 2 == 0 else order[::-1]
        progress(f"round {round_number + 1}/{rounds}: {', '.join(this_round)}")
        for name in this_round:
            series[name].samples.append(runners[name]())


def checkpoint_first(connection: Any) -> None:
    """Write out every dirty page before the rounds (as bench.reconcile does after its seeding),
    so that a checkpoint owed by an earlier bulk load, such as another benchmark's seeding, does
    not start during them (the next is then checkpoint_timeout away, longer than the rounds).
    After a checkpoint starts, the first change of each page writes the whole page to the WAL,
    which costs journal_intent's writes (seven indexes) more than the minimal table's."""
    from django.db import DatabaseError

    try:
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    except DatabaseError as exc:  # a role without pg_checkpoint: measured as it is
        progress(f"no CHECKPOINT before the rounds ({exc}); a pending checkpoint may slow them")


def timed_loop(calls: int, one_call: Callable[[], None]) -> Sample:
    latencies = []
    cpu_started = time.process_time()
    started = time.perf_counter()
    for _ in range(calls):
        t0 = time.perf_counter()
        one_call()
        latencies.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    return Sample(latencies=latencies, wall=wall, cpu=time.process_time() - cpu_started)


def bench_run(tenant: Any, actor: Any) -> Any:
    """A run of the bench tenant for one measurement's rows (each measurement has its own)."""
    from journal import services

    return services.run_create(tenant=tenant, task_type="bench", versions=VERSIONS, actor=actor).run


class MinimalTable:
    """A reference, not the floor: two autocommit statements per call on a minimal scratch table
    shaped like the intent table, without its indexes and constraints."""

    def __init__(self) -> None:
        self.conn = raw_connection()
        self.table = sql.Identifier(f"bench_journal_floor_{os.getpid()}")
        self.counter = itertools.count()
        self.conn.execute(
            sql.SQL(
                """
                CREATE TABLE {} (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    idempotency_key text NOT NULL UNIQUE,
                    tool text NOT NULL,
                    args jsonb NOT NULL,
                    status text NOT NULL,
                    intended_at timestamptz NOT NULL,
                    settled_at timestamptz
                )
                """
            ).format(self.table)
        )
        self.insert = sql.SQL(
            "INSERT INTO {} (idempotency_key, tool, args, status, intended_at) "
            "VALUES (%s, %s, %s, 'intended', now()) RETURNING id"
        ).format(self.table)
        self.update = sql.SQL(
            "UPDATE {} SET status = 'performed', settled_at = now() WHERE id = %s AND status = 'intended'"
        ).format(self.table)

    def call(self) -> None:
        n = next(self.counter)
        # A hashed key, like the journal's, so both tables' unique indexes grow the same way.
        key = hashlib.sha256(f"floor:{n}".encode()).hexdigest()
        row = self.conn.execute(self.insert, (key, TOOL, Jsonb({"n": n}))).fetchone()
        assert row is not None
        self.conn.execute(self.update, (row[0],))

    def run(self, calls: int) -> Sample:
        return timed_loop(calls, self.call)

    def close(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self.conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self.table))
        self.conn.close()


class Floor:
    """The floor: the journal's two row writes on journal_intent itself, raw. Per call the
    INSERT of an `intended` row (every NOT NULL column filled, a fresh idempotency key and step
    id) and the UPDATE of it to `performed`, writing the columns the journal's settle writes (a
    no-op dispatch's empty summary and receipt), each its own autocommit statement, prepared on
    the server, on a run of its own. No journal events, no Seam Python:
    what the journal would cost if it only wrote its rows on its real indexes and constraints.
    Like the journal's statements, they write the run's month's partition of journal_intent
    (journal.partitions). The rows stay there (run-scoped), and are emptied with the other bench
    rows."""

    INSERT = (
        "INSERT INTO {table} (run_id, run_created_at, step_id, turn, tool, args, occurrence, idempotency_key, "
        "status, error_class, outcome_summary, receipt, request_id, intended_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, 0, %s, 'intended', '', '', '{{}}'::jsonb, '', now()) RETURNING id"
    )
    UPDATE = (
        "UPDATE {table} SET status = 'performed', error_class = '', outcome_summary = '', "
        "receipt = '{{}}'::jsonb, request_id = '', settled_at = now() "
        "WHERE id = %s AND run_created_at = %s AND status = 'intended'"
    )

    def __init__(self, tenant: Any) -> None:
        from journal import partitions, services

        run = bench_run(tenant, services.Actor.system("bench-schema-floor"))
        self.run_id, self.run_created_at = run.pk, run.created_at
        table = partitions.run_tables(run.created_at).intent
        self.insert, self.update = self.INSERT.format(table=table), self.UPDATE.format(table=table)
        self.conn = raw_connection()
        self.counter = itertools.count()

    def call(self) -> None:
        n = next(self.counter)
        key = hashlib.sha256(f"schema-floor:{self.run_id}:{n}".encode()).hexdigest()
        step_id = f"{self.run_id}:{n}:{TOOL}"  # the journal's step id shape
        row = self.conn.execute(
            self.insert,
            (self.run_id, self.run_created_at, step_id, n, TOOL, Jsonb({"n": n}), key),
            prepare=True,
        ).fetchone()
        assert row is not None
        updated = self.conn.execute(self.update, (row[0], self.run_created_at), prepare=True).rowcount
        if updated != 1:
            raise BenchError(f"floor: the UPDATE of intent {row[0]} touched {updated} rows")

    def run(self, calls: int) -> Sample:
        return timed_loop(calls, self.call)

    def calls_made(self) -> int:
        from journal.models import Intent, IntentStatus

        return Intent.objects.filter(run_id=self.run_id, status=IntentStatus.PERFORMED).count()

    def close(self) -> None:
        self.conn.close()


class JournalStatements:
    """The journal's own two statements (journal.sql: the intent and its event, then the
    outcome and its event), run raw: the same autocommit psycopg connection and prepared
    statements as the floors, the parameters made ahead of the timed call as the floors make
    theirs, none of Seam's Python. Between the floor and the journal, it splits the gap
    into what the journal events cost PostgreSQL and what Seam's Python costs."""

    ACTOR: dict[str, Any] = {"actor_kind": "agent", "actor_name": "bench-statements", "user_id": None}

    def __init__(self, tenant: Any) -> None:
        from django.utils import timezone

        from journal import partitions, services
        from journal import sql as journal_sql

        self.journal_sql = journal_sql
        self.timezone = timezone
        run = bench_run(tenant, services.Actor.system("bench-statements"))
        self.run_id, self.run_created_at = run.pk, run.created_at
        # The statements the journal runs for this run: on its month's partitions.
        tables = partitions.run_tables(run.created_at)
        self.insert = journal_sql.insert_intent_statement(tables, as_caller=False)
        self.settle = journal_sql.settle_intent_statement(tables)
        self.conn = raw_connection()
        self.counter = itertools.count()

    def call(self) -> None:
        n = next(self.counter)
        key = hashlib.sha256(f"statements:{self.run_id}:{n}".encode()).hexdigest()
        now = self.timezone.now()
        sql = self.journal_sql
        params = sql.insert_intent_params(
            run_id=self.run_id,
            step_id=f"{self.run_id}:{n}:{TOOL}",
            turn=n,
            tool=TOOL,
            args_json=json.dumps({"n": n}),
            occurrence=0,
            key=key,
            now=now,
            **self.ACTOR,
            compensation=False,
            max_intents=0,
        )
        row = self.conn.execute(self.insert, params, prepare=True).fetchone()
        if row is None:
            raise BenchError(f"journal statements: intent {n} was not inserted")
        params = sql.settle_intent_params(
            intent_id=row[0],
            run_created_at=self.run_created_at,
            source="intended",  # journal.transitions.OUTCOME_SOURCE, spelled as the status is
            settled=sql.settled_columns(
                status="performed", error_class="", summary="", receipt_json="{}", request_id="", now=now
            ),
            **self.ACTOR,
        )
        if self.conn.execute(self.settle, params, prepare=True).fetchone() is None:
            raise BenchError(f"journal statements: the settle of intent {row[0]} changed nothing")

    def run(self, calls: int) -> Sample:
        return timed_loop(calls, self.call)

    def close(self) -> None:
        self.conn.close()


class InProcess:
    """`services.perform` with a dispatch that does nothing, on one run of the bench tenant."""

    def __init__(self, tenant: Any) -> None:
        from journal import services

        self.services = services
        self.actor = services.Actor.agent("bench-in-process")
        self.run_row = bench_run(tenant, self.actor)
        self.counter = itertools.count()

    @staticmethod
    def dispatch(args: dict[str, Any], key: str) -> Any:
        from journal.services import DispatchResult

        return DispatchResult()

    def call(self) -> None:
        n = next(self.counter)
        performed = self.services.perform(
            run=self.run_row, tool=TOOL, args={"n": n}, dispatch=self.dispatch, turn=n, actor=self.actor
        )
        if performed.replayed:
            raise BenchError(f"call {n} replayed an earlier intent; the figures would be wrong")

    def run(self, calls: int) -> Sample:
        return timed_loop(calls, self.call)

    def calls_made(self) -> int:
        from journal.models import Intent, IntentStatus

        return Intent.objects.filter(run=self.run_row, status=IntentStatus.PERFORMED).count()


# --- the REST path ----------------------------------------------------------------------------


class RestClient:
    """One agent runtime over HTTP: its own persistent HTTP/1.1 connection (http.client, kept
    alive by the server's gthread workers; reopened after each response by sync ones) and its
    own run, so concurrent clients never contend
    for one step slot. The client is the standard library's, not requests: what is measured is
    Seam's REST path, and requests spends about 1 ms of the client's CPU on each request (the 8
    clients share one process and the machine's two cores with the server)."""

    def __init__(self, base: str, secret: str, run_id: str) -> None:
        address = urlsplit(base)
        self.connection = http.client.HTTPConnection(
            address.hostname or "127.0.0.1", address.port, timeout=30
        )
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
        self.intents_path = f"/api/v1/runs/{run_id}/intents/"
        self.counter = itertools.count()

    def _post(self, path: str, body: dict[str, Any], expected: int) -> dict[str, Any]:
        self.connection.request("POST", path, json.dumps(body), self.headers)
        answer = self.connection.getresponse()
        content = answer.read()
        if answer.status != expected:
            raise BenchError(f"POST {path} answered {answer.status}: {content[:300]!r}")
        parsed: dict[str, Any] = json.loads(content)
        return parsed

    def call(self) -> None:
        n = next(self.counter)
        step_id = self._post(self.intents_path, {"tool": TOOL, "args": {"n": n}, "turn": n}, 201)["step_id"]
        self._post(f"{self.intents_path}{step_id}/outcome/", {"ok": True}, 200)

    def close(self) -> None:
        self.connection.close()


def rest_round(clients: list[RestClient], calls: int) -> Sample:
    """`calls` calls shared out among the clients, all starting together; latency is per client
    call, wall time from the first start to the last finish."""
    shares = [calls // len(clients) + (1 if i < calls % len(clients) else 0) for i in range(len(clients))]
    if len(clients) == 1:
        return timed_loop(calls, clients[0].call)
    barrier = threading.Barrier(len(clients))
    cpu_started = time.process_time()  # all the client threads: this process has no others now
    results: list[tuple[float, float, list[float]] | BaseException] = [ValueError("not run")] * len(clients)

    def work(index: int) -> None:
        try:
            barrier.wait()
            sample = timed_loop(shares[index], clients[index].call)
            finished = time.perf_counter()
            results[index] = (finished - sample.wall, finished, sample.latencies)
        except BaseException as exc:
            results[index] = exc

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies: list[float] = []
    starts, ends = [], []
    for result in results:
        if isinstance(result, BaseException):
            raise BenchError(f"a REST client failed: {result}") from result
        starts.append(result[0])
        ends.append(result[1])
        latencies.extend(result[2])
    return Sample(latencies=latencies, wall=max(ends) - min(starts), cpu=time.process_time() - cpu_started)


# --- profile ----------------------------------------------------------------------------------


def profile_in_process(in_process: InProcess, calls: int) -> dict[str, Any]:
    """Where an in-process call spends its time: the SQL it sends (Django's query log of one
    call), and cProfile's view of many calls: round trips and time blocked on PostgreSQL, the
    journal's own functions by cumulative time, and the busiest functions overall."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        in_process.call()
    statements = [q["sql"].split()[0].upper() for q in captured.captured_queries]

    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in range(calls):
        in_process.call()
    profiler.disable()
    wall = time.perf_counter() - started

    rows = pstats.Stats(profiler).stats.items()  # type: ignore[attr-defined]
    # psycopg blocks on the server inside Connection.wait (the C function it calls is not listed
    # apart): one call per round trip, and its own time is the time spent waiting on PostgreSQL.
    waits = [
        row
        for (path, _, name), row in rows
        if name == "wait" and path.endswith(os.path.join("psycopg", "connection.py"))
    ]
    handover = sorted(
        (
            (row[3] / calls * 1e3, f"{Path(path).name}:{name}")
            for (path, _, name), row in rows
            if "handover" in Path(path).parts
        ),
        reverse=True,
    )
    listing = io.StringIO()
    pstats.Stats(profiler, stream=listing).strip_dirs().sort_stats("tottime").print_stats(12)
    top = listing.getvalue()
    return {
        "calls": calls,
        "sql_statements_per_call": len(statements),
        "sql_statements": statements,
        "transactions_per_call": statements.count("BEGIN") or None,
        "round_trips_per_call": sum(row[1] for row in waits) / calls,
        "profiled_ms_per_call": wall / calls * 1e3,
        "waiting_on_db_ms_per_call": sum(row[2] for row in waits) / calls * 1e3,
        "handover_cumulative_ms_per_call": {name: ms for ms, name in handover[:8]},
        "top_by_tottime": top[top.index("   ncalls") :] if "   ncalls" in top else top,
    }


# --- the run ----------------------------------------------------------------------------------


def gunicorn_configuration() -> dict[str, Any]:
    """Production's gunicorn settings (config/gunicorn.conf.py, read as gunicorn reads it, with
    this process's environment), which the server is started with."""
    namespace: dict[str, Any] = {"__file__": str(GUNICORN_CONF)}
    exec(compile(GUNICORN_CONF.read_text(), str(GUNICORN_CONF), "exec"), namespace)  # noqa: S102
    return {name: namespace[name] for name in ("worker_class", "threads", "keepalive")}


def truncate_bench_tables(database: str) -> None:
    from django.db import connection

    from journal.models import AgentToken, CustomerMessage, Intent, JournalEvent, Membership, Run, Tenant

    tables = [
        m._meta.db_table for m in (JournalEvent, CustomerMessage, Intent, Run, AgentToken, Membership, Tenant)
    ]
    with connection.cursor() as cursor:
        # CASCADE: compensations, fan-outs and audit rows reference runs and intents too. The
        # audit trail refuses TRUNCATE to everyone (its triggers); a superuser's session in
        # replica mode fires none, and the benchmarks run as one on a database of their own.
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute("TRUNCATE " + ", ".join(connection.ops.quote_name(t) for t in tables) + " CASCADE")
        finally:
            cursor.execute("RESET session_replication_role")
    progress(f"emptied the journal tables of {database}")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    # Every call of a round goes to one long run: no per-run intent limit (0) here, or the rounds
    # would stop at SEAM_MAX_INTENTS_PER_RUN.
    os.environ["SEAM_MAX_INTENTS_PER_RUN"] = "0"
    database_url = setup_django(args.database)

    from django.db import connection

    from journal import services
    from journal.models import AgentToken, Tenant

    slug = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    tenant = Tenant.objects.create(slug=slug, name=f"Benchmark {slug}")
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="bench-rest", digest=AgentToken.digest_of(secret))
    rest_actor = services.Actor.system("bench-setup")
    rest_runs = [
        str(bench_run(tenant, rest_actor).pk)
        for _ in range(args.clients + 1)  # one for the lone client, one per concurrent client
    ]
    server_version = connection.pg_version

    floor = Floor(tenant)
    statements = JournalStatements(tenant)
    in_process = InProcess(tenant)
    minimal_table = MinimalTable()  # last: from here on, `finally` drops its scratch table
    series = {
        "floor": Series("floor: raw psycopg, same 2 writes"),
        "minimal_table": Series("reference: same 2 writes, minimal table"),
        "statements": Series("journal's 2 statements, raw psycopg"),
        "journal": Series("journal: services.perform, in process"),
        "floor_beside_rest": Series("floor, beside REST"),
        "rest_1": Series("REST: intent + outcome POST, 1 client"),
        f"rest_{args.clients}": Series(f"REST: intent + outcome POST, {args.clients} clients"),
    }
    if args.dbos:
        series["journal_beside_dbos"] = Series("journal: services.perform, beside DBOS")
        series["dbos"] = Series("DBOS: workflow + 1 step, in process")
    peer: Any = None
    profile: dict[str, Any] | None = None
    dbos_rows: dict[str, int] | None = None
    dbos_calls = 0
    warmup = max(20, args.calls // 4)
    try:
        with gunicorn_server(
            database_url=database_url,
            workers=args.workers,
            worker_class=args.worker_class,
            threads=args.threads,
            conn_max_age=args.server_conn_max_age,
        ) as (base, server):
            # An authenticated read of a bench run: the server is up, sees the bench database and
            # accepts the token.
            wait_until_serving(
                base,
                server,
                f"/api/v1/runs/{rest_runs[0]}/",
                headers={"Authorization": f"Bearer {secret}"},
                what="serve the bench run",
            )
            one = [RestClient(base, secret, rest_runs[0])]
            many = [RestClient(base, secret, run_id) for run_id in rest_runs[1:]]
            # The in-process measurements are short (a round of 150 calls takes a fraction of a
            # second), so they get many rounds of their own, alternating, and the floor ratios are
            # medians over many pairs; the REST rounds, seconds each, run after them.
            in_process_runners: dict[str, Callable[[], Sample]] = {
                "floor": lambda: floor.run(args.calls),
                "minimal_table": lambda: minimal_table.run(args.calls),
                "statements": lambda: statements.run(args.calls),
                "journal": lambda: in_process.run(args.calls),
            }
            # The floor again beside REST, so that REST's ratio pairs each round with the floor
            # measured next to it (REST's rounds come after the in-process ones, when the
            # machine's speed may have drifted: two runs on one machine put REST at 4.3 and 5.8 x
            # a floor measured apart).
            rest_runners: dict[str, Callable[[], Sample]] = {
                "floor_beside_rest": lambda: floor.run(args.calls),
                "rest_1": lambda: rest_round(one, args.calls),
                f"rest_{args.clients}": lambda: rest_round(many, args.calls),
            }
            checkpoint_first(connection)
            progress(f"warming up ({warmup} calls each)")
            floor.run(warmup)
            minimal_table.run(warmup)
            statements.run(warmup)
            in_process.run(warmup)
            run_rounds(series, in_process_runners, args.rounds)
            # REST warms up only now: the in-process rounds can outlast the server's keep-alive
            # (75 s), which would close connections opened before them (a broken pipe on the
            # first REST call).
            rest_round(one, warmup)
            rest_round(many, max(warmup, 4 * args.clients))  # every worker, every client
            run_rounds(series, rest_runners, args.rest_rounds)
            for client in [*one, *many]:
                client.close()
        if args.dbos:
            # Last, and only now launched: DBOS runs background threads (queue and notification
            # polling) in this process, which would slow the Python-heavy journal more than the
            # floors. So the floors are measured without them, and DBOS is compared with the
            # journal measured beside it, in rounds of their own.
            from bench.dbos_peer import DbosPeer

            progress(f"launching DBOS Transact against {args.dbos_database}")
            try:
                peer = DbosPeer(database_url, database=args.dbos_database)
            except RuntimeError as exc:
                raise BenchError(str(exc)) from exc
            series["dbos"].name = f"DBOS {peer.version}: workflow + 1 step, in process"
            timed_loop(warmup, peer.call)
            peer_runners: dict[str, Callable[[], Sample]] = {
                "journal_beside_dbos": lambda: in_process.run(args.calls),
                "dbos": lambda: timed_loop(args.calls, peer.call),
            }
            run_rounds(series, peer_runners, args.rest_rounds)
        if args.profile:
            progress("profiling in-process calls")
            profile = profile_in_process(in_process, args.calls)
        expected = next(in_process.counter)
        if in_process.calls_made() != expected:
            raise BenchError(f"{expected} in-process calls made, {in_process.calls_made()} intents performed")
        if peer is not None:
            dbos_rows = peer.rows_written()
            dbos_calls = next(peer.counter)
            if dbos_rows["operation_outputs"] != dbos_calls:
                raise BenchError(
                    f"{dbos_calls} DBOS calls made, {dbos_rows['operation_outputs']} steps recorded"
                )
        expected = next(floor.counter)
        if floor.calls_made() != expected:
            raise BenchError(f"{expected} floor calls made, {floor.calls_made()} intents performed")
    finally:
        floor.close()
        minimal_table.close()
        statements.close()
        if peer is not None:
            peer.close()
        if "bench" in args.database and not args.keep_rows:
            try:
                truncate_bench_tables(args.database)
            except Exception as exc:  # never hide the error that brought us here
                progress(f"could not empty the handover tables of {args.database}: {exc}")

    summaries = {name: s.summary() for name, s in series.items()}
    over_floor = ratio_of_means(series["journal"], series["floor"])
    rest_1_over_floor = ratio_of_means(series["rest_1"], series["floor_beside_rest"])
    rest_many_calls_per_s = summaries[f"rest_{args.clients}"]["calls_per_s"]
    gunicorn = gunicorn_configuration()
    from django.conf import settings

    db = settings.DATABASES["default"]
    return {
        "database": f"{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}/{db['NAME']}",
        "postgresql": f"{server_version // 10000}.{server_version % 10000}",
        "calls_per_round": args.calls,
        "rounds": args.rounds,
        "rest_rounds": args.rest_rounds,
        "settings": os.environ["DJANGO_SETTINGS_MODULE"],
        "server": {
            "workers": args.workers,
            "threads": args.threads or gunicorn["threads"],
            "worker_class": args.worker_class or gunicorn["worker_class"],
            "keepalive_s": gunicorn["keepalive"],
            "configuration": "config/gunicorn.conf.py"
            + (" (worker class or threads overridden)" if args.worker_class or args.threads else ""),
            # The server's, set through DJANGO_CONN_MAX_AGE; 0 would mean a new PostgreSQL
            # connection for every request, which the REST figures would pay.
            "conn_max_age": args.server_conn_max_age,
        },
        "labels": {name: s.name for name, s in series.items()},
        "figures": summaries,
        # Issue 21's targets in the shape bench/report.py gathers into make bench's summary.
        "targets": [
            {
                "name": "journal in process / the floor (raw psycopg, the same two writes)",
                "value": over_floor,
                "bound": f"<= {TARGET_RATIO}",
                "met": over_floor <= TARGET_RATIO,
            },
            {
                "name": "REST intent + outcome, 1 client / the floor",
                "value": rest_1_over_floor,
                "bound": f"<= {REST_1_TARGET_OVER_FLOOR}",
                "met": rest_1_over_floor <= REST_1_TARGET_OVER_FLOOR,
            },
            {
                "name": f"REST, {args.clients} clients: calls/s / {REST_MANY_BASELINE_CALLS_PER_S} "
                "(the calls/s before issue 21)",
                "value": rest_many_calls_per_s / REST_MANY_BASELINE_CALLS_PER_S,
                "bound": f">= {REST_MANY_TARGET_OVER_BASELINE}",
                "met": rest_many_calls_per_s
                >= REST_MANY_TARGET_OVER_BASELINE * REST_MANY_BASELINE_CALLS_PER_S,
            },
        ],
        "target": TARGET_RATIO,
        # The target: the journal against raw psycopg making the same two writes (the INSERT of
        # the intent, the UPDATE to its outcome) on the same table.
        "journal_over_floor": over_floor,
        "target_met": over_floor <= TARGET_RATIO,
        # The gap split in two (each a median of paired ratios, so they need not multiply to
        # journal_over_floor exactly): the journal's statements raw (what the journal events cost
        # PostgreSQL and the driver), then perform over them (Seam's Python).
        "statements_over_floor": ratio_of_means(series["statements"], series["floor"]),
        "journal_over_statements": ratio_of_means(series["journal"], series["statements"]),
        # For reference, not a target: the same two writes on a minimal table of the same shape,
        # i.e. what journal_intent's indexes and constraints (which the sweep, the queue and the
        # key's uniqueness need) cost, and the journal measured against that table.
        "floor_over_minimal_table": ratio_of_means(series["floor"], series["minimal_table"]),
        "journal_over_minimal_table": ratio_of_means(series["journal"], series["minimal_table"]),
        "rest_1_over_floor": rest_1_over_floor,
        "rest_1_target_over_floor": REST_1_TARGET_OVER_FLOOR,
        "rest_1_target_met": rest_1_over_floor <= REST_1_TARGET_OVER_FLOOR,
        "rest_clients": args.clients,
        "rest_many_calls_per_s": rest_many_calls_per_s,
        "rest_many_baseline_calls_per_s": REST_MANY_BASELINE_CALLS_PER_S,
        "rest_many_over_baseline": rest_many_calls_per_s / REST_MANY_BASELINE_CALLS_PER_S,
        "rest_many_target_over_baseline": REST_MANY_TARGET_OVER_BASELINE,
        "rest_many_target_met": (
            rest_many_calls_per_s >= REST_MANY_TARGET_OVER_BASELINE * REST_MANY_BASELINE_CALLS_PER_S
        ),
        "rest_1_over_journal": ratio_of_medians(series["rest_1"], series["journal"]),
        # The peer: below 1, the journal records a call faster than DBOS records a workflow of one
        # step on the same server.
        "journal_over_dbos": ratio_of_means(series["journal_beside_dbos"], series["dbos"]) if peer else None,
        "journal_faster_than_dbos": (
            (ratio_of_means(series["journal_beside_dbos"], series["dbos"]) < 1) if peer else None
        ),
        "dbos_over_floor": ratio_of_medians(series["dbos"], series["floor"]) if peer else None,
        "dbos": (
            {
                "version": peer.version,
                "database": args.dbos_database,
                "unit": "one workflow with one no-op @DBOS.step() per recorded call",
                "rows_per_call": sum(dbos_rows.values()) / dbos_calls if dbos_rows else None,
                "rows": dbos_rows,
            }
            if peer
            else None
        ),
        "profile": profile,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"Seam journal benchmark: PostgreSQL {result['postgresql']} at {result['database']}",
        f"{result['rounds']} alternating rounds in process, then {result['rest_rounds']} of REST, "
        f"of {result['calls_per_round']} calls each; figures are medians over the rounds",
        "own CPU: this process's CPU time per call (Python and driver; for REST, the clients only)",
        "",
        f"{'measurement':<46}{'mean ms':>9}{'p50 ms':>9}{'p99 ms':>9}{'calls/s':>10}{'own CPU ms':>12}",
        "-" * 95,
    ]
    for name, figures in result["figures"].items():
        lines.append(
            f"{result['labels'][name]:<46}{figures['mean_ms']:>9.3f}{figures['p50_ms']:>9.3f}"
            f"{figures['p99_ms']:>9.3f}{figures['calls_per_s']:>10.0f}{figures['own_cpu_ms']:>12.3f}"
        )

    def met(key: str) -> str:
        return "met" if result[key] else "NOT met"

    target = f"target <= {result['target']:.1f}"
    server = result["server"]
    lines += [
        "",
        "journal (in process) / floor:",
        f"  {'vs the same two writes on journal_intent, raw psycopg:':<59}"
        f"{result['journal_over_floor']:5.2f}   {target}: {met('target_met')}",
        f"  breakdown: the journal's statements raw / floor {result['statements_over_floor']:.2f} "
        f"(the journal events) x journal / its statements {result['journal_over_statements']:.2f} "
        "(Seam's Python)",
        f"  reference, no target: floor / the same writes on a minimal table "
        f"{result['floor_over_minimal_table']:.2f} (journal_intent's indexes and constraints); "
        f"journal / minimal table {result['journal_over_minimal_table']:.2f}",
        f"REST, 1 client / the floor: {result['rest_1_over_floor']:.2f}   "
        f"target <= {result['rest_1_target_over_floor']:.0f}: {met('rest_1_target_met')}",
        f"REST, {result['rest_clients']} clients calls/s: {result['rest_many_calls_per_s']:.0f} = "
        f"{result['rest_many_over_baseline']:.2f} x {result['rest_many_baseline_calls_per_s']:.0f} (the "
        f"baseline before issue 21)   target >= {result['rest_many_target_over_baseline']:.0f} x: "
        f"{met('rest_many_target_met')}",
        f"REST 1 client / journal: {result['rest_1_over_journal']:.2f}",
        *(
            [
                f"journal / DBOS {result['dbos']['version']} per recorded call: "
                f"{result['journal_over_dbos']:.2f}   target < 1 (faster than DBOS): "
                f"{'met' if result['journal_faster_than_dbos'] else 'NOT met'}",
                f"DBOS / floor: {result['dbos_over_floor']:.2f}; DBOS writes "
                f"{result['dbos']['rows_per_call']:.1f} rows per call "
                f"({', '.join(f'{t} {n}' for t, n in result['dbos']['rows'].items())}), the journal 3 "
                "(the intent, its two events)",
            ]
            if result.get("dbos")
            else []
        ),
        f"server: gunicorn with {server['configuration']}: {server['workers']} {server['worker_class']} "
        f"workers x {server['threads']} threads, keep-alive {server['keepalive_s']} s, "
        f"{result['settings']}, CONN_MAX_AGE={server['conn_max_age']} (DJANGO_CONN_MAX_AGE)"
        + (
            " (a new database connection per request)"
            if not server["conn_max_age"]
            else " (persistent database connections, as in production)"
        ),
    ]
    profile = result["profile"]
    if profile:
        waiting = profile["waiting_on_db_ms_per_call"]
        journal_mean = result["figures"]["journal"]["mean_ms"]
        journal_cpu = result["figures"]["journal"]["own_cpu_ms"]
        lines += [
            "",
            f"profile of {profile['calls']} in-process calls:",
            f"  SQL per call: {profile['sql_statements_per_call']} statements, "
            f"{profile['transactions_per_call']} transactions: {' '.join(profile['sql_statements'])}",
            f"  round trips to PostgreSQL per call: {profile['round_trips_per_call']:.1f} (each floor makes 2)",
            f"  waiting on PostgreSQL (under cProfile): {waiting:.3f} ms per call, against "
            f"{journal_mean:.3f} ms per call measured above, of which {journal_cpu:.3f} ms own CPU",
            f"  under cProfile a call takes {profile['profiled_ms_per_call']:.3f} ms; "
            "cumulative ms per call in handover/:",
            *(f"    {ms:8.3f}  {name}" for name, ms in profile["handover_cumulative_ms_per_call"].items()),
            "  busiest functions (own time):",
            *(f"  {line}" for line in profile["top_by_tottime"].rstrip().splitlines()),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--calls", type=int, default=150, help="calls per round per measurement (default 150)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=31,
        help="alternating rounds of the in-process measurements (default 31)",
    )
    parser.add_argument("--rest-rounds", type=int, default=9, help="alternating rounds of REST (default 9)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent REST clients (default 8)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers (default 4)")
    parser.add_argument(
        "--worker-class",
        choices=["sync", "gthread"],
        default=None,
        help="gunicorn worker class instead of production's (config/gunicorn.conf.py); sync closes "
        "the connection after each response",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="threads per gunicorn worker instead of production's"
    )
    parser.add_argument(
        "--server-conn-max-age",
        type=int,
        default=SERVER_CONN_MAX_AGE,
        help=f"the server's DJANGO_CONN_MAX_AGE; 0 opens a database connection per request "
        f"(default {SERVER_CONN_MAX_AGE}, as production)",
    )
    parser.add_argument("--database", default="seam_bench", help="database to use (default seam_bench)")
    parser.add_argument("--keep-rows", action="store_true", help="leave the run's rows in a bench database")
    parser.add_argument(
        "--no-dbos", dest="dbos", action="store_false", help="leave out the DBOS Transact comparison"
    )
    parser.add_argument(
        "--dbos-database",
        default="seam_bench_dbos",
        help="DBOS's system database, dropped and recreated (default seam_bench_dbos)",
    )
    parser.add_argument("--profile", action="store_true", help="also profile in-process calls with cProfile")
    parser.add_argument("--json", action="store_true", help="print only a JSON object of the figures")
    args = parser.parse_args(argv)
    if (
        args.calls < 10
        or args.rounds < 1
        or args.rest_rounds < 1
        or args.clients < 2
        or args.workers < 1
        or args.server_conn_max_age < 0
        or (args.threads is not None and args.threads < 1)
    ):
        parser.error(
            "need --calls >= 10, --rounds >= 1, --rest-rounds >= 1, --clients >= 2, --workers >= 1, --server-conn-max-age >= 0"
        )
    if args.dbos and "bench" not in args.dbos_database:
        parser.error("DBOS's database is dropped at the end: its name must contain 'bench'")
    if args.calls > 100_000 or args.clients > 64 or args.workers > 32:
        parser.error("counts are bounded: --calls <= 100000, --clients <= 64, --workers <= 32")
    # A terminated benchmark still stops its server and drops its scratch table (`finally`).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        result = measure(args)
    except (BenchError, ProcessFailed) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
