"""Celery tasks of reconciliation: thin wrappers around its services."""

from __future__ import annotations

from celery import shared_task
from django.contrib.auth import get_user_model

from journal.models import Run, RunStatus
from journal.services import Actor

from .decisions import DecisionOutcome, decide_dead_runs, run_resume
from .services import intent_reconcile, reconcile_sweep

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
