"""Celery tasks of the compensations executor: thin wrappers that take ids."""

from __future__ import annotations

import json
import random
from datetime import timedelta

from celery import Task, shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from journal.models import Intent, Run
from journal.services import Actor

from .models import Compensation
from .services import (
    FINISHED,
    CompensationPending,
    CompensationRetry,
    compensation_claim_stalled,
    compensation_execute,
    compensation_request,
    run_undo,
)

EXECUTOR = Actor.system("compensations-executor")


@shared_task(
    name="compensations.compensate_step",
    bind=True,
    acks_late=True,
    # A worker SIGKILLed mid-compensation must not lose the task; redelivery is safe because the
    # compensation's intent is found again by its key and never sent twice.
    reject_on_worker_lost=True,
    max_retries=None,
    time_limit=120,
    soft_time_limit=100,
    ignore_result=True,
)
def compensate_step(self: Task, compensation_id: int) -> str:
    compensation = Compensation.objects.get(pk=compensation_id)
    try:
        return str(compensation_execute(compensation=compensation, actor=EXECUTOR).status)
    except CompensationRetry as exc:
        # The budget is counted on the row (attempts), not by Celery: the row survives the broker.
        raise self.retry(
            exc=exc, countdown=random.uniform(1, 2) * 2 ** min(compensation.attempts, 6)
        ) from exc
    except CompensationPending as exc:
        # The compensation's own call is in doubt; reconciliation settles its intent first.
        raise self.retry(exc=exc, countdown=settings.SEAM_COMPENSATION_PENDING_RETRY_SECONDS) from exc


@shared_task(
    name="compensations.compensate_run",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=20,
    time_limit=600,
    soft_time_limit=540,
    ignore_result=True,
)
def compensate_run(self: Task, run_id: str, user_id: int) -> str:
    """A person asked for the whole run to be undone; each step's undo is idempotent, so a
    redelivery continues where the killed worker stopped."""

    run = Run.objects.select_related("tenant").get(pk=run_id)
    actor = Actor.user(get_user_model().objects.get(pk=user_id))
    result = run_undo(run=run, actor=actor)
    for compensation_id in result.queued:
        compensate_step.delay(compensation_id)
    if result.pending:
        raise self.retry(countdown=settings.SEAM_COMPENSATION_PENDING_RETRY_SECONDS)
    return json.dumps(result.facts())


@shared_task(
    name="compensations.requeue_stalled",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=120,
    soft_time_limit=100,
    ignore_result=True,
)
def requeue_stalled() -> int:
    """Periodic (CELERY_BEAT_SCHEDULE): the broker is not the record of what is owed. A pending
    compensation whose message was lost is found again from its row and queued again."""
    quiet_for = timedelta(seconds=float(settings.SEAM_COMPENSATION_REQUEUE_AFTER_SECONDS))
    claimed = compensation_claim_stalled(quiet_for=quiet_for)
    for compensation_id in claimed:
        compensate_step.delay(compensation_id)
    return len(claimed)


def compensation_schedule(*, original: Intent, actor: Actor) -> Compensation:
    """Request the undo of one step and queue its execution once this is committed."""
    compensation = compensation_request(original=original, actor=actor)
    if compensation.status not in FINISHED:
        transaction.on_commit(lambda: compensate_step.delay(compensation.pk))
    return compensation
