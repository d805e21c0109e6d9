"""The journal's two hot writes as single PostgreSQL statements.

Every side-effecting call an agent makes costs two commits in Seam, so these two writes are
the product's hot path. On PostgreSQL each is one statement run in autocommit mode: the
statement is its own transaction, committed (with synchronous_commit=on) before the driver
returns, and the row change and its journal event are written together by a data-modifying
CTE. That is one round trip per commit — the same as the raw-driver floor — instead of the
BEGIN / statements / COMMIT exchange of an ORM transaction. The ORM path in services.py does
the same work on other databases (the SQLite demo) and is kept behaviourally identical by
tests/handover/test_services_journal.py, which runs against both."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper

# Parameters are bound by position, once each, in a first CTE that names and types them: psycopg
# then has no named parameters to reorder on every call, and the SQL below still reads by name.
INSERT_INTENT = """
WITH p AS (
    SELECT %s::uuid AS run_id, %s::text AS step_id, %s::integer AS turn, %s::text AS tool,
           %s::jsonb AS args, %s::integer AS occurrence, %s::text AS key,
           %s::timestamptz AS now, %s::text AS actor_kind, %s::text AS actor_name,
           %s::integer AS user_id, %s::boolean AS compensation
), run AS (
    -- FOR SHARE: intents of one run may be admitted side by side, but never while the run's
    -- status is being changed (completed, cancelled) under them.
    SELECT id, status FROM handover_run WHERE id = (SELECT run_id FROM p) FOR SHARE
), inserted AS (
    INSERT INTO handover_intent (
        run_id, step_id, turn, tool, args, occurrence, idempotency_key, status,
        error_class, outcome_summary, receipt, request_id, intended_at)
    SELECT run.id, p.step_id, p.turn, p.tool, p.args, p.occurrence, p.key,
           'intended', '', '', '{}'::jsonb, '', p.now
    FROM run, p
    -- A run admits new intents while running; a compensation is admitted on any run.
    WHERE run.status = 'running' OR p.compensation
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id
), event AS (
    -- The event's data is built here rather than serialised in Python: the same object as
    -- services._intent_event_data, for one JSON encoding fewer per call.
    INSERT INTO handover_journalevent (run_id, intent_id, kind, actor_kind, actor_name, user_id, data, at)
    SELECT p.run_id, inserted.id, 'intent_recorded', p.actor_kind, p.actor_name, p.user_id,
           jsonb_build_object('step_id', p.step_id, 'tool', p.tool, 'idempotency_key', p.key)
           || CASE WHEN p.compensation THEN '{"compensation": true}'::jsonb ELSE '{}'::jsonb END,
           p.now
    FROM inserted, p
)
SELECT (SELECT status FROM run), (SELECT id FROM inserted)
"""

SETTLE_INTENT = """
WITH p AS (
    SELECT %s::bigint AS intent_id, %s::text AS status, %s::text AS error_class,
           %s::text AS summary, %s::jsonb AS receipt, %s::text AS request_id,
           %s::timestamptz AS now, %s::text AS actor_kind, %s::text AS actor_name,
           %s::integer AS user_id
), settled AS (
    UPDATE handover_intent
    SET status = p.status, error_class = p.error_class, outcome_summary = p.summary,
        receipt = p.receipt, request_id = p.request_id, settled_at = p.now
    FROM p
    WHERE handover_intent.id = p.intent_id AND handover_intent.status = 'intended'
    RETURNING handover_intent.id, handover_intent.run_id
), event AS (
    -- The same data as services._settle_intent's ORM path writes.
    INSERT INTO handover_journalevent (run_id, intent_id, kind, actor_kind, actor_name, user_id, data, at)
    SELECT settled.run_id, settled.id, 'outcome_recorded', p.actor_kind, p.actor_name, p.user_id,
           jsonb_build_object('status', p.status, 'error_class', p.error_class, 'receipt', p.receipt),
           p.now
    FROM settled, p
)
SELECT count(*) FROM settled
"""


def _prepared_cursor(db: BaseDatabaseWrapper) -> psycopg.Cursor[Any]:
    """A server-binding psycopg cursor on Django's connection. Django's own cursors bind
    parameters client-side, so PostgreSQL would parse and plan these CTEs on every call;
    prepared once per connection, they are only executed.

    The cursor is made once per driver connection and kept on Django's connection wrapper (a
    new connection, after CONN_MAX_AGE or an error, gets a new one): it holds no state between
    calls that matters, since each call fetches its one row before returning."""
    db.ensure_connection()
    raw = db.connection
    cursor: psycopg.Cursor[Any] | None = getattr(db, "_seam_journal_cursor", None)
    if cursor is None or cursor.connection is not raw or cursor.closed:
        cursor = psycopg.Cursor(raw)
        db._seam_journal_cursor = cursor  # type: ignore[attr-defined]
    return cursor


def insert_intent(
    db: BaseDatabaseWrapper,
    *,
    run_id: Any,
    step_id: str,
    turn: int,
    tool: str,
    args_json: str,
    occurrence: int,
    key: str,
    now: datetime,
    actor_kind: str,
    actor_name: str,
    user_id: int | None,
    compensation: bool = False,
) -> tuple[str | None, int | None]:
    """(the run's status, or None if there is no such run; the new intent's id, or None if the
    run admits no intents or the key is already recorded). Raises IntegrityError when the step
    slot is taken by a different intent. `args_json` is the arguments' canonical_json, which
    the caller has already made for the key. A compensation is admitted on a run in any state."""
    cursor = _prepared_cursor(db)
    with db.wrap_database_errors:  # psycopg's errors become Django's (IntegrityError...)
        cursor.execute(
            INSERT_INTENT,
            # In the order of INSERT_INTENT's first CTE.
            (
                run_id,
                step_id,
                turn,
                tool,
                args_json,
                occurrence,
                key,
                now,
                actor_kind,
                actor_name,
                user_id,
                compensation,
            ),
            prepare=True,
        )
        row = cursor.fetchone()
    assert row is not None  # a SELECT of scalar subqueries always yields exactly one row
    status, intent_id = row
    return status, intent_id


def settle_intent(
    db: BaseDatabaseWrapper,
    *,
    intent_id: int,
    status: str,
    error_class: str,
    summary: str,
    receipt_json: str,
    request_id: str,
    now: datetime,
    actor_kind: str,
    actor_name: str,
    user_id: int | None,
) -> bool:
    """Compare-and-swap an open intent to its outcome, with its event. False if it was not open.
    `receipt_json` is the receipt's canonical_json, which the caller made to check its size."""
    cursor = _prepared_cursor(db)
    with db.wrap_database_errors:
        cursor.execute(
            SETTLE_INTENT,
            # In the order of SETTLE_INTENT's first CTE.
            (
                intent_id,
                status,
                error_class,
                summary,
                receipt_json,
                request_id,
                now,
                actor_kind,
                actor_name,
                user_id,
            ),
            prepare=True,
        )
        row = cursor.fetchone()
    assert row is not None  # count(*) always yields exactly one row
    (count,) = row
    return bool(count)
