"""The intent: the row committed before a side-effecting call leaves, naming the tool, its
canonical arguments and the idempotency key the call carries. Recorded by one statement
(journal.sql.INSERT_INTENT), in process or for an agent whose token a statement asserts; the
same intent again returns the row recorded the first time, and a different one in a taken step
slot is refused. A row proved never sent can be readmitted for resumption."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    IntegrityError,
    connections,
    transaction,
)
from django.utils import timezone

from observability import counters as metrics

from . import attempts, intent_columns, transitions
from . import sql as journal_sql
from .durability import durable, refuse_open_transaction
from .errors import Conflict, NotFound
from .events import Actor, Caller
from .keys import idempotency_key_of_json, step_id_of
from .log_context import journal_log_context
from .models import (
    Intent,
    IntentStatus,
    JournalEvent,
    Run,
    RunStatus,
)
from .orm_rows import intent_of_columns
from .validation import LimitExceeded, check_counter, check_registered_arguments, clean_args_json, clean_tool

# One DEBUG line per intent and per outcome (with run_id and step_id from the log context);
# an ambiguous dispatch is a WARNING.
logger = logging.getLogger("seam.journal")


class StepTaken(Conflict):
    """The step slot (run, turn, tool, occurrence) already holds a different intent."""


class IntentLimitReached(LimitExceeded):
    """The run already holds as many intents as one run may (SEAM_MAX_INTENTS_PER_RUN)."""

    status_code = 409


# --- intents and outcomes ---------------------------------------------------------------------


def step_id_for(*, run: Run, turn: int, tool: str, occurrence: int = 0) -> str:
    return step_id_of(str(run.pk), turn, tool, occurrence)


@dataclass(slots=True)
class IntentDraft:
    """An intent checked and keyed, not yet written: what intent_record and perform both insert."""

    run: Run | None  # None when only the run's key inputs are known (an agent's Caller)
    run_pk: Any
    run_id: str  # str(run_pk), made once
    run_created_at: datetime  # the run's: the month whose partitions its rows lie in
    tool: str
    args: dict[str, Any]
    args_json: str  # canonical_json(args), made once for the size limit, the key and the row
    turn: int
    occurrence: int
    key: str
    step_id: str


def intent_draft(*, run: Run, tool: Any, args: Any, turn: Any, occurrence: Any) -> IntentDraft:
    return _draft_of(
        run=run,
        run_pk=run.pk,
        run_created_at=run.created_at,
        key_namespace=run.tenant.key_namespace,
        policy_version=run.policy_version,
        tool=tool,
        args=args,
        turn=turn,
        occurrence=occurrence,
    )


def _draft_of(
    *,
    run: Run | None,
    run_pk: Any,
    run_created_at: datetime,
    key_namespace: str,
    policy_version: str,
    tool: Any,
    args: Any,
    turn: Any,
    occurrence: Any,
) -> IntentDraft:
    tool = clean_tool(tool)
    clean, args_json = clean_args_json(args)
    check_counter(turn, field="turn")
    check_counter(occurrence, field="occurrence")
    check_registered_arguments(tool, clean)
    run_id = str(run_pk)
    key = idempotency_key_of_json(
        key_namespace=key_namespace,
        run_id=run_id,
        tool=tool,
        args_json=args_json,
        policy_version=policy_version,
        occurrence=occurrence,
    )
    return IntentDraft(
        run=run,
        run_pk=run_pk,
        run_id=run_id,
        run_created_at=run_created_at,
        tool=tool,
        args=clean,
        args_json=args_json,
        turn=turn,
        occurrence=occurrence,
        key=key,
        step_id=step_id_of(run_id, turn, tool, occurrence),
    )


@dataclass(frozen=True)
class IntentRecorded:
    intent: Intent
    created: bool


@journal_log_context
def intent_record(
    *,
    run: Run,
    tool: str,
    args: dict[str, Any],
    turn: int,
    occurrence: int = 0,
    actor: Actor,
    compensation: bool = False,
) -> IntentRecorded:
    """Commit the intent row for one side-effecting call, before the call is made.

    The same intent again (same tool, canonical arguments and occurrence in this run) returns
    the row recorded the first time, whoever recorded it; a different intent in a step slot
    that is already taken is a conflict."""
    draft = intent_draft(run=run, tool=tool, args=args, turn=turn, occurrence=occurrence)
    new_id, intended_at, existing = intent_admit(draft, actor=actor, compensation=compensation)
    if existing is not None:
        return IntentRecorded(intent=existing, created=False)
    assert new_id is not None
    return IntentRecorded(intent=intent_loaded(new_id, draft, intended_at=intended_at), created=True)


def intent_admit(
    draft: IntentDraft, *, actor: Actor, compensation: bool
) -> tuple[int | None, datetime, Intent | None]:
    """Write the draft: (its new id, intended_at, None); or (None, _, the row already holding
    its key), the same intent again. After a failed call of its tool in the run, the taxonomy's
    response decides first (journal.attempts: AttemptRefused). Every other refusal is
    intent_already_recorded's."""
    new_id, intended_at = intent_write(draft, actor=actor, compensation=compensation)
    if new_id is not None:
        return new_id, intended_at, None
    try:
        return None, intended_at, intent_already_recorded(draft, compensation=compensation)
    except _AfterFailure:
        attempts.attempt_check(run_pk=draft.run_pk, tool=draft.tool, args=draft.args, actor=actor)
    new_id, intended_at = intent_write(
        draft, actor=actor, compensation=compensation, after_failure_checked=True
    )
    if new_id is not None:
        return new_id, intended_at, None
    return (
        None,
        intended_at,
        intent_already_recorded(draft, compensation=compensation, after_failure_checked=True),
    )


