"""The audit trail's rows: what people did, append only and hash-chained (audit.chain), the
chain's head, and the kept checks of the chain."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from journal.models import Run, Tenant


class AuditAction(models.TextChoices):
    """Every action a person can take from the dashboard, the lockout of a person's login and
    an admin's lifting of it (console.login_throttle), and the retention job's archiving of runs
    and dropping of months (retention.services), which take the journal's rows out of it."""

    ASSIGN = "assign", "Assigned the run"
    COMPENSATE_STEP = "compensate_step", "Compensated one step"
    COMPENSATE_RUN = "compensate_run", "Compensated the run"
    RESUME = "resume", "Resumed the run"
    RETRY_LOOKUP = "retry_lookup", "Retried the lookup of an uncertain step"
    MARK_PERFORMED = "mark_performed", "Marked an uncertain step performed"
    MARK_NOT_PERFORMED = "mark_not_performed", "Marked an uncertain step not performed"
    CUSTOMER_TOLD = "customer_told", "Recorded what the customer was told"
    RESOLVE = "resolve", "Resolved the escalation"
    DEAD_LETTER_TAKE = "dead_letter_take", "Took ownership of a dead letter"
    DEAD_LETTER_ASSIGN = "dead_letter_assign", "Assigned a dead letter"
    DEAD_LETTER_RETRY = "dead_letter_retry", "Retried a dead letter"
    DEAD_LETTER_RESOLVE = "dead_letter_resolve", "Resolved a dead letter"
    LOGIN_LOCKED_OUT = "login_locked_out", "Locked out after too many failed logins"
    LOGIN_UNLOCKED = "login_unlocked", "Let a locked-out person sign in again"
    AUDIT_VERIFY = "audit_verify", "Re-ran the audit chain's verification"
    ALLOW_ATTEMPT = "allow_attempt", "Allowed a refused call again"
    CATALOGUE_EDIT = "catalogue_edit", "Changed a compensation catalogue entry"
    EDIT_STEP = "edit_step", "Edited a not-done step's arguments"
    RUNS_ARCHIVED = "runs_archived", "Archived ended runs' intents and events"
    MONTH_DROPPED = "month_dropped", "Dropped an archived month's intents and events"


class AuditEntry(models.Model):
    """One action a person took, written by console.actions in the same transaction as the change
    it records: who, when, what, on which run and step, the state before and after, their note
    and the request it came from. Append only (PostgreSQL triggers refuse UPDATE, DELETE and
    TRUNCATE), and chained: `hash`, an HMAC under a key kept outside the database, covers this
    row's content and the previous row's hash, so
    `manage.py verify_audit` finds the first row that was altered, removed or inserted out of
    band. `seq` numbers the chain without gaps."""

    seq = models.PositiveBigIntegerField(unique=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    tenant_seq = models.PositiveBigIntegerField(
        help_text="The row's number among its tenant's rows, from 1: what the tenant's pages and exports show."
    )
    at = models.DateTimeField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    username = models.CharField(max_length=150, help_text="As it was when the action was taken.")
    action = models.CharField(max_length=40, choices=AuditAction.choices)
    run = models.ForeignKey(
        Run, on_delete=models.PROTECT, null=True, blank=True, related_name="audit_entries"
    )
    step_id = models.CharField(max_length=255, blank=True)
    old_state = models.JSONField(default=dict, blank=True)
    new_state = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    request_id = models.CharField(max_length=100, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["-seq"]
        indexes = [
            models.Index(fields=["tenant", "-at"], name="audit_tenant_at_idx"),
            models.Index(fields=["run", "-at"], name="audit_run_at_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "tenant_seq"], name="audit_tenant_seq_unique"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.username} {self.action}"


class AuditChainHead(models.Model):
    """The last link of the audit chain: one row, locked by every audit write so that links are
    made one at a time and never fork. `seal` is an HMAC of (seq, hash) under the audit key, so
    the head cannot be moved back without the key; on PostgreSQL a trigger lets it move only
    forward onto the newest audit row and refuses to delete it."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64, default="0" * 64)
    seal = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"audit chain at #{self.seq}"


class AuditResult(models.TextChoices):
    """What a check of the chain found (audit.chain.audit_verify). Wiped, truncated and rolled
    back are found against the witness (audit.witness), which the database does not hold."""

    INTACT = "intact", "Intact"
    BROKEN = "broken", "A row altered, removed or inserted"
    WIPED = "wiped", "Rows the witness saw are gone or replaced"
    TRUNCATED = "truncated", "The newest rows were removed"
    ROLLED_BACK = "rolled_back", "An older copy of the trail was restored"


class AuditVerification(models.Model):
    """One check of the audit chain (audit.chain.audit_verify): asked for by a team lead from
    the audit page (`requested_by`, for their `tenant`: the check counts and names that
    tenant's rows only) or by `manage.py verify_audit` (neither: the whole chain), and filled in
    by the worker when it has walked the chain. The audit page shows its tenant's newest
    finished one."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    requested_at = models.DateTimeField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    checked = models.PositiveBigIntegerField(null=True, blank=True, help_text="Rows verified.")
    broken_at = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The seq of the first row that does not link."
    )
    problem = models.TextField(blank=True)
    result = models.CharField(max_length=20, choices=AuditResult.choices, blank=True)

    class Meta:
        ordering = ["-requested_at", "-pk"]
        indexes = [models.Index(fields=["tenant", "finished_at"], name="audit_verification_tenant_idx")]

    def __str__(self) -> str:
        return f"audit verification {self.pk} ({'pending' if self.finished_at is None else self.problem or 'intact'})"

    @property
    def ok(self) -> bool:
        return (
            self.finished_at is not None
            and self.broken_at is None
            and self.result in ("", AuditResult.INTACT)
        )
