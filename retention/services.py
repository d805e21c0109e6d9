"""Retention's writes: archiving the runs that are due, and checking an archive again later
(docs/scaling.md, "Retention and archiving").

Archiving one batch (one tenant, one creation month, oldest runs first): every row of the runs
(the run's own, its intents, its journal events, its audit rows) is written to one gzip'd
JSON-lines file; the Archive row records the file's digest and counts; the file is read back
and checked against both; then, in one durable transaction that locks the runs, each run whose
lines equal its rows in the database is marked archived (ArchivedRun, `Run.archived_at`) with
one audit row. A run whose lines do not match is left as it was, and so are its rows."""

from __future__ import annotations

import contextlib
import json
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from audit.chain import audit_record
from audit.models import AuditAction, AuditEntry
from journal.models import Intent, JournalEvent, Run, Tenant
from journal.partitions import MonthPartition, detach_month, detached_months, discard_month
from journal.services import runs_archived_mark

from .files import FileContents, archive_file_read, archive_file_write, archive_path, file_digest
from .models import Archive, ArchivedRun
from .selectors import (
    archivable_runs,
    blocked_months,
    droppable_months,
    due_batch,
    due_months,
    month_bounds,
    runs_created_in,
)

__all__ = [
    "ArchiveOutcome",
    "ArchiveProblem",
    "DroppedMonth",
    "RetentionDone",
    "archivable_runs",
    "archive_due_runs",
    "blocked_months",
    "drop_archived_months",
    "retention_apply",
    "verify_archive",
]

log = logging.getLogger("seam.retention")

# Runs per archive file: bounds the file, the rows locked at once and the memory counted.
ARCHIVE_BATCH_RUNS = 500
# Who the retention job's audit rows name: a user who cannot sign in (the audit trail records
# people; this is the process that acts for the tenant's retention policy).
RETENTION_USERNAME = "seam-retention"
# Only one archiving at a time (a beat task and a command at once): a session advisory lock.
ARCHIVING_LOCK = "seam.retention.archiving"

# Every row of the runs of a batch, as PostgreSQL renders it (row_to_json: every column). A batch's
# runs were created in one month, so the intents and events are read from that month's partition
# alone (run_created_at prunes the others: docs/scaling.md, "Partitioning by month").
ROWS_SQL = {
    "run": "SELECT t.id::text, row_to_json(t)::text FROM journal_run AS t WHERE t.id = ANY(%(runs)s) ORDER BY t.id",
    "intent": "SELECT t.run_id::text, row_to_json(t)::text FROM journal_intent AS t "
    "WHERE t.run_id = ANY(%(runs)s) AND t.run_created_at >= %(start)s AND t.run_created_at < %(end)s "
    "ORDER BY t.run_id, t.id",
    "event": "SELECT t.run_id::text, row_to_json(t)::text FROM journal_journalevent AS t "
    "WHERE t.run_id = ANY(%(runs)s) AND t.run_created_at >= %(start)s AND t.run_created_at < %(end)s "
    "ORDER BY t.run_id, t.id",
    "audit": "SELECT t.run_id::text, row_to_json(t)::text FROM audit_auditentry AS t "
    "WHERE t.run_id = ANY(%(runs)s) ORDER BY t.run_id, t.seq",
}
LIVE_AUDIT_SQL = "SELECT t.seq, row_to_json(t)::text FROM audit_auditentry AS t WHERE t.seq = ANY(%s)"


