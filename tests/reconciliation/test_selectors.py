"""The sweep's query is served by the partial index on open intents, so its cost follows the
rows in doubt, not the size of the journal; and a run is stuck by one rule, whoever asks."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from console.selectors import QueueFilters, queue_reason_counts, queue_runs
from handover import NextActionCode, handover_for, run_is_stuck
from journal.models import Intent, IntentStatus, Run
from journal.selectors import stale_intents, stuck_runs
from journal.services import Actor
from reconciliation.decisions import dead_runs
from reconciliation.services import reconcile_sweep

pytestmark = pytest.mark.django_db(transaction=True)


def _journal_of(run: Run, *, settled: int, open_: int, runs: int = 1) -> None:
    """`open_` calls in doubt in `run`, and `settled` settled calls spread over it and `runs - 1`
    other runs like it, every run silent for a day."""
    long_ago = timezone.now() - timedelta(days=1)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=long_ago)
    run.refresh_from_db()
    fields = [f.attname for f in Run._meta.concrete_fields if not f.primary_key]
    journal = [
        run,
        *Run.objects.bulk_create(Run(**{f: getattr(run, f) for f in fields}) for _ in range(runs - 1)),
    ]
    Intent.objects.bulk_create(
        Intent(
            run=owner,
            run_created_at=owner.created_at,
            step_id=f"{owner.pk}:{n}:issue_refund",
            turn=n,
            tool="issue_refund",
            args={"n": n},
            idempotency_key=f"key-{n:08d}",
            status=IntentStatus.INTENDED if n < open_ else IntentStatus.PERFORMED,
            intended_at=long_ago + timedelta(seconds=n),
        )
        for n in range(settled + open_)
        for owner in [run if n < open_ else journal[n % runs]]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE journal_intent")
        cursor.execute("ANALYZE journal_run")


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(lambda: stale_intents(older_than=timedelta(seconds=60)), id="one-threshold"),
        pytest.param(lambda: _with_per_tool_thresholds(), id="per-tool-thresholds"),
    ],
)
def test_the_sweep_query_uses_the_partial_index_on_open_intents(
    make_run: Callable[..., Run], query: Callable[[], object]
) -> None:
    # A realistic journal: many runs, almost every call settled, a handful in doubt. With the
    # statistics fresh, the planner picks the partial index by itself (no enable_seqscan games).
    # (With one run, starting from that run is as good a plan, and the planner took either.)
    _journal_of(make_run(), settled=5_000, open_=20, runs=500)

    plan = query().explain()  # type: ignore[attr-defined]

    assert "intent_open_idx" in plan, plan
    assert len(list(query())) == 20  # type: ignore[call-overload]


def test_a_batch_of_a_dead_run_with_thousands_of_open_calls_reads_only_the_batch(
    make_run: Callable[..., Run],
) -> None:
    # A provider outage: one dead run, 3,000 calls in doubt, statistics fresh. Joined to its run,
    # PostgreSQL may start from the few quiet runs and read all of each one's calls through its
    # run_id index for every batch; with the run's heartbeat read per row, a batch reads the open
    # index in order and stops at its last row.
    _journal_of(make_run(), settled=0, open_=3_000)

    plan = stale_intents(older_than=timedelta(seconds=60))[:50].explain(analyze=True)

    open_index_scans = re.findall(r"Index Scan using intent_open_idx\S* .*actual time=\S+ rows=(\d+)", plan)
    assert open_index_scans, plan
    # The batch (and the row that ends its last group of equal times), not the run's 3,000.
    assert sum(int(rows) for rows in open_index_scans) <= 60, plan
    assert "intent_step_per_run" not in plan, plan
    assert [i.intended_at for i in stale_intents(older_than=timedelta(seconds=60))[:50]] == sorted(
        Intent.objects.values_list("intended_at", flat=True)
    )[:50]


def test_the_claim_is_prepared_once_and_its_kept_plan_reads_the_open_index() -> None:
    # With a year of monthly partitions, planning the claim on every batch took longer than
    # running it (bench/flatness.py): it is a prepared statement, planned once per connection,
    # whose kept (generic) plan must still read intent_open_idx, so the open status is part of
    # its text, not a parameter.
    for _ in range(7):  # psycopg prepares a statement on its 6th run (prepare_threshold 5)
        reconcile_sweep(actor=Actor.system("test-sweep"))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, parameter_types::text[] FROM pg_prepared_statements "
            "WHERE statement LIKE '%%SKIP LOCKED%%'"
        )
        (statement, types), *others = cursor.fetchall()
        assert not others, others
        assert """"journal_intent"."status" = 'intended'""" in statement, statement
        cursor.execute(f"PREPARE claim_probe({', '.join(types)}) AS {statement}")
        for setting in ("enable_seqscan", "enable_bitmapscan"):
            cursor.execute(f"SET LOCAL {setting} = off")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"EXPLAIN EXECUTE claim_probe({', '.join(['now()'] * len(types))})")
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("DEALLOCATE claim_probe")
    assert "Index Scan using intent_open_idx" in plan, plan


def _with_per_tool_thresholds() -> object:
    with override_settings(SEAM_STALE_AFTER_SECONDS=60, SEAM_STALE_AFTER_BY_TOOL={"notify_seller": 300}):
        return stale_intents()


# --- stuck runs: one rule for the queue, the handover, the metrics and the sweep ----------------

PER_TOOL = {"SEAM_STALE_AFTER_SECONDS": 60, "SEAM_STALE_AFTER_BY_TOOL": {"slow_tool": 600, "fast_tool": 10}}


def _silent(run: Run, *, seconds: int, waiting_on: str = "") -> Run:
    """The run's agent last beat `seconds` ago, with a call of `waiting_on` open since then."""
    then = timezone.now() - timedelta(seconds=seconds)
    if waiting_on:
        Intent.objects.create(
            run=run,
            step_id=f"{run.pk}:1:{waiting_on}",
            turn=1,
            tool=waiting_on,
            args={},
            idempotency_key=f"key-{run.ticket_id}",
            status=IntentStatus.INTENDED,
            intended_at=then,
        )
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    return Run.objects.select_related("tenant").get(pk=run.pk)


