"""The audit chain against someone with the database owner's powers and raw SQL: TRUNCATE and
deleting the chain head are refused; the head only moves forward onto the newest row; and what an
owner does after disabling the triggers (removing the newest rows and moving the head back,
emptying everything, rewriting a note and recomputing the chain without the key) `verify_audit`
finds."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from audit.chain import GENESIS, _canonical, audit_record, audit_verify
from audit.models import AuditAction, AuditChainHead, AuditEntry
from journal.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(tenant: Tenant, persona: Any) -> list[AuditEntry]:
    """Three audit rows, written as the console writes them."""
    lead = persona("team_lead", tenant)
    entries = []
    for note in ("first", "second", "third"):
        with transaction.atomic():
            entries.append(audit_record(user=lead, tenant=tenant, action=AuditAction.ASSIGN, note=note))
    assert audit_verify().ok
    return entries


def sql(statement: str, params: tuple[Any, ...] = ()) -> None:
    with connection.cursor() as cursor:
        # The test's transaction still holds the fixture's deferred foreign-key checks, and
        # PostgreSQL neither alters nor truncates a table with checks pending: run them first.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(statement, params)


def refused(statement: str, params: tuple[Any, ...] = ()) -> str:
    """Run a statement as the owner; return the database's refusal (and fail if it was taken)."""
    with pytest.raises(DatabaseError) as refusal, transaction.atomic():
        sql(statement, params)
    return str(refusal.value)


def verify_fails_at(seq: int, problem: str) -> None:
    report = audit_verify()
    assert (report.ok, report.broken_at) == (False, seq), report
    assert problem in report.problem
    with pytest.raises(CommandError, match=f"broken at row #{seq}"):
        call_command("verify_audit")


def test_deleting_the_newest_row_and_moving_the_head_back_is_refused_then_caught(
    chain: list[AuditEntry],
) -> None:
    second = chain[1]
    assert "append-only" in refused("DELETE FROM audit_auditentry WHERE seq = 3")
    # The head cannot be moved back, even onto a row that exists.
    assert "only moves forward" in refused(
        "UPDATE audit_auditchainhead SET seq = %s, hash = %s WHERE id = 1", (second.seq, second.hash)
    )

    # The owner disables the row trigger and removes the newest row: the head still names it.
    sql("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_auditentry_append_only")
    sql("DELETE FROM audit_auditentry WHERE seq = 3")
    assert "only moves forward" in refused(
        "UPDATE audit_auditchainhead SET seq = %s, hash = %s WHERE id = 1", (second.seq, second.hash)
    )
    verify_fails_at(3, "the chain head names row #3, but the last row is #2")

    # The head's guard disabled too, the head moved back onto the row now last: its seal, an
    # HMAC under a key the database does not hold, no longer matches.
    sql("ALTER TABLE audit_auditchainhead DISABLE TRIGGER audit_auditchainhead_guard")
    sql("UPDATE audit_auditchainhead SET seq = %s, hash = %s WHERE id = 1", (second.seq, second.hash))
    verify_fails_at(3, "seal does not match row #2")


def test_truncating_the_trail_and_deleting_the_head_are_refused_then_caught(
    chain: list[AuditEntry],
) -> None:
    assert "TRUNCATE refused" in refused("TRUNCATE audit_auditentry")
    assert "TRUNCATE refused" in refused("TRUNCATE audit_auditchainhead")
    # Emptying a table the audit rows hang off reaches them through CASCADE: refused too.
    assert "TRUNCATE refused" in refused("TRUNCATE journal_tenant CASCADE")
    assert "cannot be deleted" in refused("DELETE FROM audit_auditchainhead")
    assert "one head" in refused(
        "INSERT INTO audit_auditchainhead (id, seq, hash, seal) VALUES (2, 0, %s, '')", (GENESIS,)
    )
    assert AuditEntry.objects.count() == 3
    assert AuditChainHead.objects.get().seq == 3
    assert audit_verify().ok

    # With every guard disabled, the owner empties both tables: an empty trail without its head
    # is not a fresh one.
    sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
    sql("ALTER TABLE audit_auditchainhead DISABLE TRIGGER USER")
    sql("TRUNCATE audit_auditentry, audit_auditchainhead")
    verify_fails_at(1, "the chain head is missing")
    # ... nor with a head put back at the start of the chain, which only the key can seal.
    sql("INSERT INTO audit_auditchainhead (id, seq, hash, seal) VALUES (1, 0, %s, '')", (GENESIS,))
    verify_fails_at(1, "seal does not match row #0")


def _plain_sha256(prev_hash: str, entry: AuditEntry) -> str:
    return hashlib.sha256(f"{prev_hash}\n{_canonical(entry)}".encode()).hexdigest()


def _guessed_key(prev_hash: str, entry: AuditEntry) -> str:
    message = f"{prev_hash}\n{_canonical(entry)}".encode()
    return hmac.new(b"insecure-local-only-audit-key", message, hashlib.sha256).hexdigest()


@pytest.mark.parametrize("recompute", [_plain_sha256, _guessed_key], ids=["plain-sha256", "guessed-key"])
def test_rewriting_a_note_and_recomputing_the_chain_without_the_key_is_caught(
    chain: list[AuditEntry], recompute: Any
) -> None:
    assert "append-only" in refused("UPDATE audit_auditentry SET note = 'forged' WHERE seq = 2")

    sql("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
    sql("ALTER TABLE audit_auditchainhead DISABLE TRIGGER USER")
    sql("UPDATE audit_auditentry SET note = 'nothing happened' WHERE seq = 2")
    # The attacker recomputes every link from the rewritten row on, and the head, as the chain
    # was computed before it was keyed (or with a key of their own).
    previous = AuditEntry.objects.get(seq=1).hash
    for entry in AuditEntry.objects.filter(seq__gte=2).order_by("seq"):
        forged = recompute(previous, entry)
        sql(
            "UPDATE audit_auditentry SET prev_hash = %s, hash = %s WHERE seq = %s",
            (previous, forged, entry.seq),
        )
        previous = forged
    sql("UPDATE audit_auditchainhead SET hash = %s WHERE id = 1", (previous,))
    assert AuditEntry.objects.get(seq=2).note == "nothing happened"

    verify_fails_at(2, "row #2 was altered")
