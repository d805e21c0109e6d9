"""The test suite's PostgreSQL backend: Seam's (journal.postgresql), except that `flush` (which transactional
tests run after each case) empties the tables past the audit trail's guards and recreates the
chain's sealed head, as the migrations left it.

The guards refuse TRUNCATE of the audit rows and deleting the chain head to everyone, the table
owner included (handover migration 0013); a session in `session_replication_role = replica`,
which only a superuser can enter, fires no ordinary trigger. The suite connects as a superuser;
production's roles are neither owner nor superuser (manage.py seam_db_roles)."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.operations import DatabaseOperations as PostgreSQLOperations

from journal.postgresql import base

HEAD_TABLE = "audit_auditchainhead"


class DatabaseOperations(PostgreSQLOperations):
    def sql_flush(
        self, style: Any, tables: Any, *, reset_sequences: bool = False, allow_cascade: bool = False
    ) -> list[str]:
        statements = super().sql_flush(
            style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
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