def retention_user() -> Any:
    user, created = get_user_model().objects.get_or_create(
        username=RETENTION_USERNAME, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


@contextlib.contextmanager
def _archiving_alone() -> Iterator[bool]:
    """Whether this process holds the archiving lock (False: another archiving is on its way,
    and this one must not write the same runs to a second file)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [ARCHIVING_LOCK])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [ARCHIVING_LOCK])


def _rows_of(run_ids: list[Any], month: date) -> Iterator[tuple[str, str, str]]:
    """(run id, kind, row JSON) for every row of the runs (created in `month`), read through
    server-side cursors so memory does not grow with a run's size."""
    start, end = month_bounds(month)
    for kind, statement in ROWS_SQL.items():
        with connection.chunked_cursor() as cursor:
            cursor.execute(statement, {"runs": run_ids, "start": start, "end": end})
            for run_id, row_json in cursor:
                yield run_id, kind, row_json


def journal_counts(run_ids: list[Any], month: date) -> dict[str, Counter[str]]:
    """Per run (by id as text, created in `month`), its rows in the database, counted as an
    archive counts lines."""
    start, end = month_bounds(month)
    in_month = {"run_created_at__gte": start, "run_created_at__lt": end}
    counts = {str(run_id): Counter({"run": 1}) for run_id in run_ids}
    rows: tuple[tuple[str, QuerySet[Any]], ...] = (
        ("intent", Intent.objects.filter(run_id__in=run_ids, **in_month)),
        ("event", JournalEvent.objects.filter(run_id__in=run_ids, **in_month)),
        ("audit", AuditEntry.objects.filter(run_id__in=run_ids)),
    )
    for kind, of_runs in rows:
        for row in of_runs.order_by().values("run_id").annotate(rows=Count("pk")):
            counts[str(row["run_id"])][kind] = row["rows"]
    return counts


# --- archiving --------------------------------------------------------------------------------


@dataclass
class ArchiveOutcome:
    """One batch: its archive, the runs marked archived and those left as they were."""

    tenant: Tenant
    month: date
    archive: Archive
    marked: list[str] = field(default_factory=list)
    unmarked: list[str] = field(default_factory=list)


def _file_name(tenant: Tenant, month: date, at: datetime) -> str:
    return f"{tenant.slug}/{month:%Y-%m}/runs-{at:%Y%m%dT%H%M%S%f}.jsonl.gz"


def _archive_record(tenant: Tenant, month: date, file_name: str, written: Any) -> Archive:
    contents: FileContents = written.contents
    return Archive.objects.create(
        tenant=tenant,
        month=month,
        file_name=file_name,
        sha256=written.sha256,
        bytes=written.bytes,
        runs=len(contents.per_run),
        intents=contents.total("intent"),
        events=contents.total("event"),
        audit_rows=contents.total("audit"),
        created_at=timezone.now(),
    )


def _read_back(archive: Archive) -> FileContents | str:
    """The file's contents, read from disk, if its digest and size are the recorded ones and
    its totals the Archive's; else what is wrong, in words for the operator."""
    path = archive_path(archive.file_name)
    try:
        digest, size = file_digest(path)
        if (digest, size) != (archive.sha256, archive.bytes):
            return f"the file's digest is {digest} ({size} bytes), not the recorded {archive.sha256}"
        contents = archive_file_read(path)
    except (OSError, EOFError, ValueError) as error:
        return f"the file cannot be read: {error}"
    totals = (
        len(contents.per_run),
        contents.total("intent"),
        contents.total("event"),
        contents.total("audit"),
    )
    if totals != (archive.runs, archive.intents, archive.events, archive.audit_rows):
        return f"the file holds {totals} (runs, intents, events, audit rows), not the recorded counts"
    return contents


def _mark_archived(
    archive: Archive, run_ids: list[Any], contents: FileContents, due_at: datetime
) -> ArchiveOutcome:
    """Mark archived each run of the batch still due at `due_at` whose lines equal its rows,
    under the runs' locks so no row is added between the count and the mark; one audit row for
    the batch."""
    outcome = ArchiveOutcome(archive.tenant, archive.month, archive)
    now = timezone.now()
    with transaction.atomic(durable=True):
        locked = list(
            archivable_runs(due_at)
            .filter(pk__in=run_ids)
            .select_for_update(of=("self",))
            .values_list("pk", flat=True)
        )
        in_database = journal_counts(locked, archive.month)
        for run_id in map(str, run_ids):
            matches = run_id in in_database and contents.per_run.get(run_id) == in_database[run_id]
            (outcome.marked if matches else outcome.unmarked).append(run_id)
        _marked_rows_write(archive, outcome, in_database, now)
    return outcome


def _marked_rows_write(
    archive: Archive, outcome: ArchiveOutcome, in_database: dict[str, Counter[str]], now: datetime
) -> None:
    ArchivedRun.objects.bulk_create(
        ArchivedRun(
            run_id=run_id,
            archive=archive,
            intents=in_database[run_id]["intent"],
            events=in_database[run_id]["event"],
            audit_rows=in_database[run_id]["audit"],
        )
        for run_id in outcome.marked
    )
    runs_archived_mark(run_ids=outcome.marked, at=now)
    archive.verified_at = now if outcome.marked else None
    archive.problem = (
        f"{len(outcome.unmarked)} runs not marked: their rows in the database differ from their lines "
        f"or they are no longer due ({', '.join(outcome.unmarked[:10])})"
        if outcome.unmarked
        else ""
    )
    archive.save(update_fields=["verified_at", "problem"])
    if outcome.marked:
        audit_record(
            user=retention_user(),
            tenant=archive.tenant,
            action=AuditAction.RUNS_ARCHIVED,
            new={
                "archive": archive.pk,
                "file": archive.file_name,
                "sha256": archive.sha256,
                "month": f"{archive.month:%Y-%m}",
                "runs": len(outcome.marked),
            },
            note=f"{len(outcome.marked)} ended runs past the tenant's retention of "
            f"{archive.tenant.retention_days} days archived to {archive.file_name}.",
        )


def archive_batch(*, tenant: Tenant, month: date, runs: list[Run], due_at: datetime) -> ArchiveOutcome:
    """Archive `runs` (one tenant's, created in `month`, due at `due_at`): write, record, read
    back, mark."""
    run_ids = [run.pk for run in runs]
    file_name = _file_name(tenant, month, timezone.now())
    archive = _archive_record(
        tenant, month, file_name, archive_file_write(file_name, _rows_of(run_ids, month))
    )
    contents = _read_back(archive)
    if isinstance(contents, str):
        archive.problem = contents
        archive.save(update_fields=["problem"])
        log.error("archive %s failed verification: %s; its runs are left as they were", file_name, contents)
        return ArchiveOutcome(tenant, month, archive, unmarked=[str(run_id) for run_id in run_ids])
    return _mark_archived(archive, run_ids, contents, due_at)


def _archive_month(now: datetime, tenant: Tenant, month: date, batch_size: int) -> list[ArchiveOutcome]:
    outcomes: list[ArchiveOutcome] = []
    while runs := due_batch(now, tenant=tenant, month=month, size=batch_size):
        outcomes.append(archive_batch(tenant=tenant, month=month, runs=runs, due_at=now))
        if outcomes[-1].unmarked:
            break  # the same runs would be due again at once: left for an operator to look at
    return outcomes


def archive_due_runs(
    now: datetime, tenant: Tenant | None = None, *, batch_size: int = ARCHIVE_BATCH_RUNS
) -> list[ArchiveOutcome]:
    """Archive every run due at `now` (of `tenant`, or of every tenant): per tenant and per
    creation month, oldest first, `batch_size` runs to a file. Nothing when another archiving
    holds the lock."""
    with _archiving_alone() as alone:
        if not alone:
            log.warning("retention: another archiving is on its way; this one archives nothing")
            return []
        outcomes: list[ArchiveOutcome] = []
        for due in due_months(now, tenant):
            outcomes += _archive_month(now, due.tenant, due.month, batch_size)
        return outcomes


# --- checking an archive again ----------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveProblem:
    """What a check of an archive found wrong, for the operator."""

    archive: str
    problem: str


def _run_problems(archive: Archive, contents: FileContents) -> list[str]:
    problems = []
    for archived in archive.archived_runs.all():
        run_id = str(archived.run_id)
        expected = Counter(
            {"run": 1, "intent": archived.intents, "event": archived.events, "audit": archived.audit_rows}
        )
        if contents.per_run.get(run_id) != expected:
            problems.append(
                f"run {run_id}: the file holds {dict(contents.per_run.get(run_id) or {})}, not {dict(expected)}"
            )
    return problems


def _audit_problems(contents: FileContents) -> list[str]:
    """Each audit row in the file must be the live chain's row of its seq: same hash, same
    content. The chain is never archived, so the archive is proven by it."""
    with connection.cursor() as cursor:
        cursor.execute(LIVE_AUDIT_SQL, [[row.get("seq") for row in contents.audit_rows]])
        live = {seq: row_json for seq, row_json in cursor.fetchall()}
    problems = []
    for row in contents.audit_rows:
        found = live.get(row.get("seq"))
        if found is None:
            problems.append(f"audit row #{row.get('seq')} is not in the live chain")
        elif json.loads(found) != row:
            problems.append(
                f"audit row #{row.get('seq')} differs from the live chain's (hash {row.get('hash')})"
            )
    return problems


def verify_archive(archive: Archive) -> list[ArchiveProblem]:
    """Check an archive again: the file's digest and size, its counts against the Archive row
    and against each archived run's, and its audit rows against the live chain. [] when whole."""
    contents = _read_back(archive)
    if isinstance(contents, str):
        problems = [contents]
    else:
        problems = _run_problems(archive, contents) + _audit_problems(contents)
    return [ArchiveProblem(archive.file_name, problem) for problem in problems]


# --- dropping archived months ------------------------------------------------------------------


@dataclass(frozen=True)
class DroppedMonth:
    """A month whose two partitions were dropped: their names, their size, its runs by tenant."""

    month: date
    tables: tuple[str, str]
    bytes: int
    runs_by_tenant: dict[str, int]


def _month_drop(partition: MonthPartition) -> DroppedMonth:
    """Take one month's partitions out of the journal and write, in the same transaction, an
    audit row in the trail of each tenant that had runs in it (a month of no run concerns no
    tenant: no row); then, once that has committed, free their files (journal.partitions: the
    detach holds the journal's tables for milliseconds, the discard holds only the month's)."""
    counted = runs_created_in(partition.month).order_by().values("tenant_id").annotate(runs=Count("id"))
    runs = {row["tenant_id"]: row["runs"] for row in counted}
    tenants = Tenant.objects.in_bulk(list(runs))
    tables = (partition.intents, partition.events)
    with transaction.atomic(durable=True):
        detach_month(partition.month)
        for tenant_id, count in runs.items():
            audit_record(
                user=retention_user(),
                tenant=tenants[tenant_id],
                action=AuditAction.MONTH_DROPPED,
                new={"month": f"{partition.month:%Y-%m}", "tables": list(tables), "runs": count},
                note=f"{partition.month:%Y-%m} is past every tenant's retention and its {count} runs of this "
                f"tenant are archived: its intents and events left the journal ({', '.join(tables)} detached; "
                "their files are dropped next, or by the next retention run if this one stops first).",
            )
    discard_month(partition.month)
    log.info("retention: dropped %s (%s bytes)", ", ".join(tables), partition.bytes)
    return DroppedMonth(
        partition.month, tables, partition.bytes, {tenants[pk].slug: count for pk, count in runs.items()}
    )


def drop_archived_months(now: datetime) -> list[DroppedMonth]:
    """Drop the intents' and events' partitions of every month past every tenant's retention
    whose runs are all archived (retention.selectors.droppable_months), oldest first. First, the
    files of any month detached earlier whose discard did not run (a process that died between
    the two steps)."""
    for month in detached_months():
        discard_month(month)
    return [_month_drop(partition) for partition in droppable_months(now)]


@dataclass(frozen=True)
class RetentionDone:
    archived: list[ArchiveOutcome]
    dropped: list[DroppedMonth]


def retention_apply(now: datetime, tenant: Tenant | None = None) -> RetentionDone:
    """What the daily task and `manage.py retention` do: archive what is due, then drop the
    months that leaves wholly archived (for one tenant's archiving, still every such month)."""
    archived = archive_due_runs(now, tenant)
    return RetentionDone(archived, drop_archived_months(now))
