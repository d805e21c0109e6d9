"""Reads of the recovery policies. A tenant's own policy for a task type wins over the default
(the policy without a tenant: journal.tenancy); reconciliation looks a policy up only through
here."""

from __future__ import annotations

from .models import TaskPolicy


def policy_for(*, tenant_id: int | None, task_type: str) -> TaskPolicy | None:
    """The policy that governs a task type's dead runs for the tenant: its own, else the
    default, else None (the run goes to a person)."""
    policy: TaskPolicy | None = TaskPolicy.objects.filter(task_type=task_type).for_tenant(tenant_id).first()
    return policy
