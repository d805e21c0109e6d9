"""The compensation catalogue and the record of every compensation run.

For every write tool the catalogue says what undoes it — a compensating tool and how its
arguments come from the original step's arguments and receipt — and how honestly reversible it
is: fully, until a condition or a deadline read from the receipt, partially (and what is lost),
or not at all. Admins edit it; every change is kept (django-simple-history).

An entry without a tenant is the default for every tenant; a tenant's own entry for the same tool
is used instead of it for that tenant's runs (compensations.selectors)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from simple_history.models import HistoricalRecords

from journal.models import Intent, Run, Tenant
from journal.tenancy import TenantOrDefault, tenant_or_default_constraints


class Reversibility(models.TextChoices):
    REVERSIBLE = "reversible", "Reversible"
    REVERSIBLE_UNTIL = "reversible_until", "Reversible until a condition or deadline"
    PARTIAL = "partial", "Partially reversible"
    NONE = "none", "Not reversible"


class CatalogueEntry(TenantOrDefault):
    """One write tool's undo, written by admins (or seeded: compensations.defaults.catalogue_seed).

    `argument_mapping` maps each argument of the compensating tool to a source (resolved by
    compensations.mapping.compensation_args):
      - "args.<name>": the original step's argument, as it was sent;
      - "receipt.<name>": a field of the original step's receipt (which must be one of the
        tool's ToolSpec.receipt_fields, or the undo cannot be built from what was stored);
      - "negate:args.<name>" / "negate:receipt.<name>": the same, numerically negated (an
        opposite adjustment: the ERP's adjust_stock is undone by adjusting by -qty).
    e.g. {"reservation_id": "receipt.reservation_id"}.

    Reversibility: `reversible` — the compensating tool undoes it completely. `reversible_until`
    — completely, until `until_condition` ("until collection") or the deadline in the receipt
    field `deadline_field` ("recall_cutoff"); if `loss` is set, undoing after that point still
    works but loses `loss` (a shipment recalled after its cutoff costs a recall fee), if blank,
    after that point it cannot be undone. `partial` — always loses `loss`. `none` — nothing
    undoes it (no compensating tool); `staff_notes` says what a person does instead."""

    tenant_key = "tool"  # a tenant's own entry for a tool is used instead of the default (journal.tenancy)

    tool = models.CharField(max_length=100)
    description = models.CharField(max_length=300)
    compensating_tool = models.CharField(max_length=100, blank=True)
    argument_mapping = models.JSONField(default=dict, blank=True)
    reversibility = models.CharField(max_length=20, choices=Reversibility.choices)
    until_condition = models.CharField(max_length=200, blank=True)
    deadline_field = models.CharField(max_length=100, blank=True)
    loss = models.CharField(max_length=200, blank=True)
    staff_notes = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["tool", "tenant"]
        verbose_name_plural = "catalogue entries"
        constraints = tenant_or_default_constraints(
            "tool",
            per_tenant="catalogue_one_entry_per_tenant_and_tool",
            default="catalogue_one_default_per_tool",
        )

    def __str__(self) -> str:
        whose = f"{self.tenant.slug}: " if self.tenant is not None else ""
        return f"{whose}{self.tool} → {self.compensating_tool or 'nothing'} ({self.reversibility})"


class CompensationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DONE = "done", "Done"
    PARTIAL = "partial", "Partially done"
    DEAD_LETTERED = "dead_lettered", "Failed: in the dead-letter queue"
    NOT_POSSIBLE = "not_possible", "Not possible"


class Compensation(models.Model):
    """One attempt to undo one performed step: the original intent, the compensation's own
    intent (a new journaled action with its own key), and how it ended. Written by the
    compensations executor."""

    # Both intents are foreign keys without database constraints: the intent table is
    # partitioned by month (docs/scaling.md), and PostgreSQL lets a constraint reference it only
    # through a key that holds the partition column. compensations.services writes both ids from
    # rows it has just read or written, in the same transaction; the recovery invariants
    # (scenarios.invariants) check that they point at intents of the same run.
    original = models.ForeignKey(
        Intent, on_delete=models.PROTECT, related_name="compensations", db_constraint=False
    )
    # The original's tenant, task type and tool, copied when the compensation is requested (an
    # intent's and a run's never change): the insights page counts a tenant's compensations and
    # dead letters by an index range on them, where reaching them through each one's intent and
    # run cost two lookups per compensation (bench/pages.py at 1,000,000 runs).
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    # The original's run, copied the same way: whether a run has an open dead letter (the queue's
    # reason, retention's hold) is one lookup by this index, where reaching the compensations
    # through each of the run's intents cost one lookup per intent.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+")
    task_type = models.SlugField(max_length=64)
    tool = models.CharField(max_length=100)
    intent = models.OneToOneField(
        Intent,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="compensation_of",
        db_constraint=False,
    )
    status = models.CharField(
        max_length=20, choices=CompensationStatus.choices, default=CompensationStatus.PENDING
    )
    not_undone = models.TextField(
        blank=True, help_text="What could not be undone (partial), or why not possible."
    )
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    # Raised by a person's retry from the dead-letter queue: the compensating call is then a new
    # occurrence with a new key, because the failed one's key would only replay its failure.
    retry_round = models.PositiveIntegerField(default=0)
    # Set, under the row lock, when a worker claims the send of this round (compensation_claim_send)
    # and cleared when the call has answered: while it is set a person cannot resolve the dead
    # letter, because an undo already on its way cannot be called back.
    sending_since = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # One live compensation per step: two clicks, two workers, one undo.
            models.UniqueConstraint(
                fields=["original"],
                condition=~models.Q(status=CompensationStatus.NOT_POSSIBLE),
                name="one_compensation_per_step",
            )
        ]
        indexes = [models.Index(fields=["tenant", "created_at"], name="compensation_tenant_idx")]

    def __str__(self) -> str:
        return f"undo {self.original.step_id}: {self.status}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding and (self.tenant_id is None or self.run_id is None):
            # Copied from the original when the requester did not say (the services do).
            run = self.original.run
            self.run_id, self.tenant_id = run.pk, run.tenant_id
            self.task_type, self.tool = run.task_type, self.original.tool
        super().save(*args, **kwargs)


class DeadLetter(models.Model):
    """A compensation that failed past its retry budget, waiting for a person. It has an owner
    from the moment it is created (settings.SEAM_DEAD_LETTER_DEFAULT_OWNER, else the first team
    lead of the tenant) and stays open until someone resolves it with a note."""

    compensation = models.OneToOneField(Compensation, on_delete=models.PROTECT, related_name="dead_letter")
    error_class = models.CharField(max_length=20)
    error = models.TextField()
    attempts = models.PositiveIntegerField()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    resolution_note = models.TextField(blank=True)
    # Moved by every change to the letter or to its compensation's round, by a person or a
    # worker: a person's action carries the version their page showed (state_token) and is
    # refused if it moved since.
    version = models.PositiveIntegerField(default=0)

    class Meta:
        permissions = [("assign_deadletter", "Assign dead letters to a person (team leads)")]
        indexes = [
            models.Index(
                fields=["created_at"],
                condition=models.Q(resolved_at__isnull=True),
                name="deadletter_open_idx",
            )
        ]

    def __str__(self) -> str:
        return f"dead letter: {self.compensation}"

    @property
    def state_token(self) -> str:
        """What a page showing this letter posts back with an action on it."""
        return str(self.version)

    @property
    def resolved_by_person(self) -> bool:
        return self.resolved_at is not None and self.resolved_by_id is not None


class DroppedSend(models.Model):
    """A compensating call a worker did not send because, when it came to send it, the state
    that queued it was gone: a person had resolved the dead letter since (resolved_by), or a
    newer round had replaced it. Append only: the record that the person's decision was kept."""

    compensation = models.ForeignKey(Compensation, on_delete=models.PROTECT, related_name="dropped_sends")
    retry_round = models.PositiveIntegerField()
    at = models.DateTimeField(auto_now_add=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reason = models.CharField(max_length=40)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.compensation_id}:{self.retry_round}:{self.reason}"
