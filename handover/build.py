"""The handover put together: its rows (handover_rows), its lists, its next action and whether
its reason still holds, as one Handover, whole or cut to the first items of each list."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from django.utils import timezone

from journal.models import Run, RunStatus
from journal.selectors import plan_with_keys

from . import why_words
from .advice import next_action, reason_now
from .attempts import run_attempts
from .lists import already_so_steps, completed_steps, customer_told_list, not_done_steps, uncertain_steps
from .objects import HANDOVER_VERSION, Coverage, Handover
from .rows import HandoverRows, handover_rows, run_state_token


def handover_build(rows: HandoverRows, now: datetime | None = None, *, limit: int | None = None) -> Handover:
    """The handover of the rows. With `limit`, its completed list holds the first `limit` steps
    (and any an undo was asked for) for handover_cut to draw: the steps past them, which nobody
    will see, are read for the next action and `totals` only (StandingStep)."""
    if limit is None and not rows.complete:
        raise ValueError("these rows were loaded for a handover cut to its first items: pass its limit")
    now = now or timezone.now()
    run = rows.run
    planned = plan_with_keys(run)
    plan_detail = {step["key"]: step.get("detail", "") for step in planned}
    completed, every_step = completed_steps(rows, plan_detail, now, limit)
    not_done = not_done_steps(rows, planned)
    uncertain = uncertain_steps(rows, plan_detail)
    reason = run.outcome_reason or ("run_stuck" if rows.stuck else "")
    customer_told = customer_told_list(rows)
    already_so = already_so_steps(rows, plan_detail)
    lists: dict[str, list[Any]] = {
        "completed": completed,
        "not_done": not_done,
        "uncertain": uncertain,
        "already_so": already_so,
        "customer_told": customer_told,
    }
    holds, answered = reason_now(rows, reason=reason, completed=every_step, uncertain=uncertain)
    return Handover(
        handover_version=HANDOVER_VERSION,
        run_id=run.pk,
        ticket_id=run.ticket_id,
        order_id=run.order_id,
        task_type=run.task_type,
        status=RunStatus(run.status),
        reason=reason,
        reason_detail=why_words.run_why_words(run.outcome_why, run.outcome_detail),
        reason_why=run.outcome_why,
        reason_holds=holds,
        reason_answered=answered,
        awaiting_person=run.awaiting_person,
        assignee=run.assignee.get_username() if run.assignee_id and run.assignee else None,
        completed=completed,
        not_done=not_done,
        uncertain=uncertain,
        customer_told=customer_told,
        already_so=already_so,
        next_action=next_action(
            run=run, completed=every_step, not_done=not_done, uncertain=uncertain, stuck=rows.stuck
        ),
        coverage=Coverage.of(rows.coverage) if rows.coverage is not None else None,
        versions=run.versions,
        deadline=run.deadline,
        deadline_passed=bool(run.deadline and run.deadline <= now),
        state=run_state_token(run, rows),
        attempts=run_attempts(rows),
        totals={name: len(items) for name, items in lists.items()} | {"completed": len(every_step)},
    )


def handover_for(run: Run, limit: int | None = None) -> Handover:
    """The run's handover, its lists cut to their first `limit` items (None: whole)."""
    return handover_cut(handover_build(handover_rows(run, limit=limit), limit=limit), limit)


# How many items of each of its lists a handover answers with unless asked for all (the API's
# ?all=1, the run page's "show all" links): a run of 10,000 calls answers as fast as one of ten.
HANDOVER_LIST_LIMIT = 50
HANDOVER_LISTS = ("completed", "not_done", "uncertain", "already_so", "customer_told")


def handover_cut(handover: Handover, limit: int | None = HANDOVER_LIST_LIMIT) -> Handover:
    """The handover with each list cut to its first `limit` items (None: whole); `totals` keeps
    each list's length."""
    if limit is None:
        return handover
    return dataclasses.replace(handover, **{name: getattr(handover, name)[:limit] for name in HANDOVER_LISTS})
