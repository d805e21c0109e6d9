"""The archive's record: which file holds which runs' intents, events and audit rows, its
digest and counts, and whether it was verified. Written by retention.services only."""

from __future__ import annotations

from django.db import models

from journal.models import Run, Tenant


class Archive(models.Model):
    """One gzip'd JSON-lines file in the archive store (settings.SEAM_ARCHIVE_DIR) holding, for
    some ended runs of one tenant created in one month (UTC), each run's own row, every intent
    and journal event of it and its audit rows. `verified_at` is set once the file was read back
    and matched its digest and the database's counts; only then are its runs marked archived.
    A row without it is an archive that failed verification (`problem` says how): its runs
    were left as they were."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    month = models.DateField(help_text="The first day of the month (UTC) its runs were created in.")
    file_name = models.CharField(max_length=300, unique=True, help_text="Relative to SEAM_ARCHIVE_DIR.")
    sha256 = models.CharField(max_length=64, help_text="Of the file as written (the gzip'd bytes).")
    bytes = models.PositiveBigIntegerField()
    runs = models.PositiveIntegerField()
    intents = models.PositiveBigIntegerField()
    events = models.PositiveBigIntegerField()
    audit_rows = models.PositiveBigIntegerField()
    created_at = models.DateTimeField()
    verified_at = models.DateTimeField(null=True, blank=True)
    problem = models.TextField(blank=True, help_text="Why verification failed, when it did.")

    class Meta:
        ordering = ["month", "created_at", "id"]
        indexes = [models.Index(fields=["tenant", "month"], name="archive_tenant_month_idx")]

    def __str__(self) -> str:
        return self.file_name


class ArchivedRun(models.Model):
    """A run whose intents and events live in `archive` (verified): written in the transaction
    that sets the run's `archived_at`, with the counts its lines in the file must have."""

    run = models.OneToOneField(Run, on_delete=models.PROTECT, primary_key=True, related_name="archived")
    archive = models.ForeignKey(Archive, on_delete=models.PROTECT, related_name="archived_runs")
    intents = models.PositiveIntegerField()
    events = models.PositiveIntegerField()
    audit_rows = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.run_id} in {self.archive}"
