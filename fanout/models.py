"""The record of fan-outs: read branches dispatched together against one shared deadline, what
each attempt of each branch came to, and the outcome and merged decision the group settled on.

Written only by fanout.services, each change in the same transaction as the run's journal
event that records it; read by fanout.selectors (the handover's coverage)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from journal.models import Run


class Outcome(models.TextChoices):
    """Computed by code at the deadline, never by a model."""

    ALL_GOOD = "all_good", "All good"
    SOME_GOOD = "some_good", "Some good (partial, proceed labelled)"
    REQUIRED_MISSING = "required_missing", "A required branch is missing (a person decides)"
    NONE_GOOD = "none_good", "None good"


class FanOut(models.Model):
    """One group of read branches a run dispatched together at `turn`, sharing the deadline
    `deadline_at` (`deadline_ms` after dispatch). Until it settles `outcome` is blank; then it
    holds the outcome, `coverage` ("2/3": branches with a result over branches dispatched), and
    `decision`: what the merge decided, by which declared rule, resting on which results, and
    the conflict (both sides) when the rules could not settle it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="fanouts", db_index=False)
    turn = models.PositiveIntegerField()
    name = models.CharField(max_length=100)
    deadline_ms = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    deadline_at = models.DateTimeField()
    settled_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, blank=True)
    coverage = models.CharField(max_length=20, blank=True)
    decision = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["started_at", "id"]
        verbose_name = "fan-out"
        # Serves "the run's latest fan-out" (the handover's coverage) and lookups by run.
        indexes = [models.Index(fields=["run", "-started_at"], name="fanout_run_recent_idx")]

    def __str__(self) -> str:
        return f"{self.name} [{self.outcome or 'open'} {self.coverage}]"

    @property
    def conflict(self) -> dict[str, object] | None:
        conflict = (self.decision or {}).get("conflict")
        return conflict if isinstance(conflict, dict) else None


class BranchStatus(models.TextChoices):
    PENDING = "pending", "In flight"
    OK = "ok", "Answered"
    ERROR = "error", "Failed (error class recorded)"
    MISSING = "missing", "No answer by the deadline"


class FanOutBranch(models.Model):
    """One attempt at one branch of a fan-out: the read tool and its arguments, whether the
    branch was declared required, and what the attempt came to — its result, or its error class
    and message, or `missing` when the deadline came first — with its latency. A retry is a
    second row of the same branch (`attempt` 2); `retry_note` on the failed attempt says whether
    a retry was sent and why, or why it was not."""

    fanout = models.ForeignKey(FanOut, on_delete=models.CASCADE, related_name="branches", db_index=False)
    name = models.CharField(max_length=100)
    tool = models.CharField(max_length=100)
    args = models.JSONField(default=dict)
    required = models.BooleanField(default=False)
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=BranchStatus.choices, default=BranchStatus.PENDING)
    error_class = models.CharField(max_length=20, blank=True)
    error_message = models.TextField(blank=True)
    # For `missing`, the time waited until the deadline: a lower bound of the call's latency.
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True)
    retry_note = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["fanout", "name", "attempt"]
        verbose_name = "fan-out branch"
        constraints = [
            models.UniqueConstraint(fields=["fanout", "name", "attempt"], name="fanout_branch_attempt"),
        ]
        indexes = [
            # The p95 of a tool reads its most recent recorded latencies with LIMIT: an index
            # walked backwards from the newest row, never a scan of every call ever made.
            models.Index(
                fields=["tool", "-finished_at"],
                condition=Q(status__in=["ok", "missing"]),
                name="fanout_branch_latency_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} #{self.attempt} [{self.status}]"
