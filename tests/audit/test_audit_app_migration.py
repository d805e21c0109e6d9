"""audit 0001 takes the audit trail's models from the console's app: a database with audit rows
and granted roles comes out with the same rows under the audit app's table names, its triggers
still guarding them (the functions that name a table in their body follow it), and every grant
of the console's permissions (handover.act_on_run, handover.view_audit_trail) kept."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from audit.chain import GENESIS, audit_verify
from audit.models import AuditEntry
from journal.models import Tenant

BEFORE_THE_MOVE = [("handover", "0016_tenant_console_settings")]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _tables() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {row[0] for row in cursor.fetchall()}


def _refused(statement: str) -> str:
    with pytest.raises(DatabaseError) as refusal, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    return str(refusal.value)


@pytest.mark.django_db(transaction=True)
def test_the_audit_rows_grants_and_guards_survive_the_move(persona: Any) -> None:
    tenant = Tenant.objects.create(slug="moving", name="Moving")
    lead = persona("team_lead", tenant)
    support = persona("support_staff", tenant)
    try:
        apps = _migrate(BEFORE_THE_MOVE)
        assert {"handover_auditentry", "handover_auditchainhead"} <= _tables()
        entry_model = apps.get_model("handover", "AuditEntry")
        entry_model.objects.create(
            seq=1, tenant_id=tenant.pk, at="2026-12-01T10:00:00Z", user_id=lead.pk, username="lead",
            action="assign", prev_hash=GENESIS, hash="a" * 64, note="before the move",
        )  # fmt: skip

        _migrate(_latest())
        tables = _tables()
        assert {"audit_auditentry", "audit_auditchainhead", "audit_auditverification"} <= tables
        assert not {t for t in tables if t.startswith("handover_audit")}
        assert list(AuditEntry.objects.values_list("seq", "note")) == [(1, "before the move")]

        # The guards follow the tables: rows stay append-only, the head names the newest row.
        assert "audit_auditentry is append-only: UPDATE refused" in _refused(
            "UPDATE audit_auditentry SET note = 'forged'"
        )
        assert "the head must name the newest audit row (#1)" in _refused(
            "UPDATE audit_auditchainhead SET seq = 5, hash = 'b' WHERE id = 1"
        )
        assert "TRUNCATE refused" in _refused("TRUNCATE audit_auditentry")

        # The console's permissions keep their names and their grants.
        for user, codename, granted in (
            (lead, "view_audit_trail", True),
            (lead, "act_on_run", True),
            (support, "act_on_run", True),
            (support, "view_audit_trail", False),
        ):
            user = type(user).objects.get(pk=user.pk)  # a fresh permission cache
            assert user.has_perm(f"handover.{codename}") is granted, (user.username, codename)
        assert (
            Permission.objects.filter(content_type__app_label="handover", codename="act_on_run").count() == 1
        )
        assert Group.objects.get(name="team_lead").permissions.filter(codename="view_audit_trail").exists()
        assert not Permission.objects.filter(
            content_type__app_label="handover", content_type__model="auditentry"
        )
    finally:
        _migrate(_latest())
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = replica")
            cursor.execute("DELETE FROM audit_auditentry")
            cursor.execute("UPDATE audit_auditchainhead SET seq = 0, hash = %s, seal = ''", [GENESIS])
            cursor.execute("RESET session_replication_role")
    assert audit_verify().checked == 0
