"""The one owner of every status change of an intent row and of a run.

A status moves only along an edge of the tables below, and only through this module: each change
is a compare-and-swap (UPDATE ... WHERE id = ... AND status IN (the statuses the writer expects))
with its journal event in the same transaction, and a run's change also bumps Run.version, the
optimistic lock that writers and the console's state token compare. A pair that is not in its
table is refused (TransitionRefused, a Conflict: 409) before anything is written. A row found in
another status than expected is not moved and nothing is written (Moved.moved is False): someone
else moved it first, which a doubled sweep treats as done and a person's action as a conflict.

The journal's hot path keeps its single statement: journal.sql.SETTLE_INTENT compares-and-swaps
from the status outcome_source answers, checked against INTENT_TRANSITIONS with a set lookup
(no query, no ORM), and writes its event in the same statement (docs/performance.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, cast

from django.db import connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Field
from django.utils import timezone

from . import sql as journal_sql
from .errors import Conflict
from .events import Actor, event_insert, event_of
from .models import Intent, IntentStatus, JournalEvent, Run, RunStatus
from .orm_rows import update_expression_sql
from .partitions import run_tables

# --- the tables -------------------------------------------------------------------------------

# (from, to): why a row takes that edge. A status missing as a `from` is an end.
INTENT_EDGES: Final[Mapping[tuple[str, str], str]] = MappingProxyType(
    {
        (IntentStatus.INTENDED, IntentStatus.PERFORMED): (
            "the call succeeded (the runtime's outcome), reconciliation found it done, or a person "
            "judged it done"
        ),
        (IntentStatus.INTENDED, IntentStatus.FAILED): "the call failed with a classified error (the runtime)",
        (IntentStatus.INTENDED, IntentStatus.NOT_PERFORMED): (
            "the downstream has no record of the key (reconciliation), or a person judged that the "
            "call never happened"
        ),
        (IntentStatus.INTENDED, IntentStatus.UNKNOWN): "reconciliation could not find out: a person decides",
        (IntentStatus.INTENDED, IntentStatus.ALREADY_SO): (
            "reconciliation found the world already so, by evidence older than the intent: not the run's work"
        ),
        (IntentStatus.INTENDED, IntentStatus.INTENDED): (
            "a person asks again about a call still open: its lookup bookkeeping starts over; "
            "reconciliation's lookup failed and the call is asked about again later; or the tool "
            "answered with an error whose effect is unknown (the agent's evidence, kept on the row)"
        ),
        (IntentStatus.UNKNOWN, IntentStatus.PERFORMED): "a person judged the unknown call done",
        (IntentStatus.UNKNOWN, IntentStatus.NOT_PERFORMED): "a person judged the unknown call never happened",
        (IntentStatus.UNKNOWN, IntentStatus.ALREADY_SO): (
            "the unknown call's downstream shows the state predates the intent: not the run's work"
        ),
        (
            IntentStatus.UNKNOWN,
            IntentStatus.INTENDED,
        ): "a person asks reconciliation to look the call up again",
        (IntentStatus.NOT_PERFORMED, IntentStatus.INTENDED): (
            "re-admitted for resumption: the call never happened, so sending it now with its key "
            "is the first time"
        ),
        # already_so is an end too: the world was so before the run, so nothing is sent or undone.
        # performed and failed are ends: an undo is a new intent (a compensation), a retry a new
        # occurrence with its own key.
    }
)

RUN_EDGES: Final[Mapping[tuple[str, str], str]] = MappingProxyType(
    {
        (RunStatus.RUNNING, RunStatus.COMPLETED): "the runtime, or a resumption, finished every planned step",
        (RunStatus.RUNNING, RunStatus.ESCALATED): (
            "handed to a person: reconciliation's decision, a fan-out that cannot decide, or a "
            "compensation that failed"
        ),
        (RunStatus.RUNNING, RunStatus.COMPENSATED): "the decision undid every write, and hands the run over",
        (RunStatus.RUNNING, RunStatus.CANCELLED): (
            "cancelled by the runtime, or a stuck run resolved by a person; no new intents are admitted"
        ),
        (
            RunStatus.RUNNING,
            RunStatus.RUNNING,
        ): "a person resumes a stuck run (fresh heartbeat, cleared outcome)",
        (RunStatus.ESCALATED, RunStatus.RUNNING): "a person resumes the run",
        (RunStatus.ESCALATED, RunStatus.COMPENSATED): "a person's undo of the run undid every write",
        (
            RunStatus.ESCALATED,
            RunStatus.ESCALATED,
        ): "a compensation failed: handed over again, with that reason",
        (
            RunStatus.COMPENSATED,
            RunStatus.RUNNING,
        ): "a person resumes the run (nothing it did is left undone)",
        (RunStatus.COMPENSATED, RunStatus.ESCALATED): "a compensation of the run failed after all",
        (RunStatus.COMPLETED, RunStatus.ESCALATED): "a person's undo of a step of the completed run failed",
        (RunStatus.CANCELLED, RunStatus.CANCELLED): (
            "a cancelled run's call turned out unknown: it joins the queue for a person, still cancelled"
        ),
        # completed, compensated and cancelled runs are never reopened by their agent: nothing but
        # a person's resumption returns a run to `running`.
    }
)

INTENT_TRANSITIONS: Final[frozenset[tuple[str, str]]] = frozenset(INTENT_EDGES)
RUN_TRANSITIONS: Final[frozenset[tuple[str, str]]] = frozenset(RUN_EDGES)

# The runtime records an outcome on an open row only. journal.sql.SETTLE_INTENT binds this as the
# status it expects; outcome_source checks the outcome against the table on the way.
OUTCOME_SOURCE: Final = IntentStatus.INTENDED


# --- results and refusals ---------------------------------------------------------------------


class TransitionRefused(Conflict):
    """A status change its table does not allow. Raised before anything is written."""

    def __init__(self, *, model: str, source: tuple[str, ...], target: str) -> None:
        pairs = ", ".join(f"{s} → {target}" for s in source)
        super().__init__(f"{model} status cannot change {pairs}", field="status")
        self.model = model
        self.source = source
        self.target = target


@dataclass(frozen=True)
class Moved:
    """What a compare-and-swap did. `moved` is False when the row was not in any expected status
    (someone else moved it first): then nothing was written and `event` is None."""

    moved: bool
    target: str
    event: JournalEvent | None = None


# --- the transitions --------------------------------------------------------------------------


def outcome_source(*, target: str) -> str:
    """The status from which the hot path records the outcome `target` (journal.sql.SETTLE_INTENT's
    expected status), or TransitionRefused. A set lookup: the hot path pays no query for it."""
    if (OUTCOME_SOURCE, target) not in INTENT_TRANSITIONS:
        raise TransitionRefused(model="intent", source=(OUTCOME_SOURCE,), target=target)
    return OUTCOME_SOURCE


def intent_transition(
    *,
    intent: Intent,
    source: str | tuple[str, ...],
    target: str,
    actor: Actor,
    event: str,
    data: dict[str, Any] | None = None,
    changes: Mapping[str, Any] | None = None,
    at: datetime | None = None,
) -> Moved:
    """Move the intent row from `source` (one status, or any of several) to `target`, writing
    `changes` (its other columns) and the journal event `event` with `data`, in the caller's
    transaction or one of its own. `intent` is updated to match on success.

    The run's version is not bumped: the hot path settles intents without touching the run row,
    and a person's action on a step bumps it for its own state token."""
    sources = _checked(model="intent", table=INTENT_TRANSITIONS, source=source, target=target)
    now = at or timezone.now()
    values = _values(changes, target=target)
    with transaction.atomic(savepoint=False):
        moved = Intent.objects.filter(pk=intent.pk, status__in=sources).update(**values)
        if not moved:
            return Moved(moved=False, target=target)
        written = event_insert(
            run_id=intent.run_id,
            run_created_at=intent.run_created_at,
            intent_id=intent.pk,
            kind=event,
            actor=actor,
            at=now,
            data=data,
        )
        _apply(intent, values, refresh=())
    return Moved(moved=True, target=target, event=written)