class _AfterFailure(Exception):
    """The statement wrote nothing because a call of the draft's tool failed in the run."""


@journal_log_context
def intent_record_as_caller(
    *, caller: Caller, tool: Any, args: Any, turn: Any, occurrence: Any = 0
) -> Intent | None:
    """intent_record for an agent whose token and run an earlier request found (a Caller), in
    one statement that asserts them instead of reading them first. The new intent; or None when
    nothing was written (the caller is no longer so, the run admits no intent, the key is
    already recorded or the step slot is taken), and the call is then answered by intent_record
    after reading the token and the run, which says why. Arguments are checked as
    intent_record checks them."""
    draft = _draft_of(
        run=None,
        run_pk=caller.run_pk,
        run_created_at=caller.run_created_at,
        key_namespace=caller.key_namespace,
        policy_version=caller.policy_version,
        tool=tool,
        args=args,
        turn=turn,
        occurrence=occurrence,
    )
    new_id, intended_at = intent_write(draft, actor=caller.actor, compensation=False, caller=caller)
    return None if new_id is None else intent_loaded(new_id, draft, intended_at=intended_at)


def intent_write(
    draft: IntentDraft,
    *,
    actor: Actor,
    compensation: bool,
    caller: Caller | None = None,
    after_failure_checked: bool = False,
) -> tuple[int | None, datetime]:
    """Insert the draft and its event, committed: (new id, intended_at). The id is None when
    there is no such run, the run admits no intents or the slot is taken
    (intent_already_recorded says which), or a `caller` is not as asserted."""
    now = timezone.now()
    try:
        new_id = _insert_intent(
            draft,
            now=now,
            actor=actor,
            any_run_status=compensation,
            caller=caller,
            after_failure_checked=after_failure_checked,
        )
    except IntegrityError:
        # The step slot is taken; whether by this same intent is decided by the caller.
        new_id = None
    if new_id is not None:
        metrics.intent_recorded()
        logger.debug("intent recorded: %s, key %s", draft.tool, draft.key)
    return new_id, now


def intent_already_recorded(
    draft: IntentDraft, *, compensation: bool, after_failure_checked: bool = False
) -> Intent:
    """Why a draft was not inserted: the row already holding its key is returned (the same intent
    again); otherwise NotFound (no run), Conflict (the run admits no intents), _AfterFailure (a
    call of its tool failed: intent_admit asks journal.attempts) or StepTaken (its step slot
    holds another intent)."""
    # The key first: a replay (the common case here) needs no more. A key names its run, so a
    # missing run never has one.
    # Both reads name the run's month: the partition its rows lie in, one index probe.
    existing = (
        Intent.objects.filter(idempotency_key=draft.key, run_created_at=draft.run_created_at)
        .select_related("run")
        .first()
    )
    if existing is not None:
        return existing
    run_status = Run.objects.filter(pk=draft.run_pk).values_list("status", flat=True).first()
    if run_status is None:
        raise NotFound("run not found", field="run")
    if run_status != RunStatus.RUNNING and not compensation:
        raise Conflict(f"run is {run_status}; no new intents are admitted", field="run")
    if not compensation and _intents_full(draft.run_pk):
        raise IntentLimitReached(
            "the run holds as many intents as a run may",
            field="run",
            setting="SEAM_MAX_INTENTS_PER_RUN",
            limit=settings.SEAM_MAX_INTENTS_PER_RUN,
        )
    if not (compensation or after_failure_checked) and attempts.has_failed_call(draft.run_pk, draft.tool):
        raise _AfterFailure
    taken = Intent.objects.filter(
        run_id=draft.run_pk, run_created_at=draft.run_created_at, step_id=draft.step_id
    ).first()
    raise StepTaken(
        f"step {draft.step_id} is already recorded with different arguments"
        f"{f' (key {taken.idempotency_key})' if taken else ''}; use another turn or occurrence for a new intent",
        field="args",
    )


