"""The counters kept by the process that did the work: intents recorded and settled,
reconciliations, compensations executed. Below every app (the journal's write path increments
them), so this module imports nothing of Seam; monitoring.metrics exposes them with the gauges
read from the rows at scrape time."""

from __future__ import annotations

import functools
from typing import Any

from prometheus_client import Counter

# Incremented by the code paths. --------------------------------------------------

INTENTS_RECORDED = Counter("seam_intents_recorded", "Intent rows committed (new ones, not replays).")
INTENTS_SETTLED = Counter(
    "seam_intents_settled", "Intent rows settled, by the status they settled to.", ["status"]
)
RECONCILE_OUTCOMES = Counter(
    "seam_reconcile_outcomes", "Reconciliation of one open intent, by outcome.", ["outcome"]
)
COMPENSATIONS_EXECUTED = Counter(
    "seam_compensations_executed",
    "Compensation executions, by how they ended (done, partial, dead_lettered, retry, pending).",
    ["status"],
)


def intent_recorded() -> None:
    INTENTS_RECORDED.inc()


@functools.cache
def _intents_settled_as(status: str) -> Any:
    # labels() looks the child up under a lock on every call; the children are never removed.
    return INTENTS_SETTLED.labels(status=status)


def intent_settled(status: str) -> None:
    _intents_settled_as(status).inc()


def reconcile_outcome(outcome: str) -> None:
    RECONCILE_OUTCOMES.labels(outcome=outcome).inc()


def compensation_executed(status: str) -> None:
    COMPENSATIONS_EXECUTED.labels(status=status).inc()