@dataclass(frozen=True)
class IntentMove:
    """One row's part of intents_transition: its target, its other columns and its event."""

    intent: Intent
    target: str
    event: str
    data: dict[str, Any]
    changes: Mapping[str, Any]


def intents_transition(*, moves: Sequence[IntentMove], source: str, actor: Actor, at: datetime) -> list[bool]:
    """intent_transition for many rows from `source`, in the caller's transaction or one of its
    own: the compare-and-swap of every row that writes the same columns in one UPDATE (a batch of
    reconciled rows is one or two such groups), then the events of the rows that moved in one
    INSERT. Returns, per move, whether its row moved. An instance that moved takes the values
    written, except those the database computes (a counter's F expression), which are not read
    back: one query per row is what a batch saves."""
    for move in moves:
        _checked(model="intent", table=INTENT_TRANSITIONS, source=source, target=move.target)
    values = [_values(move.changes, target=move.target) for move in moves]
    rows = [
        (move.intent.pk, move.intent.run_created_at, written)
        for move, written in zip(moves, values, strict=True)
    ]
    db = connections[router.db_for_write(Intent)]
    # Bound server-side: the batch's UPDATE and INSERT are the same statements batch after batch,
    # prepared once per connection instead of some 500 values quoted into their text each time.
    with transaction.atomic(savepoint=False), journal_sql.bound_server_side(db):
        moved_ids = _moved_by_shape(db, source=source, rows=rows)
        moved = [move.intent.pk in moved_ids for move in moves]
        JournalEvent.objects.bulk_create(
            [
                event_of(
                    run_id=move.intent.run_id,
                    run_created_at=move.intent.run_created_at,
                    intent_id=move.intent.pk,
                    kind=move.event,
                    actor=actor,
                    at=at,
                    data=move.data,
                )
                for move, done in zip(moves, moved, strict=True)
                if done
            ]
        )
    for move, written, done in zip(moves, values, moved, strict=True):
        if done:
            for name, value in written.items():
                if not hasattr(value, "resolve_expression"):
                    setattr(move.intent, name, value)
    return moved