def _stuck_gauge() -> float:
    scrape = Client().get("/metrics").content.decode()
    (family,) = [f for f in text_string_to_metric_families(scrape) if f.name == "seam_stuck_runs"]
    return family.samples[0].value


@override_settings(**PER_TOOL)
def test_a_run_is_stuck_by_the_threshold_of_the_call_it_waits_on_for_every_reader(
    make_run: Callable[..., Run],
) -> None:
    runs = {
        # Waiting on a call allowed 600 s: not stuck after 120 s (the queue, the metrics and the
        # handover used to call it stuck at the global 60 s, and listed its call as uncertain).
        "slow": _silent(make_run(ticket_id="slow"), seconds=120, waiting_on="slow_tool"),
        # Waiting on a call allowed 10 s: stuck after 30 s (nobody used to see it before 60 s).
        "fast": _silent(make_run(ticket_id="fast"), seconds=30, waiting_on="fast_tool"),
        "fast too": _silent(make_run(ticket_id="fast too"), seconds=20, waiting_on="fast_tool"),
        # Waiting on nothing: the global 60 s.
        "quiet": _silent(make_run(ticket_id="quiet"), seconds=120),
        "alive": _silent(make_run(ticket_id="alive"), seconds=30),
    }
    now = timezone.now()
    tenant = runs["slow"].tenant
    stuck = {"fast", "fast too", "quiet"}

    assert {r.ticket_id for r in stuck_runs(now=now)} == stuck
    # The staff queue, and its counts.
    queued = queue_runs(tenant=tenant, user=None, filters=QueueFilters(), now=now)
    assert {r.ticket_id for r in queued} == stuck
    assert queue_reason_counts(tenant=tenant, now=now) == {"run_stuck": 3}
    # The handover.
    for name, run in runs.items():
        handover = handover_for(run)
        assert run_is_stuck(run, now) is (name in stuck), name
        assert handover.reason == ("run_stuck" if name in stuck else ""), name
    assert handover_for(runs["slow"]).uncertain == []
    assert handover_for(runs["slow"]).next_action.code == NextActionCode.WAIT_FOR_AGENT
    # The metrics.
    assert _stuck_gauge() == 3
    # The sweep: a stuck run with a call open waits for reconciliation to settle the call (which
    # is stale by its own tool's threshold); the quiet one is decided now.
    assert {i.run.ticket_id for i in stale_intents(now=now)} == {"fast", "fast too"}
    assert {r.ticket_id for r in dead_runs()} == {"quiet"}
    # `manage.py reconcile --older-than 0 --decide`: every threshold is zero, the alive one too.
    assert {r.ticket_id for r in dead_runs(quiet_for=timedelta(0))} == {"quiet", "alive"}


def test_stuck_runs_is_a_range_scan_on_the_running_runs_index(make_run: Callable[..., Run]) -> None:
    _journal_of(make_run(), settled=50, open_=2)
    with override_settings(**PER_TOOL), transaction.atomic(), connection.cursor() as cursor:
        # With sequential scans priced out, a Seq Scan left in the plan means no index can serve.
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = stuck_runs(now=timezone.now()).explain()
    assert "run_running_idx" in plan, plan
    assert "Seq Scan" not in plan, plan
