"""Celery tasks of reconciliation: thin wrappers around its services."""

from __future__ import annotations

import time
from collections import Counter

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model

from journal.models import Run, RunStatus
from journal.services import Actor

from .decisions import DecisionOutcome, decide_dead_runs, run_resume
from .services import intent_reconcile, reconcile_sweep

SWEEP_ACTOR = "reconciliation-sweep"
# Rows one pass of the sweep claims, asks about and settles (in batches of
# SEAM_RECONCILE_BATCH_SIZE) before it looks at the clock.
SWEEP_PASS_ROWS = 500


@shared_task(
    name="reconciliation.sweep_stale_intents",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=240,
    soft_time_limit=200,
    ignore_result=True,
)
def sweep_stale_intents(follow_up: bool = False) -> dict[str, int]:
    """Periodic (CELERY_BEAT_SCHEDULE): settle stale open intents by asking their downstream.
    Two beats or a redelivery run it twice at once harmlessly: every row is claimed by one
    sweeper, and the rows themselves are the queue, so a lost run is re-found by the next.
    `follow_up`: queued by a sweep that left rows (_sweep_backlog), not by beat."""
    actor = Actor.system(SWEEP_ACTOR)
    counts = _sweep_backlog(actor, follow_up=follow_up)
    # Then every dead run whose calls are now all settled gets its policy's outcome.
    decisions = decide_dead_runs(actor=actor)
    for decision in decisions:
        counts[f"run_{decision.outcome}"] = counts.get(f"run_{decision.outcome}", 0) + 1
        if decision.outcome == DecisionOutcome.CONTINUING:
            # A long resumption goes on in tasks of its own: this sweep does not wait for it.
            resume_run.delay(decision.run_id, None)
    return counts


@shared_task(
    name="reconciliation.reconcile_intent", acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def reconcile_intent(intent_id: int) -> str:
    """A person asked to look an uncertain step up again. Losing this task loses nothing: the
    row is open again, so the periodic sweep finds it."""
    return str(intent_reconcile(intent_id=intent_id, actor=Actor.system(SWEEP_ACTOR)).outcome)


@shared_task(
    name="reconciliation.resume_run",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=600,
    soft_time_limit=540,
    ignore_result=True,
)
def resume_run(run_id: str, user_id: int | None) -> str:
    """A person (user_id), or the sweep (None), asked for the run to be finished. A redelivery
    after a killed worker resumes again: performed steps are found by their keys and skipped,
    never sent twice. A pass that stops at SEAM_STEPS_PER_PASS queues the next one."""

    run = Run.objects.select_related("tenant").get(pk=run_id)
    if run.status != RunStatus.RUNNING:
        return f"skipped: {run.status}"
    actor = (
        Actor.system(SWEEP_ACTOR) if user_id is None else Actor.user(get_user_model().objects.get(pk=user_id))
    )
    decision = run_resume(run=run, actor=actor)
    if decision.outcome == DecisionOutcome.CONTINUING:
        resume_run.delay(run_id, user_id)
    return decision.outcome


def _sweep_backlog(actor: Actor, *, follow_up: bool) -> dict[str, int]:
    """Sweep passes while each finds a full pass of stale rows, for up to one beat interval; if
    rows are still left then, one more sweep is queued at once. A provider outage's backlog is
    then worked as fast as the workers free up instead of one pass per beat (500 rows every
    SEAM_SWEEP_INTERVAL_SECONDS: 100,000 calls in doubt would take over half an hour). A beat's
    sweep whose first pass comes back full queues one more sweep straight away, so a second free
    worker joins now rather than at the next beat.

    A queued sweep expires as beat's do: if no worker is free within an interval, beat's next
    sweep finds the same rows. A beat's sweep queues at most two and a queued one at most one, so
    the sweeps queued at once stay a few per worker, and other tasks wait behind at most a few
    intervals of sweeping."""
    interval = float(settings.SEAM_SWEEP_INTERVAL_SECONDS)
    until = time.monotonic() + interval
    counts: Counter[str] = Counter()
    passes = 0
    while True:
        report = reconcile_sweep(actor=actor, limit=SWEEP_PASS_ROWS)
        counts.update(report.counts)
        passes += 1
        left = len(report.results) >= SWEEP_PASS_ROWS
        if left and passes == 1 and not follow_up:
            _queue_sweep(interval)
        if not left or time.monotonic() >= until:
            break
    if left:
        _queue_sweep(interval)
    return dict(counts)


def _queue_sweep(interval: float) -> None:
    sweep_stale_intents.apply_async(kwargs={"follow_up": True}, expires=interval)
