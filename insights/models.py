"""The insights page's rollup of the error panels (insights.errors): counts per tenant, per UTC
hour of the runs' start, per task type, folded from the journal by insights.rollup's beat task so
that the page sums a few thousand rows rather than recounting a million runs and their calls."""

from __future__ import annotations

from django.db import models


class ErrorCountGrain(models.TextChoices):
    """What one rollup row counts. Each grain is a separate row because its counts of distinct
    runs do not add up from a finer grain (a run calling two tools counts once per task type)."""

    # tool and error_class empty: runs, loops, and the five counters (the larger of derived and
    # reported for retries, repairs and replans; as reported for reflections and escalations).
    RUN = "run", "Per task type"
    # tool set: the runs calling it, its calls, failed calls, loops, derived retries/repairs/replans.
    TOOL = "tool", "Per tool"
    # error_class set: the failed calls of that class, the runs they failed in, the runs looping.
    CLASS = "class", "Per error class"
    # tool and error_class set: that tool's failed calls of that class (its commonest class).
    TOOL_CLASS = "tool_class", "Per tool and error class"


class ErrorCount(models.Model):
    """The error panels' counts of the runs of one tenant started in one UTC hour, of one task
    type, at one grain. Written only by insights.rollup.errors_fold, which replaces an hour's
    rows whole; read by insights.errors for every hour the fold has counted and nothing has
    changed since."""

    tenant = models.ForeignKey("journal.Tenant", on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField(help_text="The start of the UTC hour the runs started in.")
    task_type = models.SlugField(max_length=64)
    grain = models.CharField(max_length=10, choices=ErrorCountGrain.choices)
    tool = models.CharField(max_length=200, blank=True)
    error_class = models.CharField(max_length=40, blank=True)
    runs = models.PositiveIntegerField(default=0)
    calls = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    loops = models.PositiveIntegerField(default=0)
    retries = models.PositiveIntegerField(default=0)
    repairs = models.PositiveIntegerField(default=0)
    replans = models.PositiveIntegerField(default=0)
    reflections = models.PositiveIntegerField(default=0)
    escalations = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            # Also the index of the page's read: one tenant, one grain, a range of hours.
            models.UniqueConstraint(
                fields=["tenant", "grain", "hour", "task_type", "tool", "error_class"],
                name="insights_error_count_key",
            )
        ]
        indexes = [models.Index(fields=["hour"], name="insights_error_count_hour_idx")]

    def __str__(self) -> str:
        return f"{self.grain} {self.task_type} {self.tool} {self.error_class} at {self.hour:%Y-%m-%d %H}h"


class ErrorFold(models.Model):
    """Where the error rollup stands: one row (pk 1), locked by each fold so that two never
    interleave. `counted_before`: every hour before it has been counted (None: never folded, the
    page counts everything live). `last_event_id`: the journal events up to it had happened
    when the rollup was counted; a run with a later event changed since, and its hour is
    counted live until the next fold."""

    counted_before = models.DateTimeField(null=True, blank=True)
    last_event_id = models.BigIntegerField(default=0)
    folded_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"error rollup counted before {self.counted_before} (events to {self.last_event_id})"
