"""Retention's Celery task: a thin wrapper around retention.services, run daily by beat."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from .services import retention_apply


@shared_task(
    name="retention.archive_due_runs",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=6 * 3600,
    soft_time_limit=6 * 3600 - 60,
    ignore_result=True,
)
def archive_due_runs_task() -> int:
    """Archive every run due now, then drop the months left wholly archived; the number of runs
    archived. A killed run is harmless: a batch is marked only after its file verified, in one
    transaction, a month dropped with its audit rows in another, and the next run starts over."""
    done = retention_apply(timezone.now())
    return sum(len(outcome.marked) for outcome in done.archived)
