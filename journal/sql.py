"""The journal's two hot writes as single PostgreSQL statements.

Every side-effecting call an agent makes costs two commits in Seam, so these two writes are
the product's hot path. On PostgreSQL each is one statement run in autocommit mode: the
statement is its own transaction, committed (with synchronous_commit=on) before the driver
returns, and the row change and its journal event are written together by a data-modifying
CTE. That is one round trip per commit — the same as the raw-driver floor — instead of the
BEGIN / statements / COMMIT exchange of an ORM transaction. Seam runs on PostgreSQL only (the
demo on an embedded server), so these statements are the two writes' only path;
tests/journal/test_write_path.py holds them to the rows and events they must write."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql import base as postgresql_base
from django.db.models import Model

from . import intent_columns
from .events import Caller
from .models import ActorKind, AgentToken, Intent, JournalEvent, Run, Tenant
from .orm_rows import ModelColumns, instance_of, model_columns
from .partitions import PARENTS, Tables, run_tables

# --- the statements, built from journal.intent_columns and the models' own table names ---------

_INTENT = Intent._meta.db_table
_RUN = Run._meta.db_table
_EVENT = JournalEvent._meta.db_table
_TOKEN = AgentToken._meta.db_table
_TENANT = Tenant._meta.db_table
# The journal event's columns, as every statement here writes its event.
_EVENT_COLUMNS = "run_id, intent_id, kind, actor_kind, actor_name, user_id, data, at, run_created_at"


def _names(columns: Sequence[tuple[str, str]] | Sequence[str], prefix: str = "") -> str:
    return ", ".join(prefix + (column if isinstance(column, str) else column[0]) for column in columns)


def _placeholders(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"%s::{sql_type}" for _, sql_type in columns)


def _assignments(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{name} = %s::{sql_type}" for name, sql_type in columns)


def _literal(value: Any) -> str:
    """An open outcome's value (a str or an empty object) as an SQL literal."""
    if isinstance(value, dict):
        return "'" + json.dumps(value).replace("'", "''") + "'::jsonb"
    return "'" + str(value).replace("'", "''") + "'"


# The outcome's columns a new row is inserted with (a NULL one is left out).
_OPEN = {name: value for name, value in intent_columns.OPEN_OUTCOME.items() if value is not None}

# Each statement binds its parameters by position, each once (psycopg then has no named
# parameters to map on every call), and casts those whose type PostgreSQL cannot infer. The
# event's columns are taken from the row the statement has just written (RETURNING) rather than
# bound again, so the event cannot disagree with its row. A first CTE naming the parameters
# read better but cost PostgreSQL about 0.05 ms per call in extra CTE scans (pgbench, same run).
#
# The intent and its event are written into the tables __INTENT__ and __EVENT__ stand for: their run's
# month's partitions on the hot path (journal.partitions.run_tables), the partitioned parents
# where a statement is not per call. Every read of a run's rows also names the run's
# created_at, the partition column, so that through the parents PostgreSQL reads one partition.
_INSERT_INTENT = f"""
WITH inserted AS (
    INSERT INTO __INTENT__ (run_id, run_created_at, {_names(intent_columns.INTENT_BOUND)}, {_names(list(_OPEN))})
    SELECT run.id, run.created_at, {_placeholders(intent_columns.INTENT_BOUND)}, {", ".join(map(_literal, _OPEN.values()))}
    FROM {_RUN} AS run
    -- A run admits new intents while running; a compensation is admitted on any run.
    WHERE run.id = %s::uuid AND (run.status = 'running' OR %s::boolean)
    /*caller*/
    -- A run admits at most SEAM_MAX_INTENTS_PER_RUN intents of its own (the parameter is that
    -- limit less one: no row at that offset); a compensation is admitted beyond it.
    AND (%s::boolean OR NOT EXISTS (
        SELECT 1 FROM __INTENT__ AS recorded
        WHERE recorded.run_id = run.id AND recorded.run_created_at = run.created_at OFFSET %s::integer))
    -- After a failed call of the same tool, journal.attempts decides whether the next is
    -- admitted (the taxonomy's responses); it then writes with the check passed.
    AND (%s::boolean OR NOT EXISTS (
        SELECT 1 FROM __INTENT__ AS failed
        WHERE failed.run_id = run.id AND failed.run_created_at = run.created_at
        AND failed.tool = %s::text AND failed.status = 'failed'))
    -- FOR SHARE: intents of one run may be admitted side by side, but never while the run's
    -- status is being changed (completed, cancelled) under them.
    FOR SHARE OF run
    ON CONFLICT (idempotency_key, run_created_at) DO NOTHING
    RETURNING id, run_id, run_created_at, step_id, tool, idempotency_key, intended_at
)
-- The event's data is built here rather than serialised in Python, for one JSON encoding fewer
-- per call.
INSERT INTO __EVENT__ ({_EVENT_COLUMNS})
SELECT run_id, id, 'intent_recorded', %s::text, %s::text, %s::integer,
       jsonb_build_object('step_id', step_id, 'tool', tool, 'idempotency_key', idempotency_key)
       || CASE WHEN %s::boolean THEN '{{"compensation": true}}'::jsonb ELSE '{{}}'::jsonb END,
       intended_at, run_created_at
FROM inserted
RETURNING intent_id
"""  # noqa: S608 - every name is a model's own or journal.intent_columns'; every value a parameter

