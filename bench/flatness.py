"""Flat from one month to twelve: the journal's hot path, the sweep and the queue on a journal of
10,000,000 intents in one monthly partition against one of 30,000,000 across twelve
(docs/scaling.md, "Partitioning by month"; issue 34, item 3). Then a month archived and dropped.

Two databases on the server DATABASE_URL names, migrated and seeded with SQL the first time
(reused while they hold the volume; a month missing from the twelve is seeded again):

- `seam_bench_flat_one`: 1,000,000 runs created this month, ten intents each, every one in this
  month's partitions;
- `seam_bench_flat_twelve`: 3,000,000 runs spread evenly over the last twelve months (this one
  included), 250,000 a month.

Each run has ten intents with an `intent_recorded` and an `outcome_recorded` event, and a
`run_created` event. Both hold the same trouble in the same numbers, spread over the runs of the
last three months (older runs have all ended): 10,000 runs escalated and awaiting a person (the
last call's outcome unknown, an open escalation) and 2,000 running runs gone quiet with their
last call open (the sweep's rows).
Seeded as bench/pages.py seeds: one transaction, secondary indexes dropped and built after,
then VACUUM ANALYZE.

Measured in alternating rounds (the order reversed every other round), each round a fresh
process on one database (`--measure LAYOUT`), so both pay the same cold start:

- the hot path: `journal.services.perform` on a run created now (bench/journal.py's in-process
  runner), which writes this month's partitions;
- the sweep's read: `journal.selectors.stale_intents`, its first batch, read as reconciliation's
  claim reads it (`read_prepared`);
- the queue's first page: `console.selectors.queue_runs`, 50 runs, with their badges
  (`queue_rows`), as the queue page reads them.

Each figure is the median of a round's timings; the ratio twelve / one is paired by round, and
its median over rounds is the result. Target: each at most 1.10. 21 rounds: one round's ratio
for the queue ran from 0.79 to 1.39 on a quiet machine (fresh processes differ that much), so
the median of the 7 rounds this took before moved from 0.94 to 1.13 between three runs of the
same code (docs/performance-history.md), too coarse for a bound of 10 %.

Then, on the twelve-month database, the oldest month: 20,000 of its runs archived by the
retention job's own batches (`retention.services.archive_batch`: file, digest, read back, marked,
audited; its throughput), the rest marked archived directly, the archive's bytes per run against
the month's partitions' bytes per run, and its drop timed in its two steps (journal migration
0023): the detach, the time the journal's tables are held (target: under a second), and the
discard that frees the month's files, which takes the filesystem's time for their bytes and holds
nothing the journal uses. Until the split, one DROP held the journal's tables while the files were
freed: 0.51 to 1.30 s over a dozen runs, a coin toss against the bound. The next run seeds that
month again.

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python -m bench.flatness [--json]
        [--rounds 21] [--calls 300] [--scale 1.0]

`--scale` multiplies the runs (0.01 for a quick look; the targets then say they were not
measured at volume)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from bench.journal import (
    DEFAULT_DATABASE_URL,
    BenchError,
    InProcess,
    ensure_database,
    progress,
    with_database,
)
from bench.pages import SECONDARY_INDEXES, index_on_every_partition

LAYOUTS = {"one": 1, "twelve": 12}
RUNS_PER_MONTH = {"one": 1_000_000, "twelve": 250_000}
INTENTS_PER_RUN = 10
QUEUED = 10_000
STUCK = 2_000
TROUBLED_MONTHS = 3
ARCHIVE_SAMPLE_RUNS = 20_000
ARCHIVE_BATCH = 500  # retention.services.ARCHIVE_BATCH_RUNS
TENANT_SLUG = "bench-flat"
FLAT_TARGET = 1.10
DROP_TARGET_SECONDS = 1.0
BULK_TABLES = ["journal_run", "journal_intent", "journal_journalevent", "journal_escalation"]

# One row per run of the month being seeded: what it is. `g` numbers the runs of the layout.
SEED_TABLE = """
CREATE TEMP TABLE flat_seed ON COMMIT DROP AS
SELECT g, md5('flat-run:' || %(tag)s::bigint || ':' || g)::uuid AS run_id,
       %(start)s::timestamptz + (%(end)s::timestamptz - %(start)s::timestamptz)
           * ((g - %(first)s::int)::float8 / %(count)s::int) AS created,
       CASE WHEN NOT %(troubled)s THEN 'completed'
            WHEN g %% %(queued_every)s::int = 0 THEN 'escalated'
            WHEN g %% %(stuck_every)s::int = 1 THEN 'running'
            ELSE 'completed' END AS status
