"""handover 0013 re-keys an existing audit chain: rows chained with plain SHA-256 by the release
before come out chained with HMAC under SEAM_AUDIT_KEY, and `verify_audit` finds them intact; a
chain already broken is not re-keyed (that would launder the break)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from audit.chain import GENESIS, audit_verify, head_seal, link_hash
from audit.models import AuditChainHead, AuditEntry
from journal.models import Tenant

BEFORE = [("handover", "0012_journal_app")]


def _latest() -> list[tuple[str, str]]:
    """Every app at its newest migration: handover 0013 (the re-keying), then the move of the
    audit tables to the audit app, whose names the live models use."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _unkeyed_chain(apps: Any, tenant_id: int, user_id: int, notes: list[str]) -> list[str]:
    """Rows as the release before 0013 wrote them: SHA-256 over the previous hash and the row."""
    entry_model = apps.get_model("handover", "AuditEntry")
    previous, hashes = GENESIS, []
    for seq, note in enumerate(notes, start=1):
        at = datetime(2026, 11, 30, 12, seq, tzinfo=UTC)
        content = {
            "seq": seq,
            "tenant": tenant_id,
            "at": at.isoformat(timespec="microseconds"),
            "user": user_id,
            "username": "lead",
            "action": "assign",
            "run": None,
            "step_id": "",
            "old": {},
            "new": {"assignee": "lead"},
            "note": note,
            "request_id": "",
        }
        canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(f"{previous}\n{canonical}".encode()).hexdigest()
        entry_model.objects.create(
            seq=seq,
            tenant_id=tenant_id,
            at=at,
            user_id=user_id,
            username="lead",
            action="assign",
            new_state={"assignee": "lead"},
            note=note,
            prev_hash=previous,
            hash=digest,
        )
        previous = digest
        hashes.append(digest)
    apps.get_model("handover", "AuditChainHead").objects.update_or_create(
        pk=1, defaults={"seq": len(notes), "hash": previous}
    )
    return hashes


@pytest.mark.django_db(transaction=True)
def test_the_migration_rekeys_an_intact_unkeyed_chain_and_refuses_a_broken_one(persona: Any) -> None:
    tenant = Tenant.objects.create(slug="rekey", name="Re-key")
    user_id = persona("team_lead", tenant).pk
    try:
        apps = _migrate(BEFORE)
        old_hashes = _unkeyed_chain(apps, tenant.pk, user_id, ["first", "second", "third"])

        _migrate(_latest())
        entries = list(AuditEntry.objects.order_by("seq"))
        assert [e.note for e in entries] == ["first", "second", "third"]
        assert not {e.hash for e in entries} & set(old_hashes)
        previous = GENESIS
        for entry in entries:
            assert (entry.prev_hash, entry.hash) == (previous, link_hash(previous, entry))
            previous = entry.hash
        head = AuditChainHead.objects.get()
        assert (head.seq, head.hash, head.seal) == (3, previous, head_seal(3, previous))
        assert audit_verify().ok

        # Back to the unkeyed chain (the tables back under the console's names), a row rewritten
        # there: the migration will not re-key it.
        apps = _migrate(BEFORE)
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE handover_auditentry DISABLE TRIGGER handover_auditentry_append_only")
            cursor.execute("UPDATE handover_auditentry SET note = 'forged' WHERE seq = 2")
            cursor.execute("ALTER TABLE handover_auditentry ENABLE TRIGGER handover_auditentry_append_only")
        with pytest.raises(RuntimeError, match=r"broken at row #2 under its unkeyed hash"):
            _migrate(_latest())
        assert set(apps.get_model("handover", "AuditEntry").objects.values_list("hash", flat=True)) == set(
            old_hashes
        )
    finally:
        # Whatever happened, the database leaves as the rest of the suite expects it.
        _migrate(BEFORE)
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = replica")
            cursor.execute("DELETE FROM handover_auditentry")
            cursor.execute("UPDATE handover_auditchainhead SET seq = 0, hash = %s", [GENESIS])
            cursor.execute("RESET session_replication_role")
        _migrate(_latest())