# An agent's intent, checked against its token in the statement itself (INSERT_INTENT_AS_CALLER).
# What an earlier request of the same token about the same run established (its name, its tenant's
# slug and the run's policy version, from which the key and the event's actor were made) is
# asserted here, so that the request needs no read of its own: the row is written only while the
# token is live, of the run's tenant and still so named, and the key's inputs are still the
# run's. When anything differs nothing is written, and the request is answered the long way.
_CALLER_OWNS_RUN = f"""AND run.tenant_id = (
        SELECT token.tenant_id FROM {_TOKEN} AS token
        JOIN {_TENANT} AS tenant ON tenant.id = token.tenant_id
        WHERE token.digest = %s::text AND token.revoked_at IS NULL
        AND token.name = %s::text AND tenant.key_namespace = %s::text)
    AND run.policy_version = %s::text"""  # noqa: S608


def _for_tables(statement: str, tables: Tables) -> str:
    return statement.replace("__INTENT__", tables.intent).replace("__EVENT__", tables.event)


@functools.cache
def insert_intent_statement(tables: Tables, *, as_caller: bool) -> str:
    """INSERT_INTENT writing `tables`; `as_caller`, INSERT_INTENT_AS_CALLER."""
    statement = _for_tables(_INSERT_INTENT, tables)
    if as_caller:
        return statement.replace("/*caller*/", _CALLER_OWNS_RUN)
    return statement.replace("\n    /*caller*/", "")


INSERT_INTENT = insert_intent_statement(PARENTS, as_caller=False)
INSERT_INTENT_AS_CALLER = insert_intent_statement(PARENTS, as_caller=True)

_SETTLE_INTENT = f"""
WITH settled AS (
    UPDATE __INTENT__
    SET {_assignments(intent_columns.OUTCOME_BOUND)}
    -- The expected status is journal.transitions.outcome_source's: the table owns the edge.
    WHERE id = %s::bigint AND run_created_at = %s::timestamptz AND status = %s::text
    RETURNING id, run_id, run_created_at, status, error_class, receipt, settled_at
)
-- The same data as journal.outcomes' ORM path (for already_so) writes.
INSERT INTO __EVENT__ ({_EVENT_COLUMNS})
SELECT run_id, id, 'outcome_recorded', %s::text, %s::text, %s::integer,
       jsonb_build_object('status', status, 'error_class', error_class, 'receipt', receipt),
       settled_at, run_created_at
FROM settled
RETURNING intent_id
"""  # noqa: S608


@functools.cache
def settle_intent_statement(tables: Tables) -> str:
    """SETTLE_INTENT writing `tables`."""
    return _for_tables(_SETTLE_INTENT, tables)


SETTLE_INTENT = settle_intent_statement(PARENTS)

# The caller's token holds the tenant of the intent's run (its step named by run and step id).
_CALLER_OWNS_STEP = f"""EXISTS (
        SELECT 1 FROM {_RUN} AS run JOIN {_TOKEN} AS token ON token.tenant_id = run.tenant_id
        WHERE run.id = intent.run_id
        AND token.digest = %s::text AND token.revoked_at IS NULL AND token.name = %s::text)"""  # noqa: S608

