"""The test suite's PostgreSQL backend: Seam's (journal.postgresql), except that `flush` (which transactional
tests run after each case) empties the tables past the audit trail's guards and recreates the
chain's sealed head, as the migrations left it.

It empties a table with DELETE, and TRUNCATEs only one that held many rows: a test leaves a
handful, and TRUNCATE gives each of the fifty tables and their indexes new files, which took
125 ms a case against 2 ms. A table a test filled is truncated all the same, so that its dead
rows do not sway the plans later tests assert (tests that EXPLAIN). It keeps the content types
and permissions: they describe the models, not a test's data, and the post_migrate that follows
every flush would write them back as they were (it still runs, so one a test removed comes back).

The guards refuse TRUNCATE of the audit rows and deleting the chain head to everyone, the table
owner included (handover migration 0013); a session in `session_replication_role = replica`,
which only a superuser can enter, fires no ordinary trigger. The suite connects as a superuser;
production's roles are neither owner nor superuser (manage.py seam_db_roles)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.backends.postgresql.operations import DatabaseOperations as PostgreSQLOperations

from journal.postgresql import base

HEAD_TABLE = "audit_auditchainhead"
KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})
# Past this many rows deleted, the table is truncated too (CASCADE: its referrers are empty by then
# or about to be, and FKs are not checked in replica mode).
TRUNCATE_PAST_ROWS = 500


def _emptying(tables: Iterable[str]) -> str:
    """One statement that empties `tables` (names from the schema; flush takes no parameters)."""
    names = ", ".join("'" + name.replace("'", "''") + "'" for name in tables)
    return f"""DO $$
DECLARE name text; deleted bigint;
BEGIN
  FOREACH name IN ARRAY ARRAY[{names}]::text[] LOOP
    EXECUTE format('DELETE FROM %I', name);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    IF deleted > {TRUNCATE_PAST_ROWS} THEN
      EXECUTE format('TRUNCATE %I CASCADE', name);
    END IF;
  END LOOP;
END $$"""  # noqa: S608


class DatabaseOperations(PostgreSQLOperations):
    def sql_flush(
        self, style: Any, tables: Any, *, reset_sequences: bool = False, allow_cascade: bool = False
    ) -> list[str]:
        emptied = [table for table in tables if table not in KEPT_TABLES]
        if reset_sequences:
            statements = super().sql_flush(style, emptied, reset_sequences=True, allow_cascade=allow_cascade)
        else:
            statements = [_emptying(emptied)]
        if not statements:
            return statements
        # execute_sql_flush runs these in one transaction: SET LOCAL ends with it.
        statements = ["SET LOCAL session_replication_role = replica", *statements]
        if HEAD_TABLE in tables:
            # Not at the top: Django loads a backend while the app registry may not be ready,
            # and audit.chain imports its models.
            from audit.chain import GENESIS, head_seal

            # Both values are hex digests of our own making, and flush takes no parameters.
            seal = head_seal(0, GENESIS)
            statements.append(
                f"INSERT INTO {HEAD_TABLE} (id, seq, hash, seal) VALUES (1, 0, '{GENESIS}', '{seal}')"  # noqa: S608
            )
        return statements


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
