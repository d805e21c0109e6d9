"""A journaled call, whole: the intent committed, the call made with its idempotency key, the
outcome committed. A call already settled is answered from the journal and not sent again; one
recorded and still open is not sent at all (IntentInDoubt). When the database is lost before the
call, it is not made (JournalUnavailable); after it, the caller learns it was made
(OutcomeNotRecorded) and reconciliation settles the open row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from observability.context import bind as bind_log_context
from observability.context import unbind as unbind_log_context

from .durability import CONNECTION_ERRORS, drop_broken_connection
from .errors import Conflict, JournalError
from .events import Actor
from .intents import IntentDraft, intent_admit, intent_draft, intent_loaded
from .models import (
    ErrorClass,
    Intent,
    Run,
)
from .outcomes import (
    dispatch_ambiguous_record,
    outcome_already_recorded,
    outcome_draft,
    outcome_record,
    outcome_write,
)
from .tool_errors import DispatchResult, ToolError


class IntentInDoubt(Conflict):
    """`perform` found this intent already recorded by someone else and not yet settled. The call
    may be in flight or may have happened; sending it again is a gamble, so it is not sent."""

    def __init__(self, intent: Intent) -> None:
        super().__init__(
            f"intent {intent.step_id} (key {intent.idempotency_key}) is already recorded and has "
            "no outcome yet; it will be settled by asking the downstream system, not re-sent"
        )
        self.intent = intent


class JournalUnavailable(JournalError):
    """The journal's database did not confirm the intent (it is down, restarting, or the
    connection was cut), so the call was not made. Retrying is safe: if the row did land, the
    retry finds it open and leaves it to reconciliation instead of sending."""

    status_code = 503


class OutcomeNotRecorded(JournalError):
    """The call was made (its intent is committed), but the database did not take its outcome.
    The row stays `intended`, and reconciliation settles it by asking the downstream about its key."""

    status_code = 503

    def __init__(self, intent: Intent, cause: Exception) -> None:
        super().__init__(
            f"{intent.tool} was called with key {intent.idempotency_key}, but its outcome could not "
            f"be recorded ({str(cause).strip() or type(cause).__name__}); the intent stays open and "
            "reconciliation will settle it by asking the downstream system. Do not call it again."
        )
        self.intent = intent


# --- doing the call ---------------------------------------------------------------------------


Dispatch = Callable[[dict[str, Any], str], DispatchResult]


@dataclass(frozen=True)
class Performed:
    intent: Intent
    replayed: bool  # True when the outcome comes from an earlier, already settled attempt


def perform(
    *,
    run: Run,
    tool: str,
    args: dict[str, Any],
    dispatch: Dispatch,
    turn: int,
    occurrence: int = 0,
    actor: Actor,
    compensation: bool = False,
) -> Performed:
    """Record the intent (committed), make the call with its idempotency key, record the outcome.

    If the intent was already settled, its stored outcome is returned and nothing is sent. If it
    is recorded but open (another process is on it, or died on it), IntentInDoubt is raised and
    nothing is sent. A ToolError settles the row as failed with its class, except `ambiguous`,
    which leaves the row open; any other exception also leaves it open and is re-raised.

    When the database cannot be reached: JournalUnavailable before the call (it was not made),
    OutcomeNotRecorded after it (it was made; reconciliation settles the open row).

    This is every agent's hot path, so it does the work of intent_record and outcome_record
    through their parts rather than through them: one log context for the whole call, and the
    Intent built once, after the outcome, instead of once per write (docs/performance.md)."""
    draft = intent_draft(run=run, tool=tool, args=args, turn=turn, occurrence=occurrence)
    token = bind_log_context(run_id=draft.run_id, step_id=draft.step_id)
    try:
        return _perform(draft, dispatch=dispatch, actor=actor, compensation=compensation)
    finally:
        unbind_log_context(token)


def _perform(draft: IntentDraft, *, dispatch: Dispatch, actor: Actor, compensation: bool) -> Performed:
    try:
        new_id, intended_at, existing = intent_admit(draft, actor=actor, compensation=compensation)
    except CONNECTION_ERRORS as exc:
        drop_broken_connection()
        raise JournalUnavailable(
            f"the intent for {draft.tool} could not be recorded: the journal's database did not "
            f"confirm it ({str(exc).strip() or type(exc).__name__}), so the call was not made"
        ) from exc
    if existing is not None:
        if existing.is_settled:
            return Performed(intent=existing, replayed=True)
        raise IntentInDoubt(existing)
    assert new_id is not None  # intent_admit answers a new id or the existing row

    def recorded() -> Intent:
        return intent_loaded(new_id, draft, intended_at=intended_at)

    # From here on the call has left (or may have): a lost database is OutcomeNotRecorded, so
    # the caller learns that the call was made, not only that something failed.
    try:
        result = _dispatched(draft, dispatch=dispatch, recorded=recorded, actor=actor)
        outcome = outcome_draft(
            ok=True,
            summary=result.summary,
            receipt=result.receipt,
            error_class="",
            request_id=result.request_id,
            # A success for a state older than the intent is already_so (predates_intent).
            evidence_at=result.evidence_at,
            intended_at=intended_at,
        )
        settled_at = outcome_write(
            new_id, draft.run_pk, outcome, run_created_at=draft.run_created_at, actor=actor
        )
        if settled_at is None:  # settled meanwhile by someone else (reconciliation, a person)
            return Performed(intent=outcome_already_recorded(new_id, outcome), replayed=False)
    except CONNECTION_ERRORS as exc:
        drop_broken_connection()
        raise OutcomeNotRecorded(recorded(), exc) from exc
    settled = intent_loaded(
        new_id,
        draft,
        intended_at=intended_at,
        request_id=outcome.request_id,
        settled_at=settled_at,
        **outcome.as_columns(),
    )
    return Performed(intent=settled, replayed=False)


def _dispatched(
    draft: IntentDraft, *, dispatch: Dispatch, recorded: Callable[[], Intent], actor: Actor
) -> DispatchResult:
    """Make the call with the intent's key: its result, or, when it raises, the failure recorded
    (a classified ToolError settles the row as failed; an ambiguous one, or any other exception,
    leaves it open with its evidence) and raised again. `recorded` builds the committed intent,
    only when a failure needs it."""
    try:
        return dispatch(draft.args, draft.key)
    except ToolError as exc:
        if exc.error_class == ErrorClass.AMBIGUOUS:
            dispatch_ambiguous_record(
                intent=recorded(), error_class=exc.error_class, message=exc.message, actor=actor
            )
            raise
        outcome_record(
            intent=recorded(),
            ok=False,
            summary=exc.message,
            error_class=exc.error_class,
            request_id=exc.request_id,
            actor=actor,
        )
        raise
    except BaseException as exc:
        if isinstance(exc, Exception):
            dispatch_ambiguous_record(
                intent=recorded(), error_class=ErrorClass.AMBIGUOUS, message=repr(exc), actor=actor
            )
        raise
