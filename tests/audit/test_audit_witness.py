"""The audit chain's witness (audit.witness): every committed head is also written, keyed, to a
file outside the database, and verification compares the table with it. An owner who disables
the guards and empties both audit tables, then lets new activity begin a genesis chain anyone
can compute, is reported as a wipe; an older copy of the trail restored, as a rollback; the
newest rows cut off, as a truncation. A head that rolled back is never witnessed; a witness
that cannot be written never breaks the action."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from audit import tasks
from audit.chain import audit_record, audit_verify
from audit.models import AuditAction, AuditEntry, AuditResult, AuditVerification
from audit.witness import witnessed_heads
from journal.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def witness(settings: Any, tmp_path: Path) -> Path:
    path = tmp_path / "witness" / "audit-witness.log"
    settings.SEAM_AUDIT_WITNESS = str(path)
    return path


@pytest.fixture
def record(
    tenant: Tenant, persona: Any, django_capture_on_commit_callbacks: Callable[..., Any]
) -> Callable[[str], AuditEntry]:
    """Write one audit row as the console does, and run what its commit would run (the witness)."""
    lead = persona("team_lead", tenant)

    def write(note: str) -> AuditEntry:
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            return audit_record(user=lead, tenant=tenant, action=AuditAction.ASSIGN, note=note)

    return write


def sql(statement: str, params: tuple[Any, ...] = ()) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(statement, params)


def as_an_owner_with_ddl_rights() -> None:
    """What an attacker holding the tables' ownership does first: the guards off."""
    sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
    sql("ALTER TABLE audit_auditchainhead DISABLE TRIGGER USER")


def test_every_committed_head_is_witnessed_keyed_and_a_rolled_back_one_is_not(
    witness: Path, record: Callable[[str], AuditEntry], tenant: Tenant, persona: Any
) -> None:
    entries = [record(note) for note in ("first", "second")]
    lines = [json.loads(line) for line in witness.read_text().splitlines()]
    assert [(line["seq"], line["hash"]) for line in lines] == [(e.seq, e.hash) for e in entries]
    assert all(len(line["mac"]) == 64 for line in lines)

    # A seal whose transaction rolls back leaves no line.
    with pytest.raises(RuntimeError), transaction.atomic():
        audit_record(
            user=persona("team_lead", tenant, "other-lead"), tenant=tenant, action=AuditAction.ASSIGN
        )
        raise RuntimeError("the change failed")
    assert len(witness.read_text().splitlines()) == 2

    # A line forged without the key is not taken as witnessed.
    forged = {**lines[-1], "seq": 99}
    with witness.open("a") as out:
        out.write(json.dumps(forged) + "\n")
    assert [h.seq for h in witnessed_heads()] == [1, 2]
    assert audit_verify().ok


def test_a_wipe_of_both_tables_then_new_activity_is_reported_as_a_wipe(
    witness: Path, record: Callable[[str], AuditEntry]
) -> None:
    for note in ("first", "second", "third"):
        record(note)
    assert audit_verify().ok

    as_an_owner_with_ddl_rights()
    sql("TRUNCATE audit_auditentry, audit_auditchainhead")
    report = audit_verify()
    assert (report.ok, report.result) == (False, AuditResult.WIPED), report
    assert "the trail is empty, but the witness saw row #3" in report.problem

    # New activity begins a genesis chain anyone can compute: on its own it would verify.
    record("after the wipe")
    assert AuditEntry.objects.count() == 1
    report = audit_verify()
    assert (report.ok, report.result, report.broken_at) == (False, AuditResult.WIPED, 1), report
    assert "row #1 is not the row the witness saw" in report.problem
    with pytest.raises(CommandError, match="emptied and begun again"):
        call_command("verify_audit")
    assert AuditVerification.objects.get().result == AuditResult.WIPED


def test_restoring_an_older_copy_is_reported_as_a_rollback(
    witness: Path, record: Callable[[str], AuditEntry]
) -> None:
    for note in ("first", "second"):
        record(note)
    # The copy an attacker keeps (a backup of the two tables) ...
    sql("CREATE TEMP TABLE old_entries AS SELECT * FROM audit_auditentry")
    sql("CREATE TEMP TABLE old_head AS SELECT * FROM audit_auditchainhead")
    for note in ("third: the refund", "fourth: the note they regret"):
        record(note)

    # ... restored over the newer trail: the chain and its sealed head agree with each other.
    as_an_owner_with_ddl_rights()
    sql("TRUNCATE audit_auditentry, audit_auditchainhead")
    sql("INSERT INTO audit_auditentry SELECT * FROM old_entries")
    sql("INSERT INTO audit_auditchainhead SELECT * FROM old_head")
    report = audit_verify()
    assert (report.ok, report.result, report.checked, report.broken_at) == (
        False,
        AuditResult.ROLLED_BACK,
        2,
        3,
    ), report
    assert "an older copy was restored" in report.problem


def test_cutting_off_the_newest_rows_is_reported_as_a_truncation(
    witness: Path, record: Callable[[str], AuditEntry]
) -> None:
    for note in ("first", "second", "third"):
        record(note)
    as_an_owner_with_ddl_rights()
    sql("DELETE FROM audit_auditentry WHERE seq = 3")
    report = audit_verify()
    assert (report.ok, report.result, report.broken_at) == (False, AuditResult.TRUNCATED, 3), report
    assert "rows #3 to #3 were removed" in report.problem


def test_the_page_says_the_trail_was_wiped_in_words(
    witness: Path,
    record: Callable[[str], AuditEntry],
    tenant: Tenant,
    persona: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    record("first")
    as_an_owner_with_ddl_rights()
    sql("TRUNCATE audit_auditentry, audit_auditchainhead")
    queued: list[int] = []
    monkeypatch.setattr(tasks.verify_audit_chain, "delay", queued.append)
    client = Client()
    client.force_login(persona("team_lead", tenant, "lead-2"))
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(reverse("handover:audit_verify")).status_code == 302
    tasks.verify_audit_chain(queued[0])
    page = client.get(reverse("handover:audit")).content.decode()
    assert 'class="chain-broken chain-wiped"' in page
    assert "The trail was wiped: rows the witness outside the database saw are gone or were replaced." in page
    assert "The chain is intact" not in page


def test_a_witness_that_cannot_be_written_is_logged_and_never_breaks_the_action(
    settings: Any, tmp_path: Path, record: Callable[[str], AuditEntry], caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings.SEAM_AUDIT_WITNESS = str(blocker / "audit-witness.log")
    with caplog.at_level(logging.ERROR, logger="seam.audit.witness"):
        entry = record("still recorded")
    assert AuditEntry.objects.filter(pk=entry.pk).exists()
    assert any("could not be written" in r.getMessage() for r in caplog.records), caplog.records


def test_a_log_witness_writes_a_keyed_line(
    settings: Any, record: Callable[[str], AuditEntry], caplog: pytest.LogCaptureFixture
) -> None:
    settings.SEAM_AUDIT_WITNESS = "log"
    with caplog.at_level(logging.INFO, logger="seam.audit.witness"):
        entry = record("logged")
    (line,) = [r.getMessage() for r in caplog.records if r.name == "seam.audit.witness"]
    head = json.loads(line.removeprefix("audit head "))
    assert (head["seq"], head["hash"], len(head["mac"])) == (entry.seq, entry.hash, 64)