FROM generate_series(%(first)s::int, %(first)s::int + %(count)s::int - 1) AS g
"""

INSERT_RUNS = """
INSERT INTO journal_run (
    id, tenant_id, external_id, task_type, ticket_id, order_id, status, deadline, schema_version,
    flow_version, policy_version, capability_version, plan, last_heartbeat_at, created_at,
    updated_at, version, outcome_reason, outcome_detail, ended_at, retries, repairs, replans,
    reflections, escalations, assignee_id, awaiting_person)
SELECT run_id, %(tenant)s, 'flat-' || %(tag)s::bigint || '-' || g, 'returns', 'T-' || g, 'SU-' || g, status, NULL, '1', '1', '1',
       '1', '[]'::jsonb, created + interval '30 seconds', created, created + interval '1 minute', 2,
       CASE WHEN status = 'escalated' THEN 'unknown_outcome' ELSE '' END, '',
       CASE WHEN status <> 'running' THEN created + interval '1 minute' END, 0, 0, 0, 0,
       (status = 'escalated')::int, NULL, status = 'escalated'
FROM flat_seed ORDER BY g
"""

INSERT_INTENTS = f"""
INSERT INTO journal_intent (
    run_id, run_created_at, step_id, turn, tool, args, occurrence, idempotency_key, status, error_class,
    outcome_summary, receipt, request_id, intended_at, settled_at, lookup_attempts,
    last_lookup_error, next_lookup_at, unknown_reason, verdict)
SELECT s.run_id, s.created, s.run_id::text || ':' || t || ':issue_refund', t, 'issue_refund',
       jsonb_build_object('order_id', 'SU-' || s.g, 'line', t), 0,
       encode(sha256(convert_to(s.run_id::text || ':' || t, 'UTF8')), 'hex'), x.status, '', '',
       '{{}}'::jsonb, '', s.created + t * interval '2 seconds',
       CASE WHEN x.status IN ('intended', 'unknown') THEN NULL ELSE s.created + t * interval '2 seconds' END,
       0, '', NULL, '', '{{}}'::jsonb
FROM flat_seed AS s CROSS JOIN generate_series(1, {INTENTS_PER_RUN}) AS t
CROSS JOIN LATERAL (
    SELECT CASE WHEN t < {INTENTS_PER_RUN} THEN 'performed'
                WHEN s.status = 'escalated' THEN 'unknown'
                WHEN s.status = 'running' THEN 'intended'
                ELSE 'performed' END AS status
) AS x
ORDER BY s.g, t
"""

INSERT_EVENTS = """
INSERT INTO journal_journalevent (run_id, intent_id, kind, actor_kind, actor_name, user_id, data, at, run_created_at)
SELECT run_id, intent_id, kind, 'agent', 'bench-agent', NULL, '{}'::jsonb, at, run_created_at FROM (
    SELECT run_id, NULL::bigint AS intent_id, 'run_created' AS kind, created AS at, created AS run_created_at
    FROM flat_seed
    UNION ALL
    SELECT i.run_id, i.id, 'intent_recorded', i.intended_at, i.run_created_at
    FROM journal_intent AS i WHERE i.run_created_at >= %(start)s AND i.run_created_at < %(end)s
    UNION ALL
    SELECT i.run_id, i.id, 'outcome_recorded', i.settled_at, i.run_created_at
    FROM journal_intent AS i
    WHERE i.run_created_at >= %(start)s AND i.run_created_at < %(end)s AND i.settled_at IS NOT NULL
) AS e ORDER BY at
"""

INSERT_ESCALATIONS = """
INSERT INTO journal_escalation (
    run_id, tenant_id, task_type, reason, detail, created_at, resolved_at, resolved_by_id, resolution_note)
