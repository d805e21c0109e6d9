"""Celery tasks of the handover: thin wrappers around its services."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

from celery import Task, shared_task
from django.db import transaction

from journal.models import Escalation

from .notifications import escalation_notify

logger = logging.getLogger(__name__)

NOTIFY_MAX_RETRIES = 3


@shared_task(
    name="handover.notify_escalation",
    bind=True,
    # Acknowledged on receipt, unlike the project's default: a worker killed mid-send loses the
    # notification instead of sending it again on redelivery. The escalation is on the
    # dashboard's queue regardless; a duplicate chat message is the worse failure.
    acks_late=False,
    reject_on_worker_lost=False,
    max_retries=NOTIFY_MAX_RETRIES,
    time_limit=120,
    soft_time_limit=100,
    ignore_result=True,
)
def notify_escalation(self: Task, escalation_id: int, done: Sequence[str] = ()) -> dict[str, Any]:
    """Email and post about a new escalation. Channels that failed transiently are retried with
    backoff; the channels already delivered ride along in `done` and are not sent again."""
    report = escalation_notify(escalation_id, done=done)
    if report.failed:
        if self.request.retries < NOTIFY_MAX_RETRIES:
            countdown = random.uniform(1, 1.5) * 10 * 2**self.request.retries
            raise self.retry(args=(escalation_id, report.done), countdown=countdown)
        logger.error(
            "escalation %s: gave up notifying %s after %s retries",
            escalation_id,
            ", ".join(f"{channel} ({why})" for channel, why in report.failed.items()),
            NOTIFY_MAX_RETRIES,
        )
    return report.as_dict()


def escalation_notify_schedule(escalation: Escalation) -> None:
    """Queue the notifications of a new escalation once the caller's transaction commits (never
    for a rolled-back one). Failing to reach the broker is logged, not raised: the escalation is
    already committed and shown on the dashboard, and the caller (a sweep deciding many runs)
    must go on."""
    escalation_id = escalation.pk
    transaction.on_commit(lambda: notify_escalation.delay(escalation_id), robust=True)


def escalation_opened_notify(*, escalation: Escalation, **kwargs: Any) -> None:
    """journal.signals.escalation_opened's receiver: notify once the hand-over commits."""
    escalation_notify_schedule(escalation)
