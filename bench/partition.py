"""What monthly partitioning of the journal would cost its hot path and its sweep, measured
before it is built (docs/scaling.md, "Partitioning by month").

One database holds two copies of the journal's two big tables side by side:

- `public.journal_intent` and `public.journal_journalevent`, as the migrations make them;
- `part.journal_intent` and `part.journal_journalevent`, the same columns plus `run_created_at`
  (the run's creation time, copied onto each row), `PARTITION BY RANGE (run_created_at)`, one
  partition per month, every unique key widened by `run_created_at` (PostgreSQL's rule), the
  events' append-only trigger on the parent, and the ids drawn from the same sequences.

The plain tables are seeded (`--months` months of `--runs` runs of ten settled intents and
their two events each, on runs spread over the months) and then copied, every row with its id,
into the partitioned ones by the statement the migration would run (timed: rows per second),
so both copies hold the same rows; then both are measured in alternating rounds, each
call an autocommit statement prepared on the server, as bench/journal.py measures its floor:

- the floor (the journal's two row writes, raw) and the journal's own two statements
  (journal.sql.INSERT_INTENT and SETTLE_INTENT) on the plain tables;
- the same on the partitioned tables, with the statements rewritten as the partitioned schema
  needs them (the run's `created_at` written into `run_created_at`, ON CONFLICT naming
  `(idempotency_key, run_created_at)`, the run-scoped checks and the settle narrowed to the
  run's month so PostgreSQL prunes to one partition), and a variant whose settle names the row by
  id alone (no pruning: every partition's primary key is probed);
- the design's hot path: the same statements naming the current month's partitions instead of
  the parents (`leaf_statements`), raw, and in process (`journal.services.perform` with
  journal.sql's two statements swapped for them for the duration of its rounds, against the
  unswapped in-process journal and the floor);
- the floors and the raw statements again with `synchronous_commit=off` (`_nowait`): their
  CPU and locking without the WAL flush, whose time on a shared machine is other writers' noise;
- the sweep's read of open intents (journal.selectors.stale_intents' shape) on both.

`--extra-months` attaches that many empty partitions after the current month: the parents'
statements pay for every attached partition, the leaves' do not.

Then, on the partitioned copy only: the oldest month exported as gzip'd JSON lines (bytes per
run against the partition's bytes per run) and detached and dropped (timed).

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python -m bench.partition \
        --database seam_bench_partition [--months 12] [--runs 5000] [--extra-months 0] \
        [--calls 300] [--rounds 11]

The database must be a bench database (its name contains "bench"): the `part` schema is
dropped and made again, and the seeded rows are left for inspection (a second run adds its
own to the plain tables, and copies them all)."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import os
import re
import statistics
import sys
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from bench.journal import BenchError, progress, raw_connection, setup_django

TOOL = "bench_tool"
INTENTS_PER_RUN = 10

INTENT_INDEXES = (
    "CREATE INDEX intent_failed_idx ON part.journal_intent (run_id, tool) WHERE status = 'failed'",
    "CREATE INDEX intent_open_idx ON part.journal_intent (intended_at) WHERE status = 'intended'",
    "CREATE INDEX intent_run_order_idx ON part.journal_intent (run_id, intended_at, id)",
    "CREATE INDEX intent_unknown_idx ON part.journal_intent (run_id) WHERE status = 'unknown'",
)
EVENT_INDEXES = (
    "CREATE INDEX journal_run_at_idx ON part.journal_journalevent (run_id, at)",
    "CREATE INDEX journal_run_newest_idx ON part.journal_journalevent (run_id, id)",
    "CREATE INDEX journal_user_idx ON part.journal_journalevent (user_id) WHERE user_id IS NOT NULL",
)


def month_starts(months: int, now: datetime) -> list[datetime]:
    """The first instants of the `months` months ending with the current one, oldest first,
    and the month after (the last partition's upper bound)."""
    first = datetime(now.year, now.month, 1, tzinfo=UTC)
    index = first.year * 12 + first.month - 1
    return [datetime((i // 12), i % 12 + 1, 1, tzinfo=UTC) for i in range(index - months + 1, index + 2)]


def later_bounds(last: datetime, months: int) -> list[datetime]:
    """The `months` month starts after `last` (itself a month start)."""
    index = last.year * 12 + last.month - 1
    return [datetime(i // 12, i % 12 + 1, 1, tzinfo=UTC) for i in range(index + 1, index + 1 + months)]


def create_partitioned(conn: psycopg.Connection[Any], bounds: list[datetime]) -> None:
    """The `part` schema: both tables partitioned by the run's creation month."""
    conn.execute("DROP SCHEMA IF EXISTS part CASCADE")
    conn.execute("CREATE SCHEMA part")
    for table, sequence in (
        ("journal_intent", "handover_intent_id_seq"),
        ("journal_journalevent", "handover_journalevent_id_seq"),
    ):
        conn.execute(
            f"CREATE TABLE part.{table} (LIKE public.{table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
            f"run_created_at timestamptz NOT NULL) PARTITION BY RANGE (run_created_at)"
        )
        conn.execute(f"ALTER TABLE part.{table} ALTER COLUMN id SET DEFAULT nextval('public.{sequence}')")
        conn.execute(f"ALTER TABLE part.{table} ADD PRIMARY KEY (id, run_created_at)")
    conn.execute(
        "ALTER TABLE part.journal_intent ADD CONSTRAINT intent_key_unique UNIQUE (idempotency_key, run_created_at)"
    )
    conn.execute(
        "ALTER TABLE part.journal_intent ADD CONSTRAINT intent_step_per_run UNIQUE (run_id, step_id, run_created_at)"
    )
    conn.execute(
        "ALTER TABLE part.journal_intent ADD FOREIGN KEY (run_id) REFERENCES public.journal_run (id) DEFERRABLE INITIALLY DEFERRED"
    )
    for statement in (*INTENT_INDEXES, *EVENT_INDEXES):
        conn.execute(statement)
    conn.execute(
        "CREATE TRIGGER journal_journalevent_append_only BEFORE UPDATE OR DELETE ON part.journal_journalevent "
        "FOR EACH ROW EXECUTE FUNCTION public.seam_refuse_journal_change()"
    )
    for start, end in itertools.pairwise(bounds):
        for table in ("journal_intent", "journal_journalevent"):
            conn.execute(
                f"CREATE TABLE part.{table}_{start:%Y_%m} PARTITION OF part.{table} "
                f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
            )


def seed(conn: psycopg.Connection[Any], template_run: Any, bounds: list[datetime], runs: int) -> None:
    """`runs` runs per month (cloned from `template_run`, created mid-month), ten settled
    intents each with their two events, written alike into both copies."""
    columns = [
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND table_name = 'journal_run' AND column_name NOT IN ('id', 'created_at', 'external_id', 'status', 'task_type')"
        )
    ]
    names = ", ".join(columns)
    tenant_id = conn.execute(
        "SELECT tenant_id FROM public.journal_run WHERE id = %s", (template_run,)
    ).fetchone()[0]
    for start, end in itertools.pairwise([*bounds[:-1], min(bounds[-1], datetime.now(UTC))]):
        progress(f"seeding {start:%Y-%m}")
        conn.execute(
            f"""INSERT INTO public.journal_run (id, created_at, external_id, status, task_type, {names})
            SELECT gen_random_uuid(), %s::timestamptz + (%s::timestamptz - %s::timestamptz) * (n::float / %s),
                   '', 'completed', 'bench-seed', {names}
            FROM public.journal_run, generate_series(1, %s) AS n WHERE id = %s""",
            (start, end, start, runs + 1, runs, template_run),
        )
        intents = f"""
            SELECT run.id AS run_id, run.created_at, i,
                   encode(sha256((run.id::text || ':' || i)::bytea), 'hex') AS key,
                   run.created_at + i * interval '1 second' AS at
            FROM public.journal_run AS run, generate_series(0, {INTENTS_PER_RUN - 1}) AS i
            WHERE run.created_at >= %s AND run.created_at < %s AND run.task_type = 'bench-seed'
            AND run.tenant_id = %s"""
        conn.execute(
            f"""INSERT INTO public.journal_intent (run_id, step_id, turn, tool, args, occurrence,
                idempotency_key, status, error_class, outcome_summary, receipt, request_id,
                intended_at, settled_at)
            SELECT run_id, run_id || ':' || i || ':{TOOL}', i, '{TOOL}', jsonb_build_object('n', i), 0,
                   key, 'performed', '', '', '{{}}'::jsonb, '', at, at
            FROM ({intents}) AS seeded""",
            (start, end, tenant_id),
        )
        conn.execute(
            """INSERT INTO public.journal_journalevent (run_id, intent_id, kind, actor_kind, actor_name, data, at)
            SELECT intent.run_id, intent.id, kind, 'agent', 'seed',
                   jsonb_build_object('step_id', intent.step_id), intent.intended_at
            FROM public.journal_intent AS intent JOIN public.journal_run AS run ON run.id = intent.run_id,
                 (VALUES ('intent_recorded'), ('outcome_recorded')) AS kinds (kind)
            WHERE run.created_at >= %s AND run.created_at < %s AND run.task_type = 'bench-seed'
            AND run.tenant_id = %s""",
            (start, end, tenant_id),
        )
    # A few calls left open (one run in 256), so the sweep has rows to find in every month.
    conn.execute(
        "UPDATE public.journal_intent SET status = 'intended', settled_at = NULL "
        "WHERE turn = 0 AND left(idempotency_key, 2) = '00'"
    )


def copy_into_partitioned(conn: psycopg.Connection[Any]) -> dict[str, float]:
    """The migration's copy: every row of the plain tables into the partitioned ones, with its
    run's creation time and its own id, as the maintenance window would run it. Rows per second."""
    rates = {}
    for table in ("journal_intent", "journal_journalevent"):
        started = time.perf_counter()
        with conn.transaction():
            copied = conn.execute(
                f"INSERT INTO part.{table} SELECT copied.*, run.created_at FROM public.{table} AS copied "
                "JOIN public.journal_run AS run ON run.id = copied.run_id"
            ).rowcount
        rates[f"{table}_rows_per_s"] = copied / (time.perf_counter() - started)
        progress(f"copied {copied} rows of {table} at {rates[f'{table}_rows_per_s']:.0f} rows/s")
    conn.execute("ANALYZE")
    return rates


def _replaced(text: str, old: str, new: str, count: int = 1) -> str:
    if text.count(old) != count:
        raise BenchError(f"journal.sql changed: {old!r} appears {text.count(old)} times, not {count}")
    return text.replace(old, new)


def partitioned_statements() -> tuple[str, str, str]:
    """journal.sql's INSERT_INTENT and SETTLE_INTENT as the partitioned tables need them: the
    insert (run_created_at from the run row it already reads, its run-scoped checks and its
    ON CONFLICT within the run's month), the settle by id and month (pruned to one partition),
    and the settle by id alone (every partition probed)."""
    from journal import sql as journal_sql

    events = f"({journal_sql._EVENT_COLUMNS})"
    insert = journal_sql.INSERT_INTENT
    insert = _replaced(insert, "(run_id, step_id,", "(run_id, run_created_at, step_id,")
    insert = _replaced(insert, "SELECT run.id, ", "SELECT run.id, run.created_at, ")
    insert = _replaced(
        insert,
        "recorded.run_id = run.id",
        "recorded.run_id = run.id AND recorded.run_created_at = run.created_at",
    )
    insert = _replaced(
        insert, "failed.run_id = run.id", "failed.run_id = run.id AND failed.run_created_at = run.created_at"
    )
    insert = _replaced(
        insert, "ON CONFLICT (idempotency_key)", "ON CONFLICT (idempotency_key, run_created_at)"
    )
    insert = _replaced(
        insert, "idempotency_key, intended_at\n)", "idempotency_key, intended_at, run_created_at\n)"
    )
    insert = _replaced(insert, events, events[:-1] + ", run_created_at)")
    insert = _replaced(insert, "intended_at\nFROM inserted", "intended_at, run_created_at\nFROM inserted")
    settle = journal_sql.SETTLE_INTENT
    settle = _replaced(settle, "settled_at\n)", "settled_at, run_created_at\n)")
    settle = _replaced(settle, events, events[:-1] + ", run_created_at)")
    settle = _replaced(settle, "settled_at\nFROM settled", "settled_at, run_created_at\nFROM settled")
    pruned = _replaced(
        settle, "WHERE id = %s::bigint", "WHERE id = %s::bigint AND run_created_at = %s::timestamptz"
    )
    return insert, pruned, settle


def leaf_statements(statements: tuple[str, str], month: datetime) -> tuple[str, str]:
    """The partitioned insert and the settle by id, naming `month`'s partitions instead of the
    parents: the design's hot path (docs/scaling.md)."""
    suffix = f"_{month:%Y_%m}"
    return tuple(  # type: ignore[return-value]
        re.sub(
            r"\bjournal_journalevent\b",
            "journal_journalevent" + suffix,
            re.sub(r"\bjournal_intent\b", "journal_intent" + suffix, text),
        )
        for text in statements
    )


class InProcess:
    """`journal.services.perform` with a no-op dispatch (bench/journal.py's), on the plain tables
    or, `statements` given, with journal.sql's two statements swapped for them and the `part`
    schema first on Django's connection for the duration of each round."""

    def __init__(self, name: str, tenant: Any, statements: tuple[str, str] | None = None) -> None:
        from bench.journal import InProcess as JournalInProcess

        self.name, self.inner, self.statements = name, JournalInProcess(tenant), statements

    def run(self, calls: int) -> float:
        from django.db import connection

        from journal import sql as journal_sql

        plain = (journal_sql.INSERT_INTENT, journal_sql.SETTLE_INTENT)
        if self.statements is not None:
            journal_sql.INSERT_INTENT, journal_sql.SETTLE_INTENT = self.statements
            with connection.cursor() as cursor:
                cursor.execute("SET search_path = part, public")
        try:
            sample = self.inner.run(calls)
        finally:
            journal_sql.INSERT_INTENT, journal_sql.SETTLE_INTENT = plain
            with connection.cursor() as cursor:
                cursor.execute("SET search_path = public")
        return sample.wall / calls * 1000


class Writer:
    """One measured path: two autocommit statements per call, on a run of its own, with the
    `part` schema first on the search path when `partitioned`."""

    ACTOR: dict[str, Any] = {"actor_kind": "agent", "actor_name": "bench-partition", "user_id": None}

    def __init__(
        self,
        name: str,
        tenant: Any,
        *,
        partitioned: bool,
        journal: tuple[str, str] | None,
        pruned: bool = False,
        durable: bool = True,
    ) -> None:
        from bench.journal import bench_run
        from journal import services

        self.name = name
        run = bench_run(tenant, services.Actor.system(f"bench-partition-{name}"))
        self.run_id, self.run_created_at = run.pk, run.created_at
        self.conn = raw_connection()
        self.conn.execute("SET search_path = part, public" if partitioned else "SET search_path = public")
        # Not durable: the commit does not wait for the WAL flush, so what is left is the
        # statements' CPU and locking, without the disk's noise (other writers' fsyncs).
        self.conn.execute("SET synchronous_commit = " + ("on" if durable else "off"))
        self.partitioned, self.journal, self.pruned = partitioned, journal, pruned
        self.counter = itertools.count()

    def call(self) -> None:
        n = next(self.counter)
        key = hashlib.sha256(f"{self.name}:{self.run_id}:{n}".encode()).hexdigest()
        step_id = f"{self.run_id}:{n}:{TOOL}"
        if self.journal is None:
            self._floor(n, key, step_id)
        else:
            self._journal(n, key, step_id)

    def _floor(self, n: int, key: str, step_id: str) -> None:
        extra, value = (", run_created_at", ", %s") if self.partitioned else ("", "")
        params: tuple[Any, ...] = (self.run_id, step_id, n, TOOL, Jsonb({"n": n}), key)
        if self.partitioned:
            params = (*params, self.run_created_at)
        row = self.conn.execute(
            "INSERT INTO journal_intent (run_id, step_id, turn, tool, args, occurrence, idempotency_key, "
            f"status, error_class, outcome_summary, receipt, request_id, intended_at{extra}) "
            f"VALUES (%s, %s, %s, %s, %s, 0, %s, 'intended', '', '', '{{}}'::jsonb, '', now(){value}) RETURNING id",
            params,
            prepare=True,
        ).fetchone()
        assert row is not None
        where, params = (
            ("id = %s AND run_created_at = %s", (row[0], self.run_created_at))
            if self.partitioned
            else ("id = %s", (row[0],))
        )
        updated = self.conn.execute(
            "UPDATE journal_intent SET status = 'performed', error_class = '', outcome_summary = '', "
            f"receipt = '{{}}'::jsonb, request_id = '', settled_at = now() WHERE {where} AND status = 'intended'",
            params,
            prepare=True,
        ).rowcount
        if updated != 1:
            raise BenchError(f"{self.name}: the UPDATE of intent {row[0]} touched {updated} rows")

    def _journal(self, n: int, key: str, step_id: str) -> None:
        from journal import sql as journal_sql

        assert self.journal is not None
        insert, settle = self.journal
        now = datetime.now(UTC)
        params = journal_sql.insert_intent_params(
            run_id=self.run_id,
            step_id=step_id,
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
        row = self.conn.execute(insert, params, prepare=True).fetchone()
        if row is None:
            raise BenchError(f"{self.name}: intent {n} was not inserted")
        settled = journal_sql.settled_columns(
            status="performed", error_class="", summary="", receipt_json="{}", request_id="", now=now
        )
        which = (row[0], self.run_created_at) if self.pruned else (row[0],)
        params = (*settled, *which, "intended", *self.ACTOR.values())
        if self.conn.execute(settle, params, prepare=True).fetchone() is None:
            raise BenchError(f"{self.name}: the settle of intent {row[0]} changed nothing")

    def run(self, calls: int) -> float:
        started = time.perf_counter()
        for _ in range(calls):
            self.call()
        return (time.perf_counter() - started) / calls * 1000


SWEEP = (
    "SELECT id FROM journal_intent WHERE status = 'intended' AND intended_at < %s "
    "AND (next_lookup_at IS NULL OR next_lookup_at <= %s) ORDER BY intended_at, id LIMIT 100"
)


class Sweep:
    """The sweep's read of the oldest open intents (stale_intents' shape), on either copy."""

    def __init__(self, name: str, *, partitioned: bool) -> None:
        self.name = name
        self.conn = raw_connection()
        self.conn.execute("SET search_path = part, public" if partitioned else "SET search_path = public")

    def run(self, calls: int) -> float:
        started = time.perf_counter()
        for _ in range(calls):
            now = datetime.now(UTC)
            self.conn.execute(SWEEP, (now, now), prepare=True).fetchall()
        return (time.perf_counter() - started) / calls * 1000


def measure_rounds(runners: list[Any], calls: int, rounds: int) -> dict[str, list[float]]:
    """Each runner's mean ms per call in each round, the order reversed every other round."""
    for runner in runners:  # warm up: prepared statements, caches
        runner.run(max(calls // 5, 10))
    per_round: dict[str, list[float]] = {runner.name: [] for runner in runners}
    for index in range(rounds):
        order = runners if index % 2 == 0 else runners[::-1]
        progress(f"round {index + 1}/{rounds}")
        for runner in order:
            per_round[runner.name].append(runner.run(calls))
    return per_round


def paired(per_round: dict[str, list[float]], numerator: str, denominator: str) -> float:
    return statistics.median(a / b for a, b in zip(per_round[numerator], per_round[denominator], strict=True))


def archive_and_drop(conn: psycopg.Connection[Any], month: datetime) -> dict[str, Any]:
    """The month's partitions exported as gzip'd JSON lines (checked against the row counts),
    then detached and dropped in one transaction, timed."""
    suffix = f"{month:%Y_%m}"
    runs = conn.execute(
        "SELECT count(DISTINCT run_id) FROM part.journal_intent WHERE run_created_at >= %s AND run_created_at < %s + interval '1 month'",
        (month, month),
    ).fetchone()[0]
    figures: dict[str, Any] = {"month": f"{month:%Y-%m}", "runs": runs}
    live = archived = 0
    for table in ("journal_intent", "journal_journalevent"):
        partition = f"part.{table}_{suffix}"
        live += conn.execute(f"SELECT pg_total_relation_size('{partition}')").fetchone()[0]
        rows = conn.execute(f"SELECT count(*) FROM {partition}").fetchone()[0]
        query = f"COPY (SELECT row_to_json(r) FROM {partition} AS r ORDER BY id) TO STDOUT"
        with conn.cursor().copy(query) as copy:
            buffer = gzip.compress(b"".join(bytes(chunk) for chunk in copy))
        lines = gzip.decompress(buffer).count(b"\n")
        if lines != rows:
            raise BenchError(f"{partition}: archived {lines} lines for {rows} rows")
        archived += len(buffer)
        figures[f"{table}_rows"] = rows
    started = time.perf_counter()
    with conn.transaction():
        for table in ("journal_intent", "journal_journalevent"):
            conn.execute(f"ALTER TABLE part.{table} DETACH PARTITION part.{table}_{suffix}")
            conn.execute(f"DROP TABLE part.{table}_{suffix}")
    figures["drop_ms"] = (time.perf_counter() - started) * 1000
    figures["live_bytes_per_run"] = live / runs
    figures["archive_bytes_per_run"] = archived / runs
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", default="seam_bench_partition")
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--runs", type=int, default=5000, help="seeded runs per month (ten intents each)")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument(
        "--extra-months", type=int, default=0, help="empty partitions attached after the current month"
    )
    args = parser.parse_args(argv)
    # bench/journal.py's single long runs would stop at SEAM_MAX_INTENTS_PER_RUN; so would these.
    os.environ["SEAM_MAX_INTENTS_PER_RUN"] = "0"
    if "bench" not in args.database:
        raise BenchError("--database must name a bench database (its name contains 'bench')")
    setup_django(args.database)
    from journal import services
    from journal.models import Tenant

    now = datetime.now(UTC)
    bounds = month_starts(args.months, now)
    conn = raw_connection()
    # Seeded months, then empty ones ahead (how many partitions are attached is what the parent's
    # statements pay for).
    create_partitioned(conn, bounds + later_bounds(bounds[-1], args.extra_months))
    tenant = Tenant.objects.create(slug=f"bench-partition-{int(time.time())}", name="bench partition")
    from bench.journal import bench_run

    template = bench_run(tenant, services.Actor.system("bench-partition-seed")).pk
    seed(conn, template, bounds, args.runs)
    copy_rates = copy_into_partitioned(conn)
    insert, pruned, by_id = partitioned_statements()
    from journal import sql as journal_sql

    plain = (journal_sql.INSERT_INTENT, journal_sql.SETTLE_INTENT)
    runners: list[Any] = [
        Writer("floor", tenant, partitioned=False, journal=None),
        Writer("journal", tenant, partitioned=False, journal=plain),
        Writer("part_floor", tenant, partitioned=True, journal=None),
        Writer("part_journal", tenant, partitioned=True, journal=(insert, pruned), pruned=True),
        Writer("part_journal_by_id", tenant, partitioned=True, journal=(insert, by_id)),
        Writer("part_journal_leaf", tenant, partitioned=True, journal=leaf_statements((insert, by_id), now)),
        InProcess("in_process", tenant),
        InProcess("in_process_leaf", tenant, leaf_statements((insert, by_id), now)),
        Writer("floor_nowait", tenant, partitioned=False, journal=None, durable=False),
        Writer("journal_nowait", tenant, partitioned=False, journal=plain, durable=False),
        Writer("part_floor_nowait", tenant, partitioned=True, journal=None, durable=False),
        Writer(
            "part_journal_nowait",
            tenant,
            partitioned=True,
            journal=(insert, pruned),
            pruned=True,
            durable=False,
        ),
        Writer(
            "part_journal_leaf_nowait",
            tenant,
            partitioned=True,
            journal=leaf_statements((insert, by_id), now),
            durable=False,
        ),
        Sweep("sweep", partitioned=False),
        Sweep("part_sweep", partitioned=True),
    ]
    per_round = measure_rounds(runners, args.calls, args.rounds)
    result: dict[str, Any] = {
        "months": args.months,
        "partitions": args.months + args.extra_months,
        "intents_in_each_copy": conn.execute("SELECT count(*) FROM part.journal_intent").fetchone()[0],
        "ms_per_call": {name: statistics.median(values) for name, values in per_round.items()},
        "journal_over_floor": paired(per_round, "journal", "floor"),
        "part_journal_over_part_floor": paired(per_round, "part_journal", "part_floor"),
        "part_journal_over_journal": paired(per_round, "part_journal", "journal"),
        "part_floor_over_floor": paired(per_round, "part_floor", "floor"),
        "part_journal_by_id_over_part_journal": paired(per_round, "part_journal_by_id", "part_journal"),
        "nowait_journal_over_floor": paired(per_round, "journal_nowait", "floor_nowait"),
        "nowait_part_journal_over_part_floor": paired(per_round, "part_journal_nowait", "part_floor_nowait"),
        "nowait_part_journal_over_journal": paired(per_round, "part_journal_nowait", "journal_nowait"),
        "nowait_part_floor_over_floor": paired(per_round, "part_floor_nowait", "floor_nowait"),
        "part_journal_leaf_over_journal": paired(per_round, "part_journal_leaf", "journal"),
        "nowait_part_journal_leaf_over_journal": paired(
            per_round, "part_journal_leaf_nowait", "journal_nowait"
        ),
        "in_process_over_floor": paired(per_round, "in_process", "floor"),
        "in_process_leaf_over_floor": paired(per_round, "in_process_leaf", "floor"),
        "in_process_leaf_over_in_process": paired(per_round, "in_process_leaf", "in_process"),
        "part_sweep_over_sweep": paired(per_round, "part_sweep", "sweep"),
        "copy": copy_rates,
        "archive": archive_and_drop(conn, bounds[0]),
    }
    result["ms_per_round"] = per_round
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