# An agent's outcome, checked against its token in the statement (see _CALLER_OWNS_RUN): the step
# is named by its run and step id, as the request names it, and the row's columns the answer
# renders are returned with it. The event is written by a CTE the final SELECT does not read,
# which PostgreSQL runs all the same (a data-modifying WITH runs exactly once).
_SETTLE_STEP_AS_CALLER = f"""
WITH settled AS (
    UPDATE __INTENT__ AS intent
    SET {_assignments(intent_columns.OUTCOME_BOUND)}
    WHERE intent.run_id = %s::uuid AND intent.run_created_at = %s::timestamptz
    AND intent.step_id = %s::text AND intent.status = %s::text
    AND {_CALLER_OWNS_STEP}
    RETURNING intent.*
), event AS (
    INSERT INTO __EVENT__ ({_EVENT_COLUMNS})
    SELECT run_id, id, 'outcome_recorded', %s::text, %s::text, NULL,
           jsonb_build_object('status', status, 'error_class', error_class, 'receipt', receipt),
           settled_at, run_created_at
    FROM settled
)
SELECT {_names(intent_columns.ANSWERED_FOR_CALLER)} FROM settled
"""  # noqa: S608


@functools.cache
def settle_step_as_caller_statement(tables: Tables) -> str:
    """SETTLE_STEP_AS_CALLER writing `tables`."""
    return _for_tables(_SETTLE_STEP_AS_CALLER, tables)


SETTLE_STEP_AS_CALLER = settle_step_as_caller_statement(PARENTS)


# An agent's report that the tool answered with an error whose effect is unknown (ok=false,
# error_class=ambiguous): evidence, not an outcome. The row stays open (`intended`, so
# reconciliation still asks about it once its run goes quiet) and keeps the tool's error text
# and class; its dispatch_ambiguous event says the tool answered. Only an open row whose evidence
# differs is written, so a repeated report (a retried request) writes nothing. Not the hot path.
NOTE_EVIDENCE = f"""
WITH noted AS (
    UPDATE {_INTENT} AS intent
    SET {_assignments(intent_columns.EVIDENCE_BOUND)}
    WHERE {{which}} AND intent.status = 'intended'
    AND ({_names(intent_columns.EVIDENCE_BOUND, "intent.")})
        IS DISTINCT FROM ({_placeholders(intent_columns.EVIDENCE_BOUND)})
    RETURNING intent.*
), event AS (
    -- `answered`: the tool answered with an error (the engine's own events of this kind are a
    -- call that got no answer).
    INSERT INTO {_EVENT} ({_EVENT_COLUMNS})
    SELECT run_id, id, 'dispatch_ambiguous', %s::text, %s::text, %s::integer,
           jsonb_build_object('error_class', error_class, 'message', outcome_summary,
                              'request_id', request_id, 'answered', true),
           %s::timestamptz, run_created_at
    FROM noted
)
SELECT {{answered}} FROM noted
"""  # noqa: S608
NOTE_EVIDENCE_BY_ID = NOTE_EVIDENCE.replace("{which}", "intent.id = %s::bigint")
NOTE_EVIDENCE_AS_CALLER = NOTE_EVIDENCE.replace(
    "{which}", "intent.run_id = %s::uuid AND intent.step_id = %s::text\n    AND " + _CALLER_OWNS_STEP
)


@contextmanager
def bound_server_side(db: BaseDatabaseWrapper) -> Iterator[None]:
    """Inside the block, Django's cursors on `db` send their parameters apart from the statement
    (server-side binding), as the journal's own statements do (_prepared_cursor): no value is
    quoted into the text in Python, and a statement run prepare_threshold times on the
    connection is prepared, then only executed, from a plan PostgreSQL keeps.

    Django's cursors otherwise bind client-side. For a reconciled batch's UPDATE ... FROM
    (VALUES ...) of 50 rows and its events' INSERT, quoting the values into the text took several
    times what PostgreSQL took to run them; and a read of a partitioned table that no constant
    narrows to some of its months (the sweep's claim) is planned over every month on each call."""
    db.ensure_connection()
    raw = db.connection
    unbound = raw.cursor_factory
    raw.cursor_factory = postgresql_base.ServerBindingCursor
    try:
        yield
    finally:
        raw.cursor_factory = unbound


