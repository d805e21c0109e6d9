"""Seam's PostgreSQL backend: Django's, with a health check that costs no round trip.

Production keeps connections open between requests (CONN_MAX_AGE) with CONN_HEALTH_CHECKS on, so
that a connection the server closed (a restart, a terminated backend, a failover) is replaced
before a request uses it. Django checks with a `SELECT 1` at every request's first query: one
round trip more on each of the journal's hot requests, whose own work is one or two. Here an idle
connection is usable when nothing has arrived on its socket: the server says nothing to an idle
client unless it is closing the session (a FATAL message, then end of file). Anything on the
socket, or a connection not idle, is checked with Django's `SELECT 1` as before.

And a query that groups intents or journal events (an annotation over their relations) groups by
all their selected columns, not by `id` alone: those tables are partitioned (journal.partitions)
and their primary key in PostgreSQL is `(id, run_created_at)`, so PostgreSQL cannot tell that
`id` alone determines the other columns, and refuses Django's shorter GROUP BY."""

from __future__ import annotations

import select
from typing import Any

from django.db.backends.postgresql import base, features
from psycopg.pq import TransactionStatus

# The partitioned tables, whose primary key holds the partition column beside Django's `id`.
PARTITIONED_TABLES = frozenset({"journal_intent", "journal_journalevent"})


class DatabaseFeatures(features.DatabaseFeatures):
    def allows_group_by_selected_pks_on_model(self, model: Any) -> bool:
        if model._meta.db_table in PARTITIONED_TABLES:
            return False
        return bool(super().allows_group_by_selected_pks_on_model(model))


class DatabaseWrapper(base.DatabaseWrapper):
    features_class = DatabaseFeatures

    def is_usable(self) -> bool:
        raw = self.connection
        if raw is None or raw.closed or raw.broken:
            return False
        if raw.info.transaction_status == TransactionStatus.IDLE:
            try:
                readable, _, _ = select.select([raw.fileno()], [], [], 0)
            except (OSError, ValueError):
                return False
            if not readable:
                return True
        return bool(super().is_usable())
