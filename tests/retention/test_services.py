"""retention.services: due runs archived to a verified file holding exactly their rows; runs
not due left alone and named as what holds their month."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from audit.models import AuditAction, AuditEntry
from journal.models import Run
from retention.models import Archive, ArchivedRun
from retention.selectors import BlockReason, blocked_months
from retention.services import ARCHIVING_LOCK, archive_due_runs
from tests.retention.conftest import past_retention

pytestmark = pytest.mark.django_db


def _rows(table: str, column: str, run: Run) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT row_to_json(t)::text FROM {table} AS t WHERE t.{column} = %s", [run.pk])  # noqa: S608
        return sorted((json.loads(text) for (text,) in cursor.fetchall()), key=lambda row: row.get("id") or 0)


def _lines(path: Path, run: Run, kind: str) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as zipped:
        lines = [json.loads(line) for line in zipped]
    return sorted(
        (line["row"] for line in lines if line["run"] == str(run.pk) and line["kind"] == kind),
        key=lambda row: row.get("id") or 0,
    )


def test_a_due_run_is_archived_to_a_file_holding_exactly_its_rows(
    completed_run: Callable[[str], Run], resolved_run: Callable[[str], Run], archive_dir: Path
) -> None:
    completed = completed_run("T-1001")
    resolved = resolved_run("T-1002")

    outcomes = archive_due_runs(past_retention(completed.tenant))

    assert [sorted(outcome.marked) for outcome in outcomes] == [sorted([str(completed.pk), str(resolved.pk)])]
    archive = Archive.objects.get()
    path = archive_dir / archive.file_name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == archive.sha256
    assert path.stat().st_size == archive.bytes
    assert archive.verified_at is not None and archive.problem == ""
    for run in (completed, resolved):
        run.refresh_from_db()
        assert run.archived_at is not None
        # The run's row as it was archived: before it was marked (the mark moves its version).
        [run_line] = _lines(path, run, "run")
        [run_row] = _rows("journal_run", "id", run)
        assert run_line == run_row | {"archived_at": None, "version": run.version - 1}
        assert _lines(path, run, "intent") == _rows("journal_intent", "run_id", run)
        assert _lines(path, run, "event") == _rows("journal_journalevent", "run_id", run)
        assert _lines(path, run, "audit") == _rows("audit_auditentry", "run_id", run)
        archived = ArchivedRun.objects.get(run=run)
        assert (archived.archive, archived.intents, archived.events) == (
            archive,
            run.intents.count(),
            run.events.count(),
        )
    assert len(_lines(path, resolved, "audit")) >= 1  # the person's resolve is in its proof
    assert (archive.runs, archive.intents) == (2, 3)
    entry = AuditEntry.objects.get(action=AuditAction.RUNS_ARCHIVED)
    assert (entry.tenant_id, entry.new_state["file"], entry.new_state["runs"]) == (
        completed.tenant_id,
        archive.file_name,
        2,
    )


def _reasons(now: datetime) -> dict[str, set[BlockReason]]:
    return {run.ticket_id: set(run.reasons) for blocked in blocked_months(now) for run in blocked.runs}


def test_runs_not_due_are_left_alone_and_named_with_what_holds_their_month(
    runs_in_every_state: dict[str, Run], completed_run: Callable[[str], Run]
) -> None:
    recent = completed_run("T-RECENT")
    # The journal stamps a run's creation now; this one's month must be long past while the
    # run itself ended today.
    Run.objects.filter(pk=recent.pk).update(created_at=timezone.now() - timedelta(days=150))

    assert archive_due_runs(timezone.now()) == []
    assert _reasons(timezone.now()) == {"T-RECENT": {BlockReason.WITHIN_RETENTION}}

    later = timezone.now() + timedelta(days=recent.tenant.retention_days + 40)
    archived = archive_due_runs(later)

    assert [outcome.marked for outcome in archived] == [[str(recent.pk)]]
    assert set(Run.objects.filter(archived_at__isnull=False).values_list("ticket_id", flat=True)) == {
        "T-RECENT"
    }
    assert _reasons(later) == {
        "T-RUNNING": {BlockReason.RUNNING},
        "T-AWAITING": {BlockReason.AWAITING_PERSON, BlockReason.OPEN_ESCALATION},
        "T-UNKNOWN": {BlockReason.UNKNOWN_INTENT},
        "T-ESCALATION": {BlockReason.OPEN_ESCALATION},
        "T-DEAD-LETTER": {BlockReason.OPEN_DEAD_LETTER},
    }


def test_a_second_archiving_at_once_archives_nothing(completed_run: Callable[[str], Run]) -> None:
    run = completed_run("T-801")
    db = settings.DATABASES["default"]
    dsn = f"host={db['HOST']} port={db['PORT']} dbname={connection.settings_dict['NAME']} user={db['USER']}"
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(hashtext(%s))", [ARCHIVING_LOCK])
        assert archive_due_runs(past_retention(run.tenant)) == []
        # Released here, not by closing: a closed connection's backend may hold it a moment more.
        other.execute("SELECT pg_advisory_unlock(hashtext(%s))", [ARCHIVING_LOCK])
    assert not Archive.objects.exists()
    assert [outcome.marked for outcome in archive_due_runs(past_retention(run.tenant))] == [[str(run.pk)]]
