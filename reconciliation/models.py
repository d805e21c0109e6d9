"""The written policy that decides, per task type, what happens to a run that died once its
calls are settled: finish it (resume), finish it only if it had not yet started acting, or
undo what can be undone and hand it to a person. Admins edit it; every change is kept.

A policy without a tenant is the default for every tenant; a tenant's own policy for the same
task type is used instead of it for that tenant's runs (reconciliation.selectors)."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from simple_history.models import HistoricalRecords

from journal.tenancy import TenantOrDefault, tenant_or_default_constraints

PHASES = ("gather", "decide", "act", "notify")


class Strategy(models.TextChoices):
    RESUME = "resume", "Resume: finish the remaining steps"
    RESUME_UNTIL_PHASE = "resume_until_phase", "Resume until a phase was entered, then compensate"
    COMPENSATE_AND_ESCALATE = "compensate_and_escalate", "Always compensate and escalate"


class TaskPolicy(TenantOrDefault):
    """One task type's recovery policy. `phase` (for resume_until_phase) is the first phase
    whose writes make a run no longer resumable: a returns run that died before it began acting
    is re-run; one that had already acted is compensated. `max_resume_age` bounds how old the
    information a resumption would act on may be. `version` increases with every edit."""

    tenant_key = "task_type"  # a tenant's own policy is used instead of the default (journal.tenancy)

    task_type = models.SlugField(max_length=64)
    strategy = models.CharField(max_length=30, choices=Strategy.choices)
    phase = models.CharField(
        max_length=20, blank=True, choices=[(p, p) for p in PHASES], help_text="For resume_until_phase."
    )
    max_resume_age = models.DurationField(default=timedelta(hours=1))
    undo_before_escalating = models.BooleanField(
        default=True,
        help_text="When a run is escalated (past its phase, its age or its deadline), first undo what "
        "the catalogue can undo. Off: the person decides between finishing and undoing (for a "
        "return: issue the refund, or cancel the pickup).",
    )
    agent_grace = models.DurationField(
        default=timedelta(0),
        help_text="How long past the stale threshold a dead run's agent may still come back "
        "(heartbeat) before the run is handed to a person. Resuming does not wait for it.",
    )
    notes = models.TextField(blank=True, help_text="Why this task type recovers this way.")
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords()

    class Meta:
        verbose_name_plural = "task policies"
        constraints = tenant_or_default_constraints(
            "task_type",
            per_tenant="policy_one_per_tenant_and_task_type",
            default="policy_one_default_per_task_type",
        )

    def __str__(self) -> str:
        whose = f"{self.tenant.slug}: " if self.tenant is not None else ""
        return f"{whose}{self.task_type}: {self.strategy} (v{self.version})"
