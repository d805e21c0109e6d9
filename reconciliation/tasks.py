"""Celery tasks of reconciliation: thin wrappers around its services."""

from __future__ import annotations

from celery import shared_task

from handover.services import Actor

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
    return reconcile_sweep(actor=Actor.system(SWEEP_ACTOR)).counts
