"""Reads of the recovery policies. A tenant's own policy for a task type wins over the default
(the policy without a tenant: journal.tenancy); reconciliation looks a policy up only through
here."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .models import PHASES, Strategy, TaskPolicy


def policy_for(*, tenant_id: int | None, task_type: str) -> TaskPolicy | None:
    """The policy that governs a task type's dead runs for the tenant: its own, else the
    default, else the deployment's (deployment_policy), else None (the run goes to a person)."""
    policy: TaskPolicy | None = TaskPolicy.objects.filter(task_type=task_type).for_tenant(tenant_id).first()
    return policy if policy is not None else deployment_policy(task_type)


def deployment_policy(task_type: str) -> TaskPolicy | None:
    """The deployment's policy for a task type that has none (settings.
    SEAM_DEFAULT_RECOVERY_POLICY, `strategy` or `resume_until_phase:<phase>`), as an unsaved
    row at version 0; None when the deployment declares none."""
    declared = settings.SEAM_DEFAULT_RECOVERY_POLICY.strip()
    if not declared:
        return None
    strategy, _, phase = declared.partition(":")
    if strategy not in Strategy.values or (strategy == Strategy.RESUME_UNTIL_PHASE) != (phase in PHASES):
        raise ImproperlyConfigured(
            f"SEAM_DEFAULT_RECOVERY_POLICY={declared!r}: expected one of {', '.join(Strategy.values)}, "
            f"with :<phase> ({', '.join(PHASES)}) for resume_until_phase only"
        )
    return TaskPolicy(task_type=task_type, strategy=strategy, phase=phase, version=0)
