"""The application's PostgreSQL role (`manage.py seam_db_roles`) cannot alter the audit trail or
the journal: not through the ORM, not through SQL. UPDATE, DELETE, TRUNCATE and disabling the
append-only triggers are each refused to it, while the application's own writes (a run, an
intent and its outcome, an audit row) work as that role through Django."""

# The SQL below names tables from APPEND_ONLY, constants of this module, not input.
# ruff: noqa: S608

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from psycopg import errors

from audit.chain import audit_record
from audit.models import AuditAction, AuditEntry
from journal import partitions, services
from journal.models import JournalEvent, Tenant
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

APPEND_ONLY = ["audit_auditentry", "journal_journalevent"]


@pytest.fixture
def app_role() -> Iterator[str]:
    """A LOGIN role made by the command on the test database (its name unique to this process:
    roles are shared by every database of the server), dropped afterwards."""
    role = f"seam_app_test_{os.getpid()}"
    call_command("seam_db_roles", role=role, login=True, apply=True, stdout=io.StringIO())
    try:
        yield role
    finally:
        connection.close()  # a test that connected as the role must not leave Django on it
        with connection.cursor() as cursor:
            cursor.execute(f'DROP OWNED BY "{role}"')
            cursor.execute(f'DROP ROLE IF EXISTS "{role}"')


def connect_as(role: str) -> psycopg.Connection[Any]:
    settings = connection.settings_dict
    return psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        dbname=settings["NAME"],
        user=role,
        autocommit=True,
    )


def audited_run(tenant: Tenant, persona: Any) -> None:
    """A run with journal events and one audit row, written as the tables' owner."""
    run = factories.run_via_service(tenant=tenant, actor=services.Actor.agent("returns-bot"))
    lead = persona("team_lead", tenant)
    with transaction.atomic():
        audit_record(user=lead, tenant=tenant, action=AuditAction.ASSIGN, run=run, note="mine")


def test_the_command_prints_the_grants_without_applying_them() -> None:
    out = io.StringIO()
    call_command("seam_db_roles", role="seam_app", stdout=out)
    sql = out.getvalue()
    assert 'GRANT SELECT, INSERT ON TABLE "audit_auditentry" TO "seam_app";' in sql
    assert 'GRANT SELECT, INSERT ON TABLE "journal_journalevent" TO "seam_app";' in sql
    assert 'GRANT SELECT ON TABLE "django_migrations" TO "seam_app";' in sql
    assert 'GRANT SELECT, INSERT, UPDATE ON TABLE "audit_auditchainhead" TO "seam_app";' in sql
    assert 'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "journal_run" TO "seam_app";' in sql
    assert "TRUNCATE" not in sql
    assert "OWNER" not in sql
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_roles WHERE rolname = 'seam_app'")
        assert cursor.fetchone() == (0,)  # printed, not run


@pytest.mark.parametrize("table", APPEND_ONLY)
def test_the_application_role_cannot_change_append_only_rows_by_any_sql(
    app_role: str, tenant: Tenant, persona: Any, table: str
) -> None:
    audited_run(tenant, persona)
    with connect_as(app_role) as conn:
        (rows,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[misc]
        assert rows > 0
        refused = {
            "UPDATE": f"UPDATE {table} SET id = id",
            "DELETE": f"DELETE FROM {table}",
            "TRUNCATE": f"TRUNCATE {table} CASCADE",
            "DISABLE TRIGGER": f"ALTER TABLE {table} DISABLE TRIGGER ALL",
            "DROP TRIGGER": f"DROP TRIGGER {table}_append_only ON {table}",
            "ALTER OWNER": f'ALTER TABLE {table} OWNER TO "{app_role}"',
        }
        for what, statement in refused.items():
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (rows,), what
        role = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname = %s",
            [app_role],
        ).fetchone()
        assert role == (False, False, False, False)
        owned = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = %s", [app_role]
        ).fetchone()
        assert owned == (0,)