def _prepared_cursor(db: BaseDatabaseWrapper) -> psycopg.Cursor[Any]:
    """A server-binding psycopg cursor on Django's connection. Django's own cursors bind
    parameters client-side, so PostgreSQL would parse and plan these CTEs on every call;
    prepared once per connection, they are only executed.

    The cursor is made once per driver connection and kept on Django's connection wrapper (a
    new connection, after CONN_MAX_AGE or an error, gets a new one): it holds no state between
    calls that matters, since each call fetches its one row before returning."""
    # As Django's own cursor() does: a persistent connection is checked once per request (a
    # request whose only statements are the journal's would otherwise skip the check).
    db.close_if_health_check_failed()
    db.ensure_connection()
    raw = db.connection
    cursor: psycopg.Cursor[Any] | None = getattr(db, "_seam_journal_cursor", None)
    if cursor is None or cursor.connection is not raw or cursor.closed:
        cursor = psycopg.Cursor(raw)
        db._seam_journal_cursor = cursor  # type: ignore[attr-defined]
    return cursor


def insert_intent_params(
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
    compensation: bool,
    max_intents: int,
    caller: Caller | None = None,
    after_failure_checked: bool = False,
) -> tuple[Any, ...]:
    """INSERT_INTENT's parameters, in the order of its placeholders; with `caller`,
    INSERT_INTENT_AS_CALLER's."""
    asserted = (
        ()
        if caller is None
        else (caller.digest, caller.token_name, caller.key_namespace, caller.policy_version)
    )
    drafted = {
        "step_id": step_id,
        "turn": turn,
        "tool": tool,
        "args": args_json,
        "occurrence": occurrence,
        "idempotency_key": key,
        "intended_at": now,
    }
    return (
        *(drafted[name] for name, _ in intent_columns.INTENT_BOUND),
        run_id,
        compensation,
        *asserted,
        compensation or not max_intents,  # 0: no limit (the benchmarks' single long run)
        max(max_intents - 1, 0),
        compensation or after_failure_checked,
        tool,
        # A str subclass (a TextChoices member such as ActorKind.AGENT) is passed as the plain
        # str it stands for: psycopg looks up a parameter's dumper by its type at every execute,
        # walking the MRO, which for a Django choices enum costs several times a str's lookup.
        str(actor_kind),
        actor_name,
        user_id,
        compensation,
    )


def insert_intent(
    db: BaseDatabaseWrapper, params: tuple[Any, ...], *, run_created_at: datetime, as_caller: bool = False
) -> int | None:
    """Run INSERT_INTENT (INSERT_INTENT_AS_CALLER `as_caller`) with `params`
    (insert_intent_params) on the partitions of the month of `run_created_at`, the run's
    created_at: the new intent's id, or None if there is no such run, the run admits
    no intents (or no more), the key is already recorded (journal.intents.intent_already_recorded says
    which) or, as a caller, the caller is not as asserted. Raises IntegrityError when the step
    slot is taken by a different intent. A compensation is admitted on a run in any state."""
    cursor = _prepared_cursor(db)
    with db.wrap_database_errors:  # psycopg's errors become Django's (IntegrityError...)
        statement = insert_intent_statement(run_tables(run_created_at, using=db.alias), as_caller=as_caller)
        cursor.execute(statement, params, prepare=True)
        row = cursor.fetchone()
    return None if row is None else row[0]


def settled_columns(
    *, status: str, error_class: str, summary: str, receipt_json: str, request_id: str, now: datetime
) -> tuple[Any, ...]:
    """The columns an outcome writes, as both settle statements (SETTLE_INTENT,
    SETTLE_STEP_AS_CALLER) take them first, in that order (choices as plain str, as in
    insert_intent_params)."""
    written = {
        "status": str(status),
        "error_class": str(error_class),
        "outcome_summary": summary,
        "receipt": receipt_json,
        "request_id": request_id,
        "settled_at": now,
    }
    return tuple(written[name] for name, _ in intent_columns.OUTCOME_BOUND)


