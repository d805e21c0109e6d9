"""`python manage.py seam_db_roles [--role seam_app] [--login] [--apply]`: the PostgreSQL role the
application should run as, so that the journal and the audit trail stay append-only whatever
the application does (docs/architecture.md, "Database roles").

Migrations run as the tables' owner; the web, the workers and beat connect as this role, which:

- owns nothing, so it cannot ALTER a table, drop or disable the append-only triggers;
- may SELECT, INSERT, UPDATE and DELETE rows of the application's tables, except
- audit_auditentry and journal_journalevent: SELECT and INSERT only (no UPDATE, DELETE,
  TRUNCATE), on top of the triggers that refuse UPDATE and DELETE to everyone;
- audit_auditchainhead: SELECT, INSERT and UPDATE, not DELETE (its trigger lets it only move
  forward onto the newest audit row, and refuses DELETE to everyone);
- holds TRUNCATE, REFERENCES and TRIGGER on nothing, and only reads django_migrations;
- may use the sequences (USAGE, SELECT: not setval);
- holds on each partition of journal_intent and journal_journalevent what it holds on the
  parent (the journal's statements name a month's partition, and PostgreSQL checks a table a
  statement names against its own privileges), and may EXECUTE the two functions that make and
  drop a month's partitions (journal.partitions), which are the only way it touches them.

Without --apply it prints the SQL. Grants name the tables that exist now: run it again after
every `migrate` that adds a table (it is idempotent). Partitions made later by
seam_journal_month_create receive their parent's grants there."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections, transaction
from psycopg import sql

APPEND_ONLY = ("audit_auditentry", "journal_journalevent")
READ_ONLY = ("django_migrations",)
NEVER_DELETED = ("audit_auditchainhead",)
MONTH_FUNCTIONS = (
    "seam_journal_month_create(date)",
    "seam_journal_month_detach(date)",
    "seam_journal_month_discard(date)",
)


def privileges_on(table: str) -> str:
    if table in APPEND_ONLY:
        return "SELECT, INSERT"
    if table in READ_ONLY:
        return "SELECT"
    if table in NEVER_DELETED:
        return "SELECT, INSERT, UPDATE"
    return "SELECT, INSERT, UPDATE, DELETE"


def role_statements(
    *, role: str, database: str, tables: list[str], login: bool, partitions: dict[str, str] | None = None
) -> list[sql.Composed]:
    """The statements, in order. Each may run again: CREATE ROLE only if missing, and every
    table's privileges are revoked before they are granted, so a table that became append-only
    loses what it had. `partitions` maps each partition to its parent, whose privileges it gets."""
    ident = sql.Identifier(role)
    create = sql.SQL(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {name}) "
        "THEN CREATE ROLE {role} {login} NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS; "
        "END IF; END $$"
    ).format(name=sql.Literal(role), role=ident, login=sql.SQL("LOGIN" if login else "NOLOGIN"))
    statements = [
        create,
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), ident),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident),
    ]
    parent_of = {table: table for table in tables} | (partitions or {})
    for table in sorted(parent_of):
        table_ident = sql.Identifier(table)
        statements.append(sql.SQL("REVOKE ALL ON TABLE {} FROM {}").format(table_ident, ident))
        statements.append(
            sql.SQL("GRANT {} ON TABLE {} TO {}").format(
                sql.SQL(privileges_on(parent_of[table])), table_ident, ident
            )
        )
    statements.append(sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}").format(ident))
    for function in MONTH_FUNCTIONS:
        statements.append(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(sql.SQL(function), ident))
    return statements


def partitions_of(connection: Any) -> dict[str, str]:
    """Every partition in the database, with its parent (Django's table_names() lists neither
    partitions nor their kind)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname, parent.relname FROM pg_inherits "
            "JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid "
            "JOIN pg_class AS parent ON parent.oid = pg_inherits.inhparent "
            "WHERE parent.relkind = 'p' AND child.relkind = 'r'"
        )
        return dict(cursor.fetchall())


class Command(BaseCommand):
    help = "Print (or with --apply run) the SQL creating the application's PostgreSQL role and grants."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--role", default="seam_app", help="The application's role (default seam_app).")
        parser.add_argument(
            "--login",
            action="store_true",
            help="Create the role with LOGIN (set its password yourself: ALTER ROLE ... PASSWORD).",
        )
        parser.add_argument("--apply", action="store_true", help="Run the SQL instead of printing it.")
        parser.add_argument("--database", default="default", help="The Django database alias.")

    def handle(self, *args: Any, role: str, login: bool, apply: bool, database: str, **options: Any) -> None:
        connection = connections[database]
        tables = connection.introspection.table_names()
        missing = [table for table in APPEND_ONLY if table not in tables]
        if missing:
            raise CommandError(f"Tables {missing} do not exist yet: run migrate first.")
        partitions = partitions_of(connection)
        statements = role_statements(
            role=role,
            database=connection.settings_dict["NAME"],
            tables=[table for table in tables if table not in partitions],
            login=login,
            partitions=partitions,
        )
        connection.ensure_connection()
        raw = connection.connection
        assert raw is not None
        if not apply:
            for statement in statements:
                self.stdout.write(statement.as_string(raw) + ";")
            return
        with transaction.atomic(using=database), connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement.as_string(raw))
        self.stdout.write(
            f"Role {role}: granted on {len(tables)} tables and {len(partitions)} partitions "
            f"({', '.join(APPEND_ONLY)} append-only)."
        )
