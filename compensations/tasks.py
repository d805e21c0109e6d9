"""Celery tasks of the compensations executor: thin wrappers that take ids."""

from __future__ import annotations

import random

from celery import Task, shared_task
from django.conf import settings

from handover.services import Actor

from .models import Compensation
from .services import CompensationPending, CompensationRetry, compensation_execute

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