def evidence_columns(
    *, error_class: str, summary: str, receipt_json: str, request_id: str
) -> tuple[Any, ...]:
    """The columns an agent's evidence of an unknown effect writes, as the NOTE_EVIDENCE
    statements take them, in that order (choices as plain str)."""
    written = {
        "error_class": str(error_class),
        "outcome_summary": summary,
        "receipt": receipt_json,
        "request_id": request_id,
    }
    return tuple(written[name] for name, _ in intent_columns.EVIDENCE_BOUND)


def settle_intent_params(
    *,
    intent_id: int,
    run_created_at: datetime,
    source: str,
    settled: tuple[Any, ...],
    actor_kind: str,
    actor_name: str,
    user_id: int | None,
) -> tuple[Any, ...]:
    """SETTLE_INTENT's parameters, in the order of its placeholders: `settled` is
    settled_columns'."""
    return (
        *settled,
        intent_id,
        run_created_at,
        str(source),
        str(actor_kind),
        actor_name,
        user_id,
    )


def settle_intent(db: BaseDatabaseWrapper, params: tuple[Any, ...], *, run_created_at: datetime) -> bool:
    """Run SETTLE_INTENT with `params` (settle_intent_params) on the partitions of the month of
    `run_created_at`: compare-and-swap an intent from its expected status (an open one) to its
    outcome, with its event. False if it was not open."""
    cursor = _prepared_cursor(db)
    with db.wrap_database_errors:
        cursor.execute(
            settle_intent_statement(run_tables(run_created_at, using=db.alias)), params, prepare=True
        )
        return cursor.fetchone() is not None


# --- the agent's call, read with its token ---------------------------------------------------
#
# Every agent request authenticates with its token and names a run (and, for an outcome, a step
# of it). One prepared statement reads the live token, its tenant, the run of that tenant and the
# step: the token's row is there whenever the token is live, the run's and the step's columns are
# NULL when there is no such run or step. Built through the ORM (select_related, annotate) the
# same read cost about 2 ms of Python per request on a 2-core machine, for 0.2 ms in PostgreSQL.


@functools.cache
def _agent_call_statement(with_step: bool) -> tuple[str, tuple[ModelColumns, ...]]:
    db = connections[DEFAULT_DB_ALIAS]
    parts = [
        model_columns(AgentToken, "token", db),
        model_columns(Tenant, "tenant", db),
        model_columns(Run, "run", db),
    ]
    if with_step:
        parts.append(model_columns(Intent, "step", db))
    step_join = (
        f"LEFT JOIN {Intent._meta.db_table} AS step ON step.run_id = run.id "
        "AND step.run_created_at = run.created_at AND step.step_id = %s::text"
        if with_step
        else ""
    )
    statement = f"""
SELECT {", ".join(part.sql for part in parts)}
FROM {AgentToken._meta.db_table} AS token
JOIN {Tenant._meta.db_table} AS tenant ON tenant.id = token.tenant_id
LEFT JOIN {Run._meta.db_table} AS run ON run.id = %s::uuid AND run.tenant_id = token.tenant_id
{step_join}
WHERE token.digest = %s::text AND token.revoked_at IS NULL
"""  # noqa: S608 - every name is a model's own; every value is a parameter
    return statement, tuple(parts)


def agent_call_read(
    db: BaseDatabaseWrapper, *, digest: str, run_id: uuid.UUID | None, step_id: str | None, with_step: bool
) -> tuple[Model, Model | None, Model | None] | None:
    """The live token with this digest (its tenant cached on it), the run `run_id` of its tenant
    and, `with_step`, that run's intent `step_id`: (token, run or None, intent or None), or None
    when no live token has this digest. One prepared statement."""
    statement, parts = _agent_call_statement(with_step)
    params: tuple[Any, ...] = (run_id, step_id, digest) if with_step else (run_id, digest)
    cursor = _prepared_cursor(db)
    with db.wrap_database_errors:
        cursor.execute(statement, params, prepare=True)
        row = cursor.fetchone()
    if row is None:
        return None
    objects: list[Model | None] = []
    start = 0
    for part in parts:
        values = row[start : start + len(part.attnames)]
        start += len(part.attnames)
        # A row's primary key is never NULL: a NULL one is a LEFT JOIN that found nothing.
        objects.append(None if values[0] is None else instance_of(part, values, db))
    token, tenant, run = objects[0], objects[1], objects[2]
    intent = objects[3] if with_step else None
    assert token is not None and tenant is not None
    token.tenant = tenant  # type: ignore[attr-defined]
    if run is not None:
        run.tenant = tenant  # type: ignore[attr-defined]
        if intent is not None:
            intent.run = run  # type: ignore[attr-defined]
    return token, run, intent


