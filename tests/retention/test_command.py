"""manage.py retention and its beat task: archive, dry run, verify, and the chain still whole."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from audit.models import AuditAction, AuditEntry
from config.celery import app as celery_app
from journal.models import Run, Tenant
from retention import files as archive_files
from retention import services
from retention.models import Archive, ArchivedRun
from retention.tasks import archive_due_runs_task

pytestmark = pytest.mark.django_db


def _run_command(*args: str) -> str:
    out: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            out.append(text)

        def flush(self) -> None:
            pass

    call_command("retention", *args, stdout=Out(), stderr=Out())
    return "".join(out)


@pytest.fixture
def due_now(tenant: Tenant) -> Tenant:
    """The tenant keeps nothing: a run that has ended is due at once (the admin refuses such a
    period, tests/retention/test_validation.py; the rows allow it, and this test needs it)."""
    Tenant.objects.filter(pk=tenant.pk).update(retention_days=0)
    tenant.refresh_from_db()
    return tenant


def _rewrite(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """The archive file with `change` applied to each line, gzip'd again."""
    with gzip.open(path, "rt") as zipped:
        lines = [json.loads(line) for line in zipped]
    for line in lines:
        change(line)
    with gzip.open(path, "wt") as zipped:
        zipped.writelines(json.dumps(line) + "\n" for line in lines)


def test_the_command_archives_what_is_due_and_prints_each_archive(
    due_now: Tenant, completed_run: Callable[[str], Run], archive_dir: Path
) -> None:
    runs = [completed_run(f"T-20{n}") for n in range(3)]

    said = _run_command()

    archive = Archive.objects.get()
    assert (
        f"sundry {archive.month:%Y-%m}: 3 runs archived to {archive.file_name} ({archive.bytes} bytes" in said
    )
    assert (archive_dir / archive.file_name).stat().st_size == archive.bytes
    assert Run.objects.filter(pk__in=[run.pk for run in runs], archived_at__isnull=False).count() == 3
    assert "intact" in _run_command("--verify")
    call_command("verify_audit")  # the chain verifies with the archiving's own audit row in it
    assert AuditEntry.objects.filter(action=AuditAction.RUNS_ARCHIVED).count() == 1


def test_a_dry_run_archives_nothing_and_says_what_would_be(
    due_now: Tenant, completed_run: Callable[[str], Run], archive_dir: Path
) -> None:
    completed_run("T-301")
    completed_run("T-302")

    said = _run_command("--dry-run")

    assert "sundry" in said and "would archive 2 runs" in said
    assert not Archive.objects.exists()
    assert not Run.objects.filter(archived_at__isnull=False).exists()
    assert not AuditEntry.objects.filter(action=AuditAction.RUNS_ARCHIVED).exists()
    assert not archive_dir.exists() or not any(archive_dir.rglob("*.gz"))


def test_a_tampered_archive_fails_verify(
    due_now: Tenant, completed_run: Callable[[str], Run], archive_dir: Path
) -> None:
    completed_run("T-401")
    _run_command()
    archive = Archive.objects.get()
    path = archive_dir / archive.file_name

    def drop_a_refund(line: dict[str, Any]) -> None:
        if line["kind"] == "intent":
            line["row"]["receipt"] = {}

    _rewrite(path, drop_a_refund)

    with pytest.raises(CommandError, match="1 archives do not match"):
        _run_command("--verify")
    assert "digest" in services.verify_archive(archive)[0].problem


def test_an_archive_whose_audit_rows_are_not_the_chains_fails_verify(
    due_now: Tenant, resolved_run: Callable[[str], Run], archive_dir: Path
) -> None:
    """Rewritten with its digest recorded again (someone who can write both): the live audit
    chain, which is never archived, still tells."""
    resolved_run("T-501")
    _run_command()
    archive = Archive.objects.get()
    path = archive_dir / archive.file_name

    def blame_someone_else(line: dict[str, Any]) -> None:
        if line["kind"] == "audit":
            line["row"]["note"] = "nobody did anything"

    _rewrite(path, blame_someone_else)
    Archive.objects.filter(pk=archive.pk).update(
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(), bytes=path.stat().st_size
    )

    problems = services.verify_archive(Archive.objects.get(pk=archive.pk))

    assert problems and all("differs from the live chain" in found.problem for found in problems)


def test_a_file_that_does_not_verify_leaves_its_runs_unarchived(
    due_now: Tenant, completed_run: Callable[[str], Run], archive_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [completed_run("T-601"), completed_run("T-602")]
    write = archive_files.archive_file_write

    def write_then_lose_the_end(file_name: str, lines: Any) -> Any:
        written = write(file_name, lines)
        path = archive_files.archive_path(file_name)
        path.write_bytes(path.read_bytes()[:-20])  # a disk that lost the file's end
        return written

    monkeypatch.setattr(services, "archive_file_write", write_then_lose_the_end)

    with pytest.raises(CommandError, match="did not verify"):
        _run_command()

    archive = Archive.objects.get()
    assert archive.verified_at is None and "digest" in archive.problem
    assert not Run.objects.filter(pk__in=[run.pk for run in runs], archived_at__isnull=False).exists()
    assert not ArchivedRun.objects.exists()
    assert not AuditEntry.objects.filter(action=AuditAction.RUNS_ARCHIVED).exists()


def test_beat_runs_the_archiving_daily(due_now: Tenant, completed_run: Callable[[str], Run]) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["retention-archive-due-runs"]
    assert entry["task"] == "retention.archive_due_runs"
    assert entry["schedule"] == 24 * 3600.0
    assert "retention.archive_due_runs" in celery_app.tasks
    run = completed_run("T-701")

    assert archive_due_runs_task() == 1

    run.refresh_from_db()
    assert run.archived_at is not None


def test_the_command_names_the_runs_that_hold_a_past_month(
    runs_in_every_state: dict[str, Run], tenant: Tenant
) -> None:
    # Created long ago, as if the month had passed: the journal stamps creation now.
    Run.objects.filter(ticket_id__in=["T-RUNNING", "T-DEAD-LETTER"]).update(
        created_at=timezone.now() - timedelta(days=tenant.retention_days + 62)
    )

    said = _run_command("--dry-run")

    assert "cannot be dropped: 2 runs not archived" in said
    assert "T-RUNNING" in said and "still running" in said
    assert "T-DEAD-LETTER" in said and "a dead letter is open" in said
