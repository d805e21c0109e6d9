"""Prometheus metrics at /metrics.

Two kinds, on purpose:

- **Gauges read from PostgreSQL at scrape time** (`DatabaseCollector`): stuck runs, runs awaiting
  a person by reason, unknown outcomes, open dead letters, sweep lag, compensation failures.
  The rows are the truth whichever process or machine wrote them, so these are what alerts
  use. Each is one statement on a partial index (or a small table), bounded by the rows in
  trouble, not by the journal's size; all run in one transaction with a statement
  timeout, so a slow database makes the scrape report an error instead of hanging.
- **Counters kept by the process that did the work** (intents recorded and settled,
  reconciliations, compensations executed). Per process unless PROMETHEUS_MULTIPROC_DIR is
  set, in which case every process of one machine (gunicorn workers, Celery pool children)
  writes to that directory and one scrape adds them up; see docs/operations.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.db.models import Count, QuerySet
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from compensations.models import DeadLetter
from journal.models import Intent, IntentStatus, OutcomeReason, Run
from journal.selectors import stale_after, stale_intents, stuck_runs
from observability import counters  # noqa: F401  (the counters are exposed with the gauges)

# How long one gauge's statement may take before the scrape gives up on the database.
STATEMENT_TIMEOUT_MS = 2000
# The sweep lag looks at this many of the oldest stale rows (per-tool thresholds differ).
LAG_SAMPLE = 100

# --- gauges, read from the rows at scrape time ------------------------------------------------


def awaiting_person() -> QuerySet[Any]:
    """Runs waiting for a person, counted by reason: run_awaiting_idx."""

    return (
        Run.objects.filter(awaiting_person=True).order_by().values("outcome_reason").annotate(n=Count("pk"))
    )


def unknown_outcomes() -> QuerySet[Any]:
    """Intent rows reconciliation settled as `unknown`: a person must decide each. Served by the
    partial index intent_unknown_idx, so it stays off the journal's full size."""

    return Intent.objects.filter(status=IntentStatus.UNKNOWN)


def open_dead_letters() -> QuerySet[Any]:

    return DeadLetter.objects.filter(resolved_at__isnull=True)


def dead_letters() -> QuerySet[Any]:
    """Every compensation that failed past its retries (rows are never deleted: monotonic)."""

    return DeadLetter.objects.all()


def sweep_candidates(now: datetime) -> QuerySet[Any]:
    """The oldest rows the sweep should have settled by now: intent_open_idx, joined to the run."""

    return stale_intents(now=now).values("intended_at", "tool", "next_lookup_at", "run__last_heartbeat_at")[
        :LAG_SAMPLE
    ]


def sweep_lag_seconds(now: datetime) -> float:
    """How long the most overdue stale row has been due: the later of its intent and its run's
    last heartbeat, plus its tool's stale threshold, or the end of its lookup backoff. 0 when the
    sweep is keeping up."""

    lag = 0.0
    for row in sweep_candidates(now):
        quiet_since = max(filter(None, [row["intended_at"], row["run__last_heartbeat_at"]]))
        due = quiet_since + stale_after(row["tool"])
        if row["next_lookup_at"] is not None:
            due = max(due, row["next_lookup_at"])
        lag = max(lag, (now - due).total_seconds())
    return lag


def _reasons() -> list[str]:

    return [str(value) for value in OutcomeReason.values]


class DatabaseCollector(Collector):
    """The gauges that matter, read from the rows when Prometheus scrapes."""

    def describe(self) -> Iterable[Any]:
        # Nothing at registration: describing must not query the database.
        return []

    def collect(self) -> Iterator[Any]:
        started = time.perf_counter()
        error = 0
        families: list[Any] = []
        try:
            families = self._read()
        except DatabaseError:
            error = 1
        yield from families
        yield GaugeMetricFamily(
            "seam_metrics_database_error", "1 when the last scrape could not read the database.", error
        )
        yield GaugeMetricFamily(
            "seam_metrics_scrape_seconds",
            "Time spent reading the database gauges.",
            time.perf_counter() - started,
        )

    def _read(self) -> list[Any]:
        now = timezone.now()
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL statement_timeout = %s", [STATEMENT_TIMEOUT_MS])
            stuck = stuck_runs(now=now).count()
            by_reason = {row["outcome_reason"]: row["n"] for row in awaiting_person()}
            unknown = unknown_outcomes().count()
            open_letters = open_dead_letters().count()
            failures = dead_letters().count()
            lag = sweep_lag_seconds(now)

        awaiting = GaugeMetricFamily(
            "seam_runs_awaiting_person", "Runs waiting for a person, by reason.", labels=["reason"]
        )
        for reason in sorted({*_reasons(), *by_reason}):
            awaiting.add_metric([reason or "none"], by_reason.get(reason, 0))
        return [
            GaugeMetricFamily(
                "seam_stuck_runs",
                "Runs still running whose heartbeat is older than the stale threshold of what they wait on.",
                stuck,
            ),
            awaiting,
            GaugeMetricFamily(
                "seam_unknown_outcomes", "Intent rows whose outcome nobody could find out.", unknown
            ),
            GaugeMetricFamily(
                "seam_open_dead_letters", "Failed compensations waiting for a person.", open_letters
            ),
            GaugeMetricFamily(
                "seam_sweep_lag_seconds",
                "How long the most overdue stale intent has waited past its threshold for the sweep.",
                lag,
            ),
            CounterMetricFamily(
                "seam_compensation_failures",
                "Compensations that failed past their retries (dead letters ever created).",
                failures,
            ),
        ]


class _ThisProcess(Collector):
    """The default registry: this process's counters, and its CPU, memory and GC figures."""

    def collect(self) -> Iterator[Any]:
        yield from REGISTRY.collect()


def exposition() -> bytes:
    """The text exposition of one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Every process of this machine that shares the directory, added up.
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(DatabaseCollector())
    return generate_latest(registry)