def _intents_full(run_id: Any) -> bool:
    """Whether the run holds SEAM_MAX_INTENTS_PER_RUN intents (read without counting them all;
    0 is no limit)."""
    limit = settings.SEAM_MAX_INTENTS_PER_RUN
    return bool(limit) and Intent.objects.filter(run_id=run_id)[limit - 1 :].exists()


def intent_loaded(pk: int, draft: IntentDraft, *, intended_at: datetime, **settled: Any) -> Intent:
    """The row as Django would load it, without a query (journal.orm_rows says why): the draft
    just inserted, with `settled` columns when its outcome is recorded too.
    tests/journal/test_write_path.py compares the result with the stored row."""
    values = {
        **intent_columns.NEW_ROW,
        "receipt": {},  # the row's own, not the shared default's
        "id": pk,
        "run_id": draft.run_pk,
        "run_created_at": draft.run_created_at,
        "step_id": draft.step_id,
        "turn": draft.turn,
        "tool": draft.tool,
        "args": draft.args,
        "occurrence": draft.occurrence,
        "idempotency_key": draft.key,
        "intended_at": intended_at,
        **settled,
    }
    return intent_of_columns(values, draft.run)


def _insert_intent(
    draft: IntentDraft,
    *,
    now: datetime,
    actor: Actor,
    any_run_status: bool,
    caller: Caller | None = None,
    after_failure_checked: bool = False,
) -> int | None:
    """Insert the intent row and its event, committed together, unless there is no such run, the
    run admits no intents or the key is already recorded. Returns the new intent's id or None;
    raises IntegrityError when the step slot holds another intent. `any_run_status` is set for
    compensations, which are admitted on a run in any state (and say so in their event). With a
    `caller` the statement also asserts it. One statement (journal_sql.INSERT_INTENT) checks the
    run, inserts the row and its event."""
    db = connections[DEFAULT_DB_ALIAS]
    refuse_open_transaction(db)
    # Inside Django's test transaction a failed statement would poison it; a savepoint
    # contains the failure there. In production this runs in autocommit (checked above).
    guard = transaction.atomic() if db.in_atomic_block else contextlib.nullcontext()
    with guard:
        params = journal_sql.insert_intent_params(
            run_id=draft.run_pk,
            step_id=draft.step_id,
            turn=draft.turn,
            tool=draft.tool,
            args_json=draft.args_json,
            occurrence=draft.occurrence,
            key=draft.key,
            now=now,
            actor_kind=actor.kind,
            actor_name=actor.name,
            user_id=actor.user_id,
            compensation=any_run_status,
            max_intents=settings.SEAM_MAX_INTENTS_PER_RUN,
            caller=caller,
            after_failure_checked=after_failure_checked,
        )
        return journal_sql.insert_intent(
            db, params, run_created_at=draft.run_created_at, as_caller=caller is not None
        )


def intent_readmit(*, intent: Intent, actor: Actor) -> Intent:
    """Open again, for resumption, a row that reconciliation proved `not_performed`: the call
    never happened, so sending it now with the same key is the first time, not a repeat."""
    now = timezone.now()
    with durable():
        reopened = transitions.intent_transition(
            intent=intent,
            source=IntentStatus.NOT_PERFORMED,
            target=IntentStatus.INTENDED,
            actor=actor,
            event=JournalEvent.Kind.INTENT_READMITTED,
            data={"idempotency_key": intent.idempotency_key},
            changes={"settled_at": None, "intended_at": now},
            at=now,
        )
        if not reopened.moved:
            raise Conflict(
                f"intent {intent.step_id} is not `not_performed`; it cannot be re-admitted", field="status"
            )
    return Intent.objects.select_related("run", "run__tenant").get(pk=intent.pk)