def test_the_application_role_writes_the_journal_and_the_audit_trail_through_django(
    app_role: str, tenant: Tenant, persona: Any
) -> None:
    lead = persona("team_lead", tenant)
    owner_user = connection.settings_dict["USER"]
    connection.close()
    connection.settings_dict["USER"] = app_role
    try:
        actor = services.Actor.agent("returns-bot")
        run = factories.run_via_service(tenant=tenant, actor=actor)
        intent = services.intent_record(
            run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=actor
        ).intent
        services.outcome_record(intent=intent, ok=True, receipt={"label": "RL-7734"}, actor=actor)
        with transaction.atomic():
            audit_record(user=lead, tenant=tenant, action=AuditAction.ASSIGN, run=run, note="mine")
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone() == (app_role,)
        # The ORM's own way to change an audit row or an event is refused to this role.
        entry = AuditEntry.objects.get(run=run)
        for change in (
            lambda: AuditEntry.objects.filter(pk=entry.pk).update(note="edited"),
            lambda: AuditEntry.objects.filter(pk=entry.pk).delete(),
            lambda: JournalEvent.objects.filter(run=run).update(kind="edited"),
            lambda: JournalEvent.objects.filter(run=run).delete(),
        ):
            with pytest.raises(Exception, match="permission denied"), transaction.atomic():
                change()
        assert AuditEntry.objects.get(pk=entry.pk).note == "mine"
    finally:
        connection.close()
        connection.settings_dict["USER"] = owner_user
    assert JournalEvent.objects.filter(run=run).count() >= 3


def test_the_application_role_makes_months_that_it_may_write_but_never_drops_an_unarchived_one(
    app_role: str, tenant: Tenant
) -> None:
    run = factories.run_via_service(tenant=tenant, actor=services.Actor.agent("returns-bot"))
    this_month = partitions.month_of(run.created_at)
    ahead = partitions.months_after(this_month, 6)[-1]  # past the migration's two months ahead
    made = partitions.month_tables(ahead)
    with connect_as(app_role) as conn:
        assert conn.execute("SELECT seam_journal_month_create(%s)", [ahead]).fetchone() == (True,)
        assert conn.execute("SELECT seam_journal_month_create(%s)", [ahead]).fetchone() == (False,)
        # The new partitions carry their parents' grants, as the statements that name them need.
        granted = conn.execute(
            "SELECT has_table_privilege(%(role)s, %(intent)s, 'INSERT'), "
            "has_table_privilege(%(role)s, %(intent)s, 'UPDATE'), "
            "has_table_privilege(%(role)s, %(event)s, 'INSERT'), "
            "has_table_privilege(%(role)s, %(event)s, 'UPDATE'), "
            "has_table_privilege(%(role)s, %(event)s, 'TRUNCATE')",
            {"role": app_role, "intent": made.intent, "event": made.event},
        ).fetchone()
        assert granted == (True, True, True, False, False)
        for statement in (
            f"DROP TABLE {made.intent}",
            f"ALTER TABLE journal_intent DETACH PARTITION {made.intent}",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
        # This month holds a run that is not archived: its partitions stay.
        with pytest.raises(errors.ObjectNotInPrerequisiteState, match="not archived"):
            conn.execute("SELECT seam_journal_month_detach(%s)", [this_month])
        assert conn.execute("SELECT seam_journal_month_detach(%s)", [ahead]).fetchone() == (True,)
        assert conn.execute("SELECT seam_journal_month_discard(%s)", [ahead]).fetchone() == (True,)
    assert partitions.month_tables(this_month).intent in {row.intents for row in partitions.existing_months()}
    assert ahead not in {row.month for row in partitions.existing_months()}


def test_the_grants_cover_every_partition_as_its_parent() -> None:
    out = io.StringIO()
    call_command("seam_db_roles", role="seam_app", stdout=out)
    sql = out.getvalue()
    for month in partitions.existing_months():
        assert f'GRANT SELECT, INSERT ON TABLE "{month.events}" TO "seam_app";' in sql
        assert f'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "{month.intents}" TO "seam_app";' in sql
    assert 'GRANT SELECT, INSERT ON TABLE "journal_journalevent_default" TO "seam_app";' in sql
    for function in ("seam_journal_month_create", "seam_journal_month_detach", "seam_journal_month_discard"):
        assert f'GRANT EXECUTE ON FUNCTION {function}(date) TO "seam_app";' in sql
