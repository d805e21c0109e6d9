"""A run nobody had taken becomes the run of the person who acts on it: whoever resumes, undoes,
marks or resolves it is the one colleagues should ask, so the queue's Assignee and "Mine" say so
without a second click. Called by console.actions inside each action's transaction, under the
run's row lock, after the action's own change; the assignment is bumped and audited like
"assign to me", and the assign action hands the run to someone else afterwards."""

from __future__ import annotations

from typing import Any

from audit.chain import audit_record
from audit.models import AuditAction
from handover import words
from journal import transitions
from journal.models import Run, Tenant

ACT = "handover.act_on_run"


def run_claim_if_unassigned(*, run: Run, user: Any, tenant: Tenant, request_id: str = "") -> bool:
    """Assign `run` to `user` if it still has nobody once the action is done (an action that
    assigned it itself, to anyone, is left alone), with its audit row. False when it was not
    assigned: someone had it, or the person's role may not be handed runs."""
    if not user.has_perm(ACT):
        return False
    # Read again under the lock the action holds: the action itself may have assigned the run.
    if Run.objects.filter(pk=run.pk, assignee__isnull=True).values_list("pk").first() is None:
        return False
    transitions.run_bump(run_id=run.pk, assignee=user)
    audit_record(
        user=user,
        tenant=tenant,
        action=AuditAction.ASSIGN,
        run=run,
        old={"assignee": None},
        new={"assignee": user.get_username()},
        note=str(words.ASSIGNED_ON_ACTING),
        request_id=request_id,
    )
    return True
