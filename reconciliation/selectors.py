"""Reads of the recovery policies. A tenant's own policy for a task type wins over the default
(the policy without a tenant); reconciliation looks a policy up only through here."""

from __future__ import annotations

from django.db.models import F, Q

from .models import TaskPolicy


def policy_for(*, tenant_id: int | None, task_type: str) -> TaskPolicy | None:
    """The policy that governs a task type's dead runs for the tenant: its own, else the
    default, else None (the run goes to a person)."""
    return (
        TaskPolicy.objects.filter(Q(tenant_id=tenant_id) | Q(tenant__isnull=True), task_type=task_type)
        .order_by(F("tenant_id").asc(nulls_last=True))
        .first()
    )
