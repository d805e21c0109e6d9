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

INSERT_INTENT = """
WITH run AS (
    -- FOR SHARE: intents of one run may be admitted side by side, but never while the run's
    -- status is being changed (completed, cancelled) under them.
    SELECT id, status FROM handover_run WHERE id = %(run_id)s FOR SHARE
), inserted AS (
    INSERT INTO handover_intent (
        run_id, step_id, turn, tool, args, occurrence, idempotency_key, status,
        error_class, outcome_summary, receipt, request_id, intended_at)
    SELECT run.id, %(step_id)s, %(turn)s, %(tool)s, %(args)s::jsonb, %(occurrence)s, %(key)s,
           'intended', '', '', '{}'::jsonb, '', %(now)s
    FROM run
    -- A run admits new intents while running; a compensation is admitted on any run.
    WHERE run.status = 'running' OR %(compensation)s
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id
), event AS (
    -- The event's data is built here rather than serialised in Python: the same object as
    -- services._intent_event_data, for one JSON encoding fewer per call.
    INSERT INTO handover_journalevent (run_id, intent_id, kind, actor_kind, actor_name, user_id, data, at)
    SELECT %(run_id)s, inserted.id, 'intent_recorded', %(actor_kind)s, %(actor_name)s, %(user_id)s,
           jsonb_build_object('step_id', %(step_id)s::text, 'tool', %(tool)s::text,
                              'idempotency_key', %(key)s::text)
           || CASE WHEN %(compensation)s THEN '{"compensation": true}'::jsonb ELSE '{}'::jsonb END,
           %(now)s
    FROM inserted
)
SELECT (SELECT status FROM run), (SELECT id FROM inserted)
"""

SETTLE_INTENT = """
WITH settled AS (
    UPDATE handover_intent
    SET status = %(status)s, error_class = %(error_class)s, outcome_summary = %(summary)s,
        receipt = %(receipt)s::jsonb, request_id = %(request_id)s, settled_at = %(now)s
    WHERE id = %(intent_id)s AND status = 'intended'
    RETURNING id, run_id
), event AS (
    -- The same data as services._settle_intent's ORM path writes.
    INSERT INTO handover_journalevent (run_id, intent_id, kind, actor_kind, actor_name, user_id, data, at)
    SELECT settled.run_id, settled.id, 'outcome_recorded', %(actor_kind)s, %(actor_name)s, %(user_id)s,
           jsonb_build_object('status', %(status)s::text, 'error_class', %(error_class)s::text,
                              'receipt', %(receipt)s::jsonb),
           %(now)s
    FROM settled
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
            {
                "run_id": run_id,
                "step_id": step_id,
                "turn": turn,
                "tool": tool,
                "args": args_json,
                "occurrence": occurrence,
                "key": key,
                "now": now,
                "actor_kind": actor_kind,
                "actor_name": actor_name,
                "user_id": user_id,
                "compensation": compensation,
            },
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
            {
                "intent_id": intent_id,
                "status": status,
                "error_class": error_class,
                "summary": summary,
                "receipt": receipt_json,
                "request_id": request_id,
                "now": now,
                "actor_kind": actor_kind,
                "actor_name": actor_name,
                "user_id": user_id,
            },
            prepare=True,
        )
        row = cursor.fetchone()
    assert row is not None  # count(*) always yields exactly one row
    (count,) = row
    return bool(count)
