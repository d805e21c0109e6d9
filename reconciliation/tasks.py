"""Celery tasks of reconciliation: thin wrappers around its services."""

from __future__ import annotations

from celery import shared_task

from handover.services import Actor

from .decisions import decide_dead_runs
from .selectors import stale_after
from .services import reconcile_sweep

SWEEP_ACTOR = "reconciliation-sweep"


@shared_task(
    name="reconciliation.sweep_stale_intents",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=240,
    soft_time_limit=200,
    ignore_result=True,
)
def sweep_stale_intents() -> dict[str, int]:
    """Periodic (CELERY_BEAT_SCHEDULE): settle stale open intents by asking their downstream.
    Two beats or a redelivery run it twice at once harmlessly: every row is claimed by one
    sweeper, and the rows themselves are the queue, so a lost run is re-found by the next."""
    actor = Actor.system(SWEEP_ACTOR)
    counts = reconcile_sweep(actor=actor).counts
    # Then every dead run whose calls are now all settled gets its policy's outcome.
    decisions = decide_dead_runs(quiet_for=stale_after(None), actor=actor)
    for decision in decisions:
        counts[f"run_{decision.outcome}"] = counts.get(f"run_{decision.outcome}", 0) + 1
    return counts
