"""Celery tasks of insights: thin wrappers around its services."""

from __future__ import annotations

from celery import shared_task

from .error_counts import errors_fold


@shared_task(
    name="insights.fold_error_counts",
    time_limit=600,
    soft_time_limit=540,
    ignore_result=True,
)
def fold_error_counts() -> dict[str, int]:
    """Periodic (CELERY_BEAT_SCHEDULE): bring the error panels' rollup up to date. Two at once
    are harmless: the second waits for the first's lock and recounts what changed since. A lost
    one loses nothing: the page counts live what the rollup does not hold, and the next fold
    folds it."""
    folded = errors_fold()
    return {"hours": folded.hours, "rows": folded.rows, "last_event_id": folded.last_event_id}