def _moved_by_shape(
    db: BaseDatabaseWrapper, *, source: str, rows: list[tuple[int, datetime, dict[str, Any]]]
) -> set[int]:
    """The ids of `rows` (id, the run's created_at, the columns written) moved from `source`, one
    UPDATE per shape and month: rows group by the columns they write, by any expression written
    (an expression is the same SQL for every row of its group, a plain value is each row's own),
    and by their run's month's partition, which the UPDATE names (journal.partitions)."""
    groups: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
    for pk, run_created_at, written in rows:
        shape = tuple(
            (name, value if hasattr(value, "resolve_expression") else None)
            for name, value in sorted(written.items())
        )
        partition = run_tables(run_created_at, using=db.alias).intent
        groups.setdefault((partition, *shape), []).append((pk, written))
    moved: set[int] = set()
    for (partition, *written_shape), group in groups.items():
        moved |= _update_each_from(
            db, source=source, columns=[name for name, _ in written_shape], rows=group, partition=partition
        )
    return moved


def _update_each_from(
    db: BaseDatabaseWrapper,
    *,
    source: str,
    columns: list[str],
    rows: list[tuple[int, dict[str, Any]]],
    partition: str,
) -> set[int]:
    """One UPDATE ... FROM (VALUES ...) of `partition` (a month's, or the parent) writing each
    row's own `columns` where the row is still in `source`: the ids that moved. A column whose
    value is an expression (the same in every row) is compiled once by Django's compiler, as
    QuerySet.update would (journal.orm_rows)."""
    quote = db.ops.quote_name
    fields = {name: cast("Field[Any, Any]", Intent._meta.get_field(name)) for name in columns}
    column = {name: quote(cast(str, field.column)) for name, field in fields.items()}
    # The month's partition, under the parent's name: an expression Django compiled names the
    # parent's columns (journal_intent.lookup_attempts + 1).
    table = quote(Intent._meta.db_table)
    pk = quote(cast(str, Intent._meta.pk.column))
    first = rows[0][1]
    plain = [name for name in columns if not hasattr(first[name], "resolve_expression")]
    assignments, params = [], []
    for name in columns:
        if name in plain:
            assignments.append(f"{column[name]} = v.{column[name]}")
        else:
            sql, expression_params = update_expression_sql(Intent, first[name], db)
            assignments.append(f"{column[name]} = {sql}")
            params += expression_params
    row_sql = (
        "(" + ", ".join(["%s::bigint"] + [f"%s::{fields[name].cast_db_type(db)}" for name in plain]) + ")"
    )
    for row_pk, written in rows:
        params += [row_pk, *(fields[name].get_db_prep_save(written[name], connection=db) for name in plain)]
    params.append(source)
    # Every name in the statement is the model's own, quoted; every value is a parameter.
    statement = (
        f"UPDATE {quote(partition)} AS {table} SET {', '.join(assignments)} "  # noqa: S608
        f"FROM (VALUES {', '.join([row_sql] * len(rows))}) AS v ({', '.join([pk, *(column[n] for n in plain)])}) "
        f"WHERE {table}.{pk} = v.{pk} AND {table}.{column['status']} = %s "
        f"RETURNING {table}.{pk}"
    )
    with db.cursor() as cursor:
        cursor.execute(statement, params)
        return {row_pk for (row_pk,) in cursor.fetchall()}


