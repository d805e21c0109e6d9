"""Celery tasks of the journal: thin wrappers around its services."""

from __future__ import annotations

from celery import shared_task

from . import partitions


@shared_task(name="journal.create_months", time_limit=300, soft_time_limit=240, ignore_result=True)
def create_months() -> list[str]:
    """Periodic (CELERY_BEAT_SCHEDULE, daily): make the journal's partitions for this month and
    the next two where missing, so that a month's first call never waits on DDL and no row lands
    in the default partition. Idempotent: a run twice, or by two beats, makes them once."""
    return [f"{month:%Y-%m}" for month in partitions.create_months(ahead=partitions.MONTHS_AHEAD)]