SELECT run_id, %(tenant)s, 'returns', 'unknown_outcome', 'seeded for the benchmark',
       created + interval '1 minute', NULL, NULL, ''
FROM flat_seed WHERE status = 'escalated'
"""


def month_bounds(now: datetime, months: int) -> list[tuple[datetime, datetime]]:
    """The last `months` UTC months, oldest first, each (first instant, end): the current one
    ends an hour before `now`, so its runs are quiet."""
    index = now.year * 12 + now.month - 1
    starts = [datetime(i // 12, i % 12 + 1, 1, tzinfo=UTC) for i in range(index - months + 1, index + 2)]
    bounds = list(itertools.pairwise(starts))
    bounds[-1] = (bounds[-1][0], now - timedelta(hours=1))
    return bounds


def database_url(layout: str) -> str:
    return with_database(os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), f"seam_bench_flat_{layout}")


def migrate(layout: str) -> None:
    url = database_url(layout)
    ensure_database(url, f"seam_bench_flat_{layout}")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        check=True,
        env={**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings.test"},
    )


def seeded_months(conn: psycopg.Connection[Any], bounds: list[tuple[datetime, datetime]]) -> list[int]:
    """How many runs of the bench tenant each month holds."""
    return [
        conn.execute(
            "SELECT count(*) FROM journal_run AS r JOIN journal_tenant AS t ON t.id = r.tenant_id "
            "WHERE t.slug = %s AND r.created_at >= %s AND r.created_at < %s AND r.archived_at IS NULL",
            [TENANT_SLUG, start, end],
        ).fetchone()[0]
        for start, end in bounds
    ]


def seed(layout: str, *, scale: float, now: datetime) -> dict[str, Any]:
    """The layout's database, seeded where a month lacks its runs. Returns what was done."""
    migrate(layout)
    bounds = month_bounds(now, LAYOUTS[layout])
    per_month = max(int(RUNS_PER_MONTH[layout] * scale), 10)
    with psycopg.connect(database_url(layout), autocommit=True) as conn:
        held = seeded_months(conn, bounds)
    missing = [n for n, runs in enumerate(held) if runs < per_month]
    if not missing:
        progress(f"{layout}: reusing {sum(held):,} runs over {len(bounds)} months")
        return {"reused": True, "seconds": 0.0, "runs": sum(held)}
    progress(f"{layout}: seeding {len(missing)} of {len(bounds)} months, {per_month:,} runs each (minutes)")
    started = time.perf_counter()
    fresh = len(missing) == len(bounds)
    with psycopg.connect(database_url(layout)) as conn, conn.transaction():
        conn.execute("SET LOCAL synchronous_commit = off")
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
        tenant = tenant_id(conn)
        for start, _ in bounds:
            conn.execute("SELECT seam_journal_month_create(%s::date)", [start.date()])
        rebuild = drop_secondary_indexes(conn) if fresh else []
        troubled = len(bounds[-TROUBLED_MONTHS:])
        for n in missing:
            params = {
                "tenant": tenant,
                "tag": int(now.timestamp()),
                "start": bounds[n][0],
                "end": bounds[n][1],
                "first": n * per_month,
                "count": per_month,
                "troubled": n >= len(bounds) - TROUBLED_MONTHS,
                # The same number of runs in trouble in both layouts, spread evenly over them.
                "queued_every": max(per_month * troubled // max(int(QUEUED * scale), 1), 2),
                "stuck_every": max(per_month * troubled // max(int(STUCK * scale), 1), 3),
            }
            seed_month(conn, params)
        for index, statement in rebuild:
            t0 = time.perf_counter()
            conn.execute(statement)
            progress(f"  index {index} built in {time.perf_counter() - t0:.1f}s")
        for start, _ in bounds:  # names the partitions' new indexes after their parents'
            conn.execute("SELECT seam_journal_month_create(%s::date)", [start.date()])
    with psycopg.connect(database_url(layout), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    seconds = time.perf_counter() - started
    progress(f"{layout}: seeded in {seconds:.0f}s")
    return {
        "reused": False,
        "seconds": seconds,
        "runs": per_month * len(bounds),
        "months_seeded": len(missing),
    }


def tenant_id(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT id FROM journal_tenant WHERE slug = %s", [TENANT_SLUG]).fetchone()
    if row:
        return int(row[0])
    created = conn.execute(
        "INSERT INTO journal_tenant (slug, name, created_at) VALUES (%s, %s, now()) RETURNING id",
        [TENANT_SLUG, "Benchmark: flat from one month to twelve"],
    ).fetchone()
    assert created is not None
    return int(created[0])


def drop_secondary_indexes(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """Drop the bulk tables' secondary indexes and unique keys: the statements that rebuild them."""
    rebuild = []
    for index, definition, constraint, table, constraint_def in conn.execute(
        SECONDARY_INDEXES, [BULK_TABLES]
    ).fetchall():
        if constraint:
            conn.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{constraint}"')
            rebuild.append((index, f'ALTER TABLE "{table}" ADD CONSTRAINT "{constraint}" {constraint_def}'))
        else:
            conn.execute(f'DROP INDEX "{index}"')
            rebuild.append((index, index_on_every_partition(definition)))
    return rebuild


def seed_month(conn: psycopg.Connection[Any], params: dict[str, Any]) -> None:
    progress(f"  {params['start']:%Y-%m}: {params['count']:,} runs")
    for name, statement in (
        ("seed", SEED_TABLE),
        ("runs", INSERT_RUNS),
        ("intents", INSERT_INTENTS),
        ("events", INSERT_EVENTS),
        ("escalations", INSERT_ESCALATIONS),
    ):
        t0 = time.perf_counter()
        rows = conn.execute(statement, params).rowcount
        progress(f"    {name}: {rows:,} rows in {time.perf_counter() - t0:.1f}s")
    conn.execute("DROP TABLE flat_seed")


# --- one round, in a process of its own --------------------------------------------------------


def measure_round(layout: str, *, calls: int, queries: int) -> dict[str, float]:
    """One round on one layout's database (run in a fresh process): the median of each timing."""
    os.environ["DATABASE_URL"] = database_url(layout)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["DJANGO_DEBUG"] = "false"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from console.selectors import QueueFilters, queue_rows, queue_runs
    from journal.models import Tenant
    from journal.selectors import read_prepared, stale_intents

    tenant = Tenant.objects.get(slug=TENANT_SLUG)
    hot = InProcess(tenant)
    hot.run(20)  # warm: prepared statements, caches
    sample = hot.run(calls)
    now = timezone.now()
    user = get_user_model()(username="bench")

    def sweep() -> int:
        return len(read_prepared(stale_intents(now=now)[:100]))

    def queue() -> int:
        return len(queue_rows(queue_runs(tenant=tenant, user=user, filters=QueueFilters(), now=now)[:50]))

    figures = {"hot_path_ms": statistics.median(sample.latencies) * 1e3}
    for name, read in (("sweep_ms", sweep), ("queue_ms", queue)):
        found = read()  # warm
        timings = []
        for _ in range(queries):
            t0 = time.perf_counter()
            read()
            timings.append(time.perf_counter() - t0)
        figures[name] = statistics.median(timings) * 1e3
        figures[name.replace("_ms", "_rows")] = found
    return figures


def round_in_process(layout: str, *, calls: int, queries: int) -> dict[str, float]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.flatness",
            "--measure",
            layout,
            "--calls",
            str(calls),
            "--queries",
            str(queries),
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"},
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# --- the oldest month, archived and dropped ----------------------------------------------------


def archive_and_drop(*, now: datetime) -> dict[str, Any]:
    """On the twelve-month database: archive the oldest month's runs, then drop the month."""
    os.environ["DATABASE_URL"] = database_url("twelve")
    import django

    django.setup()
    from django.db import connection

    from journal import partitions
    from journal.models import Run, Tenant
    from retention import services as retention
    from retention.files import archive_path

    oldest = month_bounds(now, LAYOUTS["twelve"])[0]
    month = partitions.month_of(oldest[0])
    tables = partitions.month_tables(month)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size(%s::regclass) + pg_total_relation_size(%s::regclass)",
            [tables.intent, tables.event],
        )
        (live_bytes,) = cursor.fetchone()
    # Every run of the oldest month has ended (the seed puts runs in trouble in the last three).
    # The month's runs whose rows its partitions hold (an earlier run of the bench left the
    # month's earlier runs archived, their rows dropped).
    month_runs = Run.objects.filter(
        created_at__gte=oldest[0], created_at__lt=oldest[1], archived_at__isnull=True
    )
    run_count = month_runs.count()
    tenant = Tenant.objects.get(slug=TENANT_SLUG)
    # The moment the oldest month's runs (ended within it) are past the tenant's retention. A
    # sample of them is archived by the retention job's own batches (file, digest, read back,
    # marked, audited); the rest are marked archived directly, so the month may be dropped: the
    # archive's size per run is the sample's, its throughput the sample's too.
    due_at = oldest[1] + timedelta(days=tenant.retention_days)
    sample = list(month_runs.filter(tenant=tenant).order_by("created_at")[:ARCHIVE_SAMPLE_RUNS])
    t0 = time.perf_counter()
    archived = [
        retention.archive_batch(tenant=tenant, month=month, runs=sample[i : i + ARCHIVE_BATCH], due_at=due_at)
        for i in range(0, len(sample), ARCHIVE_BATCH)
    ]
    archive_seconds = time.perf_counter() - t0
    marked = sum(len(outcome.marked) for outcome in archived)
    if marked != len(sample):
        raise BenchError(f"archived {marked:,} of the {len(sample):,} sampled runs of {month}")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE journal_run SET archived_at = %s WHERE created_at >= %s AND created_at < %s "
            "AND archived_at IS NULL",
            [due_at, oldest[0], oldest[1]],
        )
        # Write out the pages the archiving and that UPDATE dirtied: the drop is timed by itself,
        # not beside a checkpoint of the bench's own setup that would share the disk with it.
        cursor.execute("CHECKPOINT")
    archive_bytes = sum(outcome.archive.bytes for outcome in archived)
    sampled = len(sample)
    # The month's two steps, as the retention job takes them: the detach, while which the
    # journal's tables are held, and the discard, which frees the files and holds only them.
    t0 = time.perf_counter()
    detached = partitions.detach_month(month)
    detach_seconds = time.perf_counter() - t0
    discarded = partitions.discard_month(month)
    drop_seconds = time.perf_counter() - t0
    if not (detached and discarded):
        raise BenchError(f"the month {month:%Y-%m} had no partitions to drop")
    for outcome in archived:  # the bench's own archive files: measured, not kept
        archive_path(outcome.archive.file_name).unlink()
    return {
        "month": f"{month:%Y-%m}",
        "runs": run_count,
        "archive_sample_runs": sampled,
        "archive_seconds": archive_seconds,
        "archive_runs_per_s": sampled / archive_seconds,
        "archive_bytes_per_run": archive_bytes / sampled,
        "live_bytes_per_run": live_bytes / run_count,
        "archive_over_live": (archive_bytes / sampled) / (live_bytes / run_count),
        "detach_seconds": detach_seconds,
        "drop_seconds": drop_seconds,
    }


# --- the whole benchmark -----------------------------------------------------------------------


def paired_ratio(rounds: list[dict[str, dict[str, float]]], figure: str) -> float:
    return statistics.median(r["twelve"][figure] / r["one"][figure] for r in rounds)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    now = datetime.now(UTC)
    seeded = {layout: seed(layout, scale=args.scale, now=now) for layout in LAYOUTS}
    rounds: list[dict[str, dict[str, float]]] = []
    for number in range(args.rounds):
        order = list(LAYOUTS) if number % 2 == 0 else list(LAYOUTS)[::-1]
        progress(f"round {number + 1}/{args.rounds}: {', '.join(order)}")
        rounds.append(
            {layout: round_in_process(layout, calls=args.calls, queries=args.queries) for layout in order}
        )
    at_volume = args.scale >= 1.0
    result: dict[str, Any] = {"seeded": seeded, "scale": args.scale, "rounds": rounds, "targets": []}
    for figure, label in (
        ("hot_path_ms", "the journal's hot path"),
        ("sweep_ms", "the sweep's read"),
        ("queue_ms", "the queue's first page"),
    ):
        ratio = paired_ratio(rounds, figure)
        result[figure] = {layout: statistics.median(r[layout][figure] for r in rounds) for layout in LAYOUTS}
        result[f"{figure}_ratio"] = ratio
        result["targets"].append(
            {
                "name": f"{label}, 30 M intents in 12 monthly partitions / 10 M in one (paired by round)"
                + ("" if at_volume else " (NOT at that volume)"),
                "value": ratio,
                "bound": f"<= {FLAT_TARGET:.2f}",
                "met": at_volume and ratio <= FLAT_TARGET,
            }
        )
    dropped = archive_in_process(now)
    result["drop"] = dropped
    result["targets"].append(
        {
            "name": f"dropping a month of {dropped['runs']:,} runs: seconds the journal's tables are held",
            "value": dropped["detach_seconds"],
            "bound": f"< {DROP_TARGET_SECONDS:.0f}",
            "met": at_volume and dropped["detach_seconds"] < DROP_TARGET_SECONDS,
        }
    )
    return result


def archive_in_process(now: datetime) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.flatness", "--archive-and-drop", now.isoformat()],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"},
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def render(result: dict[str, Any]) -> str:
    lines = [f"flat from one month to twelve (scale {result['scale']}, {len(result['rounds'])} rounds)"]
    for figure in ("hot_path_ms", "sweep_ms", "queue_ms"):
        one, twelve = result[figure]["one"], result[figure]["twelve"]
        lines.append(
            f"  {figure:<12} one {one:8.2f}  twelve {twelve:8.2f}  ratio {result[figure + '_ratio']:.2f}"
        )
    drop = result["drop"]
    lines.append(
        f"  month {drop['month']}: {drop['archive_sample_runs']:,} of {drop['runs']:,} runs archived in "
        f"{drop['archive_seconds']:.1f}s ({drop['archive_runs_per_s']:.0f} runs/s), "
        f"{drop['archive_bytes_per_run']:.0f} B/run archived against {drop['live_bytes_per_run']:.0f} B/run live "
        f"({drop['archive_over_live']:.1%}); detached in {drop['detach_seconds'] * 1e3:.0f} ms, "
        f"its files freed {drop['drop_seconds'] * 1e3:.0f} ms after the start"
    )
    for target in result["targets"]:
        lines.append(
            f"  target {target['name']}: {target['value']:.3f} {target['bound']}: {'met' if target['met'] else 'NOT MET'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=21, help="alternating rounds (default 21)")
    parser.add_argument("--calls", type=int, default=300, help="hot-path calls per round (default 300)")
    parser.add_argument(
        "--queries", type=int, default=30, help="sweep and queue reads per round (default 30)"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the seeded runs (default 1.0)")
    parser.add_argument("--json", action="store_true", help="print only a JSON object of the figures")
    parser.add_argument("--measure", choices=list(LAYOUTS), help=argparse.SUPPRESS)
    parser.add_argument("--archive-and-drop", metavar="NOW", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure_round(args.measure, calls=args.calls, queries=args.queries)))
        return 0
    if args.archive_and_drop:
        print(json.dumps(archive_and_drop(now=datetime.fromisoformat(args.archive_and_drop))))
        return 0
    try:
        result = measure(args)
    except BenchError as exc:
        progress(f"bench.flatness: {exc}")
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