def run_transition(
    *,
    run: Run,
    source: str | tuple[str, ...],
    target: str,
    actor: Actor,
    event: str,
    data: dict[str, Any] | None = None,
    changes: Mapping[str, Any] | None = None,
    at: datetime | None = None,
) -> Moved:
    """Move the run from `source` (one status, or any of several) to `target`, writing `changes`
    (its other columns), bumping its version and writing the journal event `event` with `data`,
    in the caller's transaction or one of its own. `run` is updated to match on success,
    version included."""
    sources = _checked(model="run", table=RUN_TRANSITIONS, source=source, target=target)
    now = at or timezone.now()
    values = {**_values(changes, target=target), "version": F("version") + 1, "updated_at": now}
    with transaction.atomic(savepoint=False):
        moved = Run.objects.filter(pk=run.pk, status__in=sources).update(**values)
        if not moved:
            return Moved(moved=False, target=target)
        written = event_insert(
            run_id=run.pk,
            run_created_at=run.created_at,
            intent_id=None,
            kind=event,
            actor=actor,
            at=now,
            data=data,
        )
        _apply(run, values, refresh=("version",))
    return Moved(moved=True, target=target, event=written)


def run_touch(*, run_id: Any, at: datetime | None = None) -> None:
    """Bump the run's version for a change beside it that its page shows (an undo finished, a
    dead letter opened or closed by a worker): a page polling the state token then redraws, and
    an action drawn before the change is refused as stale. No status moves, so no event."""
    Run.objects.filter(pk=run_id).update(version=F("version") + 1, updated_at=at or timezone.now())


# What a person may change on a run beside its status (run_transition moves the status): who
# holds it, and whether it still waits on a person.
PERSON_FIELDS = frozenset({"assignee", "awaiting_person"})


def run_bump(*, run_id: Any, **changes: Any) -> None:
    """Bump the run's version for a person's change beside its status (an assignment, a step
    settled by hand, an escalation closed), with that change's PERSON_FIELDS: a page drawn
    before it is refused as stale and redraws. Its time is left alone, unlike run_touch's: the
    queue's "waiting since" is the run's, not the person's."""
    unknown = set(changes) - PERSON_FIELDS
    if unknown:
        raise ValueError(f"run_bump changes only {sorted(PERSON_FIELDS)}, not {sorted(unknown)}")
    Run.objects.filter(pk=run_id).update(version=F("version") + 1, **changes)


def run_plan_rewrite(
    *, run: Run, plan: list[dict[str, Any]], actor: Actor, data: dict[str, Any] | None = None
) -> Moved:
    """Replace a running run's plan (reconciliation carrying it to the running code's versions),
    with its version bumped, so that a writer holding the old plan is refused, and its event. Not
    moved when the run is no longer running."""
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        moved = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            plan=plan, version=F("version") + 1, updated_at=now
        )
        if not moved:
            return Moved(moved=False, target=RunStatus.RUNNING)
        written = event_insert(
            run_id=run.pk,
            run_created_at=run.created_at,
            intent_id=None,
            kind=JournalEvent.Kind.RUN_PLAN_UPGRADED,
            actor=actor,
            at=now,
            data={"plan_steps": len(plan), **(data or {})},
        )
        run.plan, run.updated_at = plan, now
        run.refresh_from_db(fields=["version"])
    return Moved(moved=True, target=RunStatus.RUNNING, event=written)


def _checked(
    *, model: str, table: frozenset[tuple[str, str]], source: str | tuple[str, ...], target: str
) -> tuple[str, ...]:
    sources = (source,) if isinstance(source, str) else tuple(source)
    forbidden = tuple(s for s in sources if (s, target) not in table)
    if forbidden or not sources:
        raise TransitionRefused(model=model, source=forbidden, target=target)
    return sources


def _values(changes: Mapping[str, Any] | None, *, target: str) -> dict[str, Any]:
    values = dict(changes or {})
    # The status and the version are this module's to write; a caller's copy would bypass it.
    if {"status", "version"} & values.keys():
        raise ValueError("status and version are written by the transition itself, not passed in changes")
    values["status"] = target
    return values


def _apply(row: Intent | Run, values: dict[str, Any], *, refresh: tuple[str, ...]) -> None:
    """Make the caller's instance match the row: plain values are set, and columns computed by the
    database (the version, counters) are read back."""
    computed = [name for name, value in values.items() if hasattr(value, "resolve_expression")]
    for name, value in values.items():
        if name not in computed:
            setattr(row, name, value)
    if computed or refresh:
        row.refresh_from_db(fields=sorted({*computed, *refresh}))