def settle_step_as_caller(
    db: BaseDatabaseWrapper,
    *,
    caller: Caller,
    step_id: str,
    source: str,
    settled: tuple[Any, ...],
) -> dict[str, Any] | None:
    """Run SETTLE_STEP_AS_CALLER: settle the caller's run's step `step_id` from `source` with
    `settled` (settled_columns'), and its event (the caller's token as the agent actor). The
    row's columns beside those written (intent_columns.ANSWERED_FOR_CALLER), or None when nothing was
    written: no such open step, or the caller is not as asserted."""
    params = (
        *settled,
        caller.run_pk,
        caller.run_created_at,
        step_id,
        str(source),
        caller.digest,
        caller.token_name,
        str(ActorKind.AGENT),
        caller.token_name,
    )
    statement = settle_step_as_caller_statement(run_tables(caller.run_created_at, using=db.alias))
    return _step_as_caller(db, statement, params)


def _step_as_caller(
    db: BaseDatabaseWrapper, statement: str, params: tuple[Any, ...]
) -> dict[str, Any] | None:
    """Run one of the statements that write the caller's step and answer its row's columns
    beside those written (intent_columns.ANSWERED_FOR_CALLER); None when nothing was written."""
    cursor = _prepared_cursor(db)
    with db.wrap_database_errors:
        cursor.execute(statement, params, prepare=True)
        row = cursor.fetchone()
    if row is None:
        return None
    values = dict(zip(intent_columns.ANSWERED_FOR_CALLER, row, strict=True))
    for name in intent_columns.JSON_COLUMNS:
        if isinstance(values.get(name), str):  # Django's connection loads jsonb as text
            values[name] = json.loads(values[name])
    return values


# --- evidence of an unknown effect -----------------------------------------------------------


_NOTED_BY_ID = NOTE_EVIDENCE_BY_ID.replace("{answered}", "id")


def _evidence_params(
    *, evidence: tuple[Any, ...], which: tuple[Any, ...], actor: tuple[Any, ...]
) -> tuple[Any, ...]:
    # `evidence` is (error_class, summary, receipt_json, request_id); the statement compares the
    # row with it as it writes it, and binds it twice.
    return (*evidence, *which, *evidence, *actor)


def note_evidence(
    db: BaseDatabaseWrapper,
    *,
    intent_id: int,
    evidence: tuple[Any, ...],
    actor_kind: str,
    actor_name: str,
    user_id: int | None,
    now: datetime,
) -> bool:
    """Run NOTE_EVIDENCE on the intent `intent_id`: `evidence` is (error_class, summary,
    receipt_json, request_id). False when nothing was written: the row is not open, or already
    holds this evidence."""
    params = _evidence_params(
        evidence=evidence, which=(intent_id,), actor=(str(actor_kind), actor_name, user_id, now)
    )
    cursor = _prepared_cursor(db)
    with db.wrap_database_errors:
        cursor.execute(_NOTED_BY_ID, params, prepare=True)
        return cursor.fetchone() is not None


_NOTED_AS_CALLER = NOTE_EVIDENCE_AS_CALLER.replace("{answered}", _names(intent_columns.ANSWERED_FOR_CALLER))


def note_step_evidence_as_caller(
    db: BaseDatabaseWrapper, *, caller: Caller, step_id: str, evidence: tuple[Any, ...], now: datetime
) -> dict[str, Any] | None:
    """note_evidence for the caller's run's step `step_id` (the caller asserted as
    SETTLE_STEP_AS_CALLER asserts it): the row's columns beside those written
    (intent_columns.ANSWERED_FOR_CALLER), or None when nothing was written."""
    params = _evidence_params(
        evidence=evidence,
        which=(caller.run_pk, step_id, caller.digest, caller.token_name),
        actor=(str(ActorKind.AGENT), caller.token_name, None, now),
    )
    return _step_as_caller(db, _NOTED_AS_CALLER, params)
