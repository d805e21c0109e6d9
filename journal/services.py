"""Writes to the run journal. Every function here that records an intent or an outcome commits
durably before it returns, and refuses to run inside a caller's open transaction: a row that
is not committed when the call leaves is a comment, not a record.

Views, the REST API, the Python client's server side, the decorator, and the reconciliation
and compensation workers all write through these functions."""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connection,
    connections,
    transaction,
)
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.utils import timezone

from observability import counters as metrics
from observability.context import bind as bind_log_context
from observability.context import unbind as unbind_log_context

from . import sql as journal_sql
from . import transitions
from .errors import Conflict, InvalidInput, JournalError, NotFound
from .events import Actor, Caller, event_record
from .keys import NotCanonicalisable, canonical_args, canonical_json, idempotency_key_of_json, step_id_of
from .log_context import journal_log_context
from .models import (
    CustomerMessage,
    ErrorClass,
    Escalation,
    Intent,
    IntentStatus,
    JournalEvent,
    OutcomeReason,
    Run,
    RunStatus,
    Tenant,
)
from .selectors import stale_after
from .signals import escalation_opened
from .tool_errors import ArgumentsRefused, DispatchResult, ToolError, arguments_check, predates_intent

MAX_ARGS_BYTES = 64 * 1024
MAX_RECEIPT_BYTES = 64 * 1024
MAX_PLAN_BYTES = 256 * 1024
MAX_SUMMARY_CHARS = 4000
MAX_MESSAGE_CHARS = 10_000
TOOL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,99}$")
VERSION_NAMES = ("schema", "flow", "policy", "capability")
MAX_COUNTER = 2**31 - 1  # turn and occurrence are PostgreSQL integers

# One DEBUG line per intent and per outcome (with run_id and step_id from the log context);
# an ambiguous dispatch is a WARNING.
logger = logging.getLogger("seam.journal")


# --- errors -----------------------------------------------------------------------------------

# The refusals every journal module raises (JournalError, InvalidInput, NotFound, Conflict) are
# in journal.errors, and Actor and event_record in journal.events, below journal.transitions;
# importing them here keeps journal.services.Conflict (and the rest) where callers find them.


class StepTaken(Conflict):
    """The step slot (run, turn, tool, occurrence) already holds a different intent."""


class LimitExceeded(InvalidInput):
    """A bound on the work one run may ask for (a setting, named in the message and in
    `setting`): the request is refused and nothing is written."""

    def __init__(self, message: str, *, field: str, setting: str, limit: int) -> None:
        super().__init__(f"{message}; the limit is {limit} ({setting})", field=field)
        self.setting = setting
        self.limit = limit


class IntentLimitReached(LimitExceeded):
    """The run already holds as many intents as one run may (SEAM_MAX_INTENTS_PER_RUN)."""

    status_code = 409


class OpenTransactionRefused(JournalError):
    """Raised when an intent would be recorded inside a transaction the caller still holds open:
    the call would leave before the row is committed, which is the failure the journal exists to
    prevent."""

    status_code = 500


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


# Errors that mean the database connection failed, not that the statement was refused.
CONNECTION_ERRORS = (OperationalError, InterfaceError)


def _drop_broken_connection() -> None:
    """After a connection error, close this thread's connection if it is broken, so the next
    call reconnects. Django does this itself only at a request's (or Celery task's) boundaries;
    an agent runtime performing calls in a loop has none, and would otherwise get "the
    connection is lost" forever after a database restart."""
    if not connection.in_atomic_block:
        connection.close_if_unusable_or_obsolete()


# --- durability -------------------------------------------------------------------------------


OPEN_TRANSACTION_MESSAGE = (
    "refusing to record inside an open transaction: the row would not be committed before the "
    "call leaves. Call this outside transaction.atomic()."
)


def inside_open_transaction(db: BaseDatabaseWrapper | None = None) -> bool:
    if db is None:
        db = transaction.get_connection()
    if not db.atomic_blocks:  # the usual case, and on every journaled call
        # db.autocommit is only meaningful once connected; get_autocommit() connects first.
        return not (db.autocommit if db.connection is not None else db.get_autocommit())
    # Django's TestCase wraps each test in atomic blocks it marks as its own; durable blocks
    # ignore those, and so do we. Any other open block means the caller holds a transaction.
    return any(not getattr(b, "_from_testcase", False) for b in db.atomic_blocks)


def _refuse_open_transaction(db: BaseDatabaseWrapper) -> None:
    if inside_open_transaction(db):
        raise OpenTransactionRefused(OPEN_TRANSACTION_MESSAGE)


@contextlib.contextmanager
def durable() -> Iterator[None]:
    """A transaction that is committed when the block exits, or an error if the caller already
    holds one open (then nothing inside would be durable when we return)."""
    if inside_open_transaction():
        raise OpenTransactionRefused(OPEN_TRANSACTION_MESSAGE)
    with transaction.atomic(durable=True):
        yield


# --- validation helpers -----------------------------------------------------------------------


def _json_size(value: Any) -> int:
    return len(canonical_json(value).encode("utf-8"))


def _clean_args(args: Any, *, field: str = "args") -> dict[str, Any]:
    return _clean_args_json(args, field=field)[0]


def _clean_args_json(args: Any, *, field: str = "args") -> tuple[dict[str, Any], str]:
    """The canonical arguments and their canonical JSON, made once for the size limit, the key
    and the row."""
    if not isinstance(args, dict):
        raise InvalidInput(f"{field} must be a JSON object", field=field)
    try:
        cleaned = canonical_args(args)
    except NotCanonicalisable as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from exc
    spelled = canonical_json(cleaned)
    size = len(spelled.encode("utf-8"))
    if size > MAX_ARGS_BYTES:
        raise InvalidInput(
            f"{field} are {size} bytes as canonical JSON; the limit is {MAX_ARGS_BYTES}",
            field=field,
        )
    return cleaned, spelled


def _clean_tool(tool: Any, *, field: str = "tool") -> str:
    if not isinstance(tool, str) or not TOOL_NAME.match(tool):
        raise InvalidInput(
            f"{field} must be a name of 1-100 letters, digits, '_', '.' or '-' starting with a "
            f"letter; got {tool!r}",
            field=field,
        )
    return tool


def _clean_versions(versions: Any) -> dict[str, str]:
    if not isinstance(versions, dict):
        raise InvalidInput(
            "versions must be an object with schema, flow, policy, capability", field="versions"
        )
    cleaned = {}
    for name in VERSION_NAMES:
        value = versions.get(name)
        if not isinstance(value, str) or not value or len(value) > 40:
            raise InvalidInput(
                f"versions.{name} is required: a non-empty string of at most 40 characters",
                field=f"versions.{name}",
            )
        cleaned[name] = value
    unknown = set(versions) - set(VERSION_NAMES)
    if unknown:
        raise InvalidInput(f"versions has unknown keys: {sorted(unknown)}", field="versions")
    return cleaned


def _clean_plan(plan: Any) -> list[dict[str, Any]]:
    if not isinstance(plan, list):
        raise InvalidInput("plan must be a list of planned write steps", field="plan")
    if len(plan) > settings.SEAM_MAX_PLAN_STEPS:
        raise LimitExceeded(
            f"plan has {len(plan)} steps",
            field="plan",
            setting="SEAM_MAX_PLAN_STEPS",
            limit=settings.SEAM_MAX_PLAN_STEPS,
        )
    cleaned = []
    for i, step in enumerate(plan):
        where = f"plan[{i}]"
        if not isinstance(step, dict):
            raise InvalidInput(f"{where} must be an object with tool and args", field=where)
        unknown = set(step) - {"tool", "args", "phase", "detail", "occurrence"}
        if unknown:
            raise InvalidInput(f"{where} has unknown keys: {sorted(unknown)}", field=where)
        item: dict[str, Any] = {
            "tool": _clean_tool(step.get("tool"), field=f"{where}.tool"),
            "args": _clean_args(step.get("args", {}), field=f"{where}.args"),
        }
        for text_field in ("phase", "detail"):
            value = step.get(text_field, "")
            if not isinstance(value, str) or len(value) > 500:
                raise InvalidInput(
                    f"{where}.{text_field} must be a string of at most 500 characters",
                    field=f"{where}.{text_field}",
                )
            if value:
                item[text_field] = value
        occurrence = step.get("occurrence", 0)
        _check_counter(occurrence, field=f"{where}.occurrence")
        if occurrence:
            item["occurrence"] = occurrence
        cleaned.append(item)
    size = _json_size(cleaned)
    if size > MAX_PLAN_BYTES:
        raise InvalidInput(f"plan is {size} bytes; the limit is {MAX_PLAN_BYTES}", field="plan")
    return cleaned


def _check_registered_arguments(tool: str, args: dict[str, Any]) -> None:
    """A registered tool's arguments must satisfy its schema before any intent is recorded. An
    unregistered tool is still journaled — the record matters most when nothing else knows the
    call — but reconciliation cannot ask anyone about it and will hand it to a person."""
    try:
        arguments_check(tool, args)
    except ArgumentsRefused as exc:
        raise InvalidInput(exc.message, field=exc.field) from exc


def _check_counter(value: Any, *, field: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNTER:
        raise InvalidInput(f"{field} must be an integer from 0 to {MAX_COUNTER}", field=field)


def _check_time(value: datetime, *, field: str, horizon: timedelta) -> None:
    """A time an agent gives (a deadline, when the customer was told) must carry a time zone and
    fall between settings.SEAM_EARLIEST_TIME and `horizon` from now: year 9999 is a typo or an
    attack, and would sort every queue and deadline check wrongly."""
    if timezone.is_naive(value):
        raise InvalidInput(f"{field} must carry a time zone", field=field)
    earliest = datetime.fromisoformat(settings.SEAM_EARLIEST_TIME)
    latest = timezone.now() + horizon
    if not earliest <= value <= latest:
        raise InvalidInput(
            f"{field} {value.isoformat()} is outside {earliest:%Y-%m-%d} .. {latest:%Y-%m-%d %H:%M} UTC",
            field=field,
        )


def _clean_text(value: Any, *, field: str, limit: int, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL character (U+0000)", field=field)
    if required and not value.strip():
        raise InvalidInput(f"{field} is required", field=field)
    if len(value) > limit:
        raise InvalidInput(f"{field} is {len(value)} characters; the limit is {limit}", field=field)
    return value


# --- runs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunCreated:
    run: Run
    created: bool


def run_create(
    *,
    tenant: Tenant,
    task_type: str,
    versions: dict[str, str],
    plan: list[dict[str, Any]] | None = None,
    ticket_id: str = "",
    order_id: str = "",
    deadline: datetime | None = None,
    external_id: str = "",
    actor: Actor,
) -> RunCreated:
    """Open a run with its plan and the versions it started under. With an `external_id`, a
    repeated create (a retried request) returns the run created the first time."""
    if not isinstance(task_type, str) or not re.fullmatch(r"[-a-zA-Z0-9_]{1,64}", task_type):
        raise InvalidInput("task_type must be a slug of 1-64 characters", field="task_type")
    clean_versions = _clean_versions(versions)
    clean_plan = _clean_plan(plan or [])
    ticket_id = _clean_text(ticket_id, field="ticket_id", limit=100)
    order_id = _clean_text(order_id, field="order_id", limit=100)
    external_id = _clean_text(external_id, field="external_id", limit=200)
    if deadline is not None:
        _check_time(deadline, field="deadline", horizon=timedelta(days=settings.SEAM_MAX_DEADLINE_DAYS))

    if external_id:
        existing = Run.objects.filter(tenant=tenant, external_id=external_id).first()
        if existing is not None:
            return RunCreated(run=existing, created=False)
    now = timezone.now()
    try:
        with durable():
            run = Run.objects.create(
                tenant=tenant,
                external_id=external_id,
                task_type=task_type,
                ticket_id=ticket_id,
                order_id=order_id,
                deadline=deadline,
                schema_version=clean_versions["schema"],
                flow_version=clean_versions["flow"],
                policy_version=clean_versions["policy"],
                capability_version=clean_versions["capability"],
                plan=clean_plan,
                last_heartbeat_at=now,
            )
            event_record(
                run=run,
                kind=JournalEvent.Kind.RUN_CREATED,
                actor=actor,
                at=now,
                data={"task_type": task_type, "plan_steps": len(clean_plan), "versions": clean_versions},
            )
    except IntegrityError:
        # Two identical creates raced on the external id; the other one won.
        return RunCreated(run=Run.objects.get(tenant=tenant, external_id=external_id), created=False)
    return RunCreated(run=run, created=True)


def run_heartbeat(*, run: Run) -> datetime:
    """The runtime is alive and working this run; reconciliation leaves its open intents alone."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=now)
    run.last_heartbeat_at = now
    return now


def run_complete(*, run: Run, actor: Actor) -> Run:
    """The runtime finished the run. Refused while any intent has no outcome: a run with a call
    in doubt is not complete, whatever the runtime believes."""
    with durable():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status == RunStatus.COMPLETED:
            return locked
        if locked.status != RunStatus.RUNNING:
            raise Conflict(f"run is {locked.status}; only a running run can be completed", field="status")
        open_steps = list(
            locked.intents.filter(status=IntentStatus.INTENDED).values_list("step_id", flat=True)
        )
        if open_steps:
            raise Conflict(
                f"{len(open_steps)} intent(s) have no outcome yet: {', '.join(open_steps)}",
                field="intents",
            )
        # Reconciliation asked and the downstream could not say: a person must decide first.
        unknown_steps = list(
            locked.intents.filter(status=IntentStatus.UNKNOWN).values_list("step_id", flat=True)
        )
        if unknown_steps:
            raise Conflict(
                f"{len(unknown_steps)} intent(s) have an unknown outcome that a person must settle "
                f"first: {', '.join(unknown_steps)}",
                field="intents",
            )
        transitions.run_transition(
            run=locked,
            source=RunStatus.RUNNING,
            target=RunStatus.COMPLETED,
            actor=actor,
            event=JournalEvent.Kind.RUN_COMPLETED,
        )
    return locked


# --- intents and outcomes ---------------------------------------------------------------------


def step_id_for(*, run: Run, turn: int, tool: str, occurrence: int = 0) -> str:
    return step_id_of(str(run.pk), turn, tool, occurrence)


@dataclass(slots=True)
class _IntentDraft:
    """An intent checked and keyed, not yet written: what intent_record and perform both insert."""

    run: Run | None  # None when only the run's key inputs are known (an agent's Caller)
    run_pk: Any
    run_id: str  # str(run_pk), made once
    tool: str
    args: dict[str, Any]
    args_json: str  # canonical_json(args), made once for the size limit, the key and the row
    turn: int
    occurrence: int
    key: str
    step_id: str


def _intent_draft(*, run: Run, tool: Any, args: Any, turn: Any, occurrence: Any) -> _IntentDraft:
    return _draft_of(
        run=run,
        run_pk=run.pk,
        tenant_slug=run.tenant.slug,
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
    tenant_slug: str,
    policy_version: str,
    tool: Any,
    args: Any,
    turn: Any,
    occurrence: Any,
) -> _IntentDraft:
    tool = _clean_tool(tool)
    clean, args_json = _clean_args_json(args)
    _check_counter(turn, field="turn")
    _check_counter(occurrence, field="occurrence")
    _check_registered_arguments(tool, clean)
    run_id = str(run_pk)
    key = idempotency_key_of_json(
        tenant_slug=tenant_slug,
        run_id=run_id,
        tool=tool,
        args_json=args_json,
        policy_version=policy_version,
        occurrence=occurrence,
    )
    return _IntentDraft(
        run=run,
        run_pk=run_pk,
        run_id=run_id,
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
    draft = _intent_draft(run=run, tool=tool, args=args, turn=turn, occurrence=occurrence)
    new_id, intended_at = _intent_write(draft, actor=actor, compensation=compensation)
    if new_id is None:
        existing = _intent_already_recorded(draft, compensation=compensation)
        return IntentRecorded(intent=existing, created=False)
    return IntentRecorded(intent=_intent_loaded(new_id, draft, intended_at=intended_at), created=True)


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
        tenant_slug=caller.tenant_slug,
        policy_version=caller.policy_version,
        tool=tool,
        args=args,
        turn=turn,
        occurrence=occurrence,
    )
    new_id, intended_at = _intent_write(draft, actor=caller.actor, compensation=False, caller=caller)
    return None if new_id is None else _intent_loaded(new_id, draft, intended_at=intended_at)


def _intent_write(
    draft: _IntentDraft, *, actor: Actor, compensation: bool, caller: Caller | None = None
) -> tuple[int | None, datetime]:
    """Insert the draft and its event, committed: (new id, intended_at). The id is None when
    there is no such run, the run admits no intents or the slot is taken
    (_intent_already_recorded says which), or a `caller` is not as asserted."""
    now = timezone.now()
    try:
        new_id = _insert_intent(draft, now=now, actor=actor, any_run_status=compensation, caller=caller)
    except IntegrityError:
        # The step slot is taken; whether by this same intent is decided by the caller.
        new_id = None
    if new_id is not None:
        metrics.intent_recorded()
        logger.debug("intent recorded: %s, key %s", draft.tool, draft.key)
    return new_id, now


def _intent_already_recorded(draft: _IntentDraft, *, compensation: bool) -> Intent:
    """Why a draft was not inserted: the row already holding its key is returned (the same intent
    again); otherwise NotFound (no run), Conflict (the run admits no intents) or StepTaken (its
    step slot holds another intent)."""
    # The key first: a replay (the common case here) needs no more. A key names its run, so a
    # missing run never has one.
    existing = Intent.objects.filter(idempotency_key=draft.key).select_related("run").first()
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
    taken = Intent.objects.filter(run_id=draft.run_pk, step_id=draft.step_id).first()
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


def _intent_loaded(pk: int, draft: _IntentDraft, *, intended_at: datetime, **settled: Any) -> Intent:
    """The row as Django would load it, without a query: the draft just inserted, with `settled`
    columns when its outcome is recorded too.

    Every concrete field is known here, so the instance is filled directly (its __dict__ and a
    ModelState, as Model.from_db leaves them) rather than through Model.__init__, whose generic
    loop over the fields' descriptors cost about 0.1 ms per journaled call on a 2-core machine,
    where the process resumes with cold caches after each commit (bench: about 7 % of a call).
    Model.__init__ also sends pre_init and post_init; should anything listen to them for
    Intent, this falls back to from_db so that they are sent.
    tests/handover/test_services_journal.py compares the result with the stored row."""
    values = {
        **_NEW_INTENT_COLUMNS,
        "receipt": {},
        "id": pk,
        "run_id": draft.run_pk,
        "step_id": draft.step_id,
        "turn": draft.turn,
        "tool": draft.tool,
        "args": draft.args,
        "occurrence": draft.occurrence,
        "idempotency_key": draft.key,
        "intended_at": intended_at,
        **settled,
    }
    return _intent_of_columns(values, draft.run)


def _intent_of_columns(values: dict[str, Any], run: Run | None) -> Intent:
    """An Intent as Django would load it from every column's value (_intent_loaded says why not
    through Model.__init__), with its run cached when known."""
    if pre_init.has_listeners(Intent) or post_init.has_listeners(Intent):
        names = _intent_attnames()
        intent = Intent.from_db(DEFAULT_DB_ALIAS, names, [values[name] for name in names])
        if run is not None:
            _INTENT_RUN_FIELD.set_cached_value(intent, run)
        return intent
    state = ModelState()
    state.adding = False
    state.db = DEFAULT_DB_ALIAS
    if run is not None:  # else intent.run is read when asked for, as for any loaded row
        state.fields_cache = {_INTENT_RUN_FIELD.cache_name: run}
    intent = Intent.__new__(Intent)
    values["_state"] = state
    intent.__dict__.update(values)
    return intent


# What journal_sql.INSERT_INTENT and Intent.objects.create store in an intent's other columns.
_NEW_INTENT_COLUMNS: dict[str, Any] = {
    "status": IntentStatus.INTENDED,
    "error_class": "",
    "outcome_summary": "",
    "request_id": "",
    "settled_at": None,
    "lookup_attempts": 0,
    "last_lookup_error": "",
    "next_lookup_at": None,
    "unknown_reason": "",
}
_INTENT_RUN_FIELD = Intent._meta.get_field("run")


@functools.cache
def _intent_attnames() -> tuple[str, ...]:
    return tuple(field.attname for field in Intent._meta.concrete_fields)


def _intent_event_data(draft: _IntentDraft, *, compensation: bool) -> dict[str, Any]:
    """The intent_recorded event's data; journal_sql.INSERT_INTENT builds the same in SQL."""
    data: dict[str, Any] = {"step_id": draft.step_id, "tool": draft.tool, "idempotency_key": draft.key}
    if compensation:
        data["compensation"] = True
    return data


def _insert_intent(
    draft: _IntentDraft, *, now: datetime, actor: Actor, any_run_status: bool, caller: Caller | None = None
) -> int | None:
    """Insert the intent row and its event, committed together, unless there is no such run, the
    run admits no intents or the key is already recorded. Returns the new intent's id or None;
    raises IntegrityError when the step slot holds another intent. `any_run_status` is set for
    compensations, which are admitted on a run in any state (and say so in their event). With a
    `caller` the statement also asserts it. One statement (journal_sql.INSERT_INTENT) checks the
    run, inserts the row and its event."""
    db = connections[DEFAULT_DB_ALIAS]
    _refuse_open_transaction(db)
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
        )
        return journal_sql.insert_intent(db, params, as_caller=caller is not None)


@dataclass(frozen=True)
class OutcomeRecorded:
    intent: Intent
    changed: bool


@dataclass(slots=True)
class _OutcomeDraft:
    """An outcome checked, not yet written."""

    status: str
    error_class: str
    summary: str
    receipt: dict[str, Any]
    receipt_json: str
    request_id: str
    # An already_so send's evidence (the event's, never the row's): when the downstream's state
    # came about, and the record it answered with.
    evidence_at: datetime | None = None
    record: dict[str, Any] | None = None

    def columns_written(self, now: datetime) -> tuple[Any, ...]:
        """What the single-statement settles write (journal_sql.settled_columns)."""
        return journal_sql.settled_columns(
            status=self.status,
            error_class=self.error_class,
            summary=self.summary,
            receipt_json=self.receipt_json,
            request_id=self.request_id,
            now=now,
        )

    def as_columns(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "error_class": self.error_class,
            "outcome_summary": self.summary,
            "receipt": self.receipt,
        }

    @property
    def is_evidence(self) -> bool:
        """An ambiguous failure: the tool answered with an error whose effect is unknown. It
        leaves the row open and is kept as evidence (_evidence_write), not settled."""
        return self.status == IntentStatus.INTENDED

    def evidence(self) -> tuple[Any, ...]:
        """What journal_sql's NOTE_EVIDENCE statements write (choices as plain str)."""
        return (str(self.error_class), self.summary, self.receipt_json, self.request_id)


def _clean_evidence_at(evidence_at: Any, *, ok: bool) -> datetime | None:
    if evidence_at is None:
        return None
    if not isinstance(evidence_at, datetime) or timezone.is_naive(evidence_at):
        raise InvalidInput(
            "evidence_at must be a time with its zone (ISO 8601, e.g. 2026-11-29T10:00:00Z)",
            field="evidence_at",
        )
    if not ok:
        raise InvalidInput("evidence_at is only for a success (ok=true)", field="evidence_at")
    return evidence_at


def _already_so_draft(draft: _OutcomeDraft, *, evidence_at: datetime, intended_at: datetime) -> _OutcomeDraft:
    """A success whose evidence predates the intent, as the row records it: `already_so`, not the
    run's work. The downstream's record goes to the event as evidence, never onto the row, where
    an undo would read it (as reconciliation's already_so)."""
    said = f": {draft.summary}" if draft.summary else ""
    return _OutcomeDraft(
        status=IntentStatus.ALREADY_SO,
        error_class="",
        summary=(
            f"already so before the intent: the downstream's answer dates from {evidence_at.isoformat()}, "
            f"the intent from {intended_at.isoformat()}; not this run's work{said}"
        ),
        receipt={},
        receipt_json="{}",
        request_id=draft.request_id,
        evidence_at=evidence_at,
        record=draft.receipt,
    )


def _outcome_draft(
    *,
    ok: Any,
    summary: Any,
    receipt: Any,
    error_class: Any,
    request_id: Any,
    evidence_at: Any = None,
    intended_at: datetime | None = None,
) -> _OutcomeDraft:
    """The outcome checked. A success with `evidence_at` older than `intended_at` (the intent's
    time; tool_errors.predates_intent) is `already_so`."""
    if not isinstance(ok, bool):
        raise InvalidInput("ok must be true or false", field="ok")
    summary = _clean_text(summary, field="summary", limit=MAX_SUMMARY_CHARS)
    request_id = _clean_text(request_id, field="request_id", limit=200)
    if not receipt:
        receipt, receipt_json = {}, "{}"
    elif not isinstance(receipt, dict):
        raise InvalidInput("receipt must be a JSON object", field="receipt")
    else:
        try:
            receipt = canonical_args(receipt)
        except NotCanonicalisable as exc:
            raise InvalidInput(f"receipt: {exc}", field="receipt") from exc
        receipt_json = canonical_json(receipt)
        if len(receipt_json.encode("utf-8")) > MAX_RECEIPT_BYTES:
            raise InvalidInput(f"receipt is over {MAX_RECEIPT_BYTES} bytes", field="receipt")
    error_class = error_class or ""
    if ok and error_class:
        raise InvalidInput("error_class is only for failed calls (ok=false)", field="error_class")
    if not ok and error_class not in ErrorClass.values:
        raise InvalidInput(
            f"error_class must be one of {', '.join(ErrorClass.values)} when ok is false",
            field="error_class",
        )
    if ok:
        status = IntentStatus.PERFORMED
    elif error_class == ErrorClass.AMBIGUOUS:
        # The tool answered with an error, and it may have acted all the same: evidence for
        # whoever settles the row (reconciliation's lookup, else a person), not an outcome.
        status = IntentStatus.INTENDED
    else:
        status = IntentStatus.FAILED
    evidence_at = _clean_evidence_at(evidence_at, ok=ok)
    draft = _OutcomeDraft(
        status=status,
        error_class=error_class,
        summary=summary,
        receipt=receipt,
        receipt_json=receipt_json,
        request_id=request_id,
    )
    if intended_at is not None and predates_intent(evidence_at, intended_at):
        assert evidence_at is not None  # predates_intent says so
        return _already_so_draft(draft, evidence_at=evidence_at, intended_at=intended_at)
    return draft


@journal_log_context
def outcome_record(
    *,
    intent: Intent,
    ok: bool,
    summary: str = "",
    receipt: dict[str, Any] | None = None,
    error_class: str = "",
    request_id: str = "",
    evidence_at: datetime | None = None,
    actor: Actor,
) -> OutcomeRecorded:
    """Settle an intent with what the call did. Recording the same outcome again is harmless
    (a lost acknowledgement is retried); a different outcome for a settled row is a conflict.

    A success whose `evidence_at` (when the downstream says its state came about) is older than
    the intent settles the row `already_so`: the state was there before the call, so it is not
    the run's work, never undone and never sent again.

    An ambiguous failure (ok=false, error_class=ambiguous: the tool answered with an error and
    may have acted) settles nothing: the row stays `intended` with the error's class and text
    and a dispatch_ambiguous event, for reconciliation or a person to settle. Reporting it again
    is harmless; a later real outcome settles the row as usual."""
    draft = _outcome_draft(
        ok=ok,
        summary=summary,
        receipt=receipt,
        error_class=error_class,
        request_id=request_id,
        evidence_at=evidence_at,
        intended_at=intent.intended_at,
    )
    if draft.is_evidence:
        return _evidence_record(intent, draft, actor=actor)
    now = _outcome_write(intent.pk, intent.run_id, draft, actor=actor)
    if now is not None:
        settled = copy.copy(intent)
        for name, value in draft.as_columns().items():
            setattr(settled, name, value)
        settled.request_id = draft.request_id
        settled.settled_at = now
        return OutcomeRecorded(intent=settled, changed=True)
    return OutcomeRecorded(intent=_outcome_already_recorded(intent.pk, draft), changed=False)


@journal_log_context
def outcome_record_as_caller(
    *,
    caller: Caller,
    step_id: str,
    ok: Any,
    summary: Any = "",
    receipt: Any = None,
    error_class: Any = "",
    request_id: Any = "",
    evidence_at: Any = None,
) -> Intent | None:
    """outcome_record for an agent whose token and run an earlier request found (a Caller), the
    step named as the request names it, in one statement that asserts the caller. The settled
    intent; or None when nothing was written (the caller is no longer so, there is no such
    step, or it is not open), and the call is then answered by outcome_record after reading the
    token, the run and the step, which says why. Always None for an outcome with `evidence_at`,
    which is held to the intent's time, which the statement does not read. The outcome is
    checked as outcome_record checks it."""
    db = connections[DEFAULT_DB_ALIAS]
    if evidence_at is not None:
        return None
    draft = _outcome_draft(
        ok=ok, summary=summary, receipt=receipt, error_class=error_class, request_id=request_id
    )
    _refuse_open_transaction(db)
    now = timezone.now()
    if draft.is_evidence:
        noted = journal_sql.note_step_evidence_as_caller(
            db, caller=caller, step_id=step_id, evidence=draft.evidence(), now=now
        )
        if noted is None:
            return None
        _evidence_logged(draft)
        values = {
            **_NEW_INTENT_COLUMNS,
            **noted,
            "run_id": caller.run_pk,
            "step_id": step_id,
            **draft.as_columns(),
            "request_id": draft.request_id,
        }
        return _intent_of_columns(values, None)
    row = journal_sql.settle_step_as_caller(
        db,
        caller=caller,
        step_id=step_id,
        source=transitions.outcome_source(target=draft.status),
        settled=draft.columns_written(now),
    )
    if row is None:
        return None
    metrics.intent_settled(draft.status)
    values = {
        **_NEW_INTENT_COLUMNS,
        **row,
        "run_id": caller.run_pk,
        "step_id": step_id,
        **draft.as_columns(),
        "request_id": draft.request_id,
        "settled_at": now,
    }
    return _intent_of_columns(values, None)


def _outcome_write(intent_pk: int, run_id: Any, draft: _OutcomeDraft, *, actor: Actor) -> datetime | None:
    """Compare-and-swap: only an open row is settled, so two racing settlements (a retried
    acknowledgement, a worker and the runtime) produce one transition. The settled_at written,
    or None if the row was not open."""
    now = timezone.now()
    if not _settle_intent(intent_pk, run_id, draft, now=now, actor=actor):
        return None
    metrics.intent_settled(draft.status)
    logger.debug(
        "outcome recorded: %s%s", draft.status, f" ({draft.error_class})" if draft.error_class else ""
    )
    return now


def _evidence_record(intent: Intent, draft: _OutcomeDraft, *, actor: Actor) -> OutcomeRecorded:
    """outcome_record for an ambiguous failure: the evidence kept on the open row, or, when
    nothing was written (the row holds this evidence already, or was settled meanwhile), the row
    as it stands: a settlement outranks evidence, so a late or repeated report is no conflict."""
    if _evidence_write(intent.pk, draft, actor=actor):
        noted = copy.copy(intent)
        for name, value in draft.as_columns().items():
            setattr(noted, name, value)
        noted.request_id = draft.request_id
        return OutcomeRecorded(intent=noted, changed=True)
    return OutcomeRecorded(intent=Intent.objects.select_related("run").get(pk=intent.pk), changed=False)


def _evidence_event_data(draft: _OutcomeDraft) -> dict[str, Any]:
    """The dispatch_ambiguous event of an agent's report; journal_sql.NOTE_EVIDENCE builds the
    same in SQL. `answered`: the tool answered with an error (the engine's own events of this
    kind are a call that got no answer)."""
    return {
        "error_class": draft.error_class,
        "message": draft.summary,
        "request_id": draft.request_id,
        "answered": True,
    }


def _evidence_logged(draft: _OutcomeDraft) -> None:
    logger.warning(
        "the tool answered with an error (%s) and may have acted: the intent stays open", draft.error_class
    )


def _evidence_write(intent_pk: int, draft: _OutcomeDraft, *, actor: Actor) -> bool:
    """Keep an ambiguous failure's evidence on the open row, with its event: True when written;
    False when the row is not open or holds this evidence already (nothing is written)."""
    db = connections[DEFAULT_DB_ALIAS]
    _refuse_open_transaction(db)
    now = timezone.now()
    written = journal_sql.note_evidence(
        db,
        intent_id=intent_pk,
        evidence=draft.evidence(),
        actor_kind=actor.kind,
        actor_name=actor.name,
        user_id=actor.user_id,
        now=now,
    )
    if written:
        _evidence_logged(draft)
    return written


def _outcome_already_recorded(intent_pk: int, draft: _OutcomeDraft) -> Intent:
    """The row someone else settled: returned if it holds this same outcome, else Conflict."""
    fresh = Intent.objects.select_related("run").get(pk=intent_pk)
    if _outcome_fields(fresh) != draft.as_columns():
        raise Conflict(
            f"intent {fresh.step_id} is already settled as {fresh.status}"
            f"{' (' + fresh.error_class + ')' if fresh.error_class else ''} with a different outcome",
            field="ok",
        )
    return fresh


def _outcome_fields(intent: Intent) -> dict[str, Any]:
    return {
        "status": intent.status,
        "error_class": intent.error_class,
        "outcome_summary": intent.outcome_summary,
        "receipt": intent.receipt,
    }


def _settle_intent(intent_pk: int, run_id: Any, draft: _OutcomeDraft, *, now: datetime, actor: Actor) -> bool:
    db = connections[DEFAULT_DB_ALIAS]
    _refuse_open_transaction(db)
    # The transitions table decides which status an outcome moves the row from (a set lookup).
    source = transitions.outcome_source(target=draft.status)
    # already_so keeps its evidence in the event, which the single statement does not write;
    # rare, so it takes the ORM's transaction.
    if draft.status != IntentStatus.ALREADY_SO:
        params = journal_sql.settle_intent_params(
            intent_id=intent_pk,
            source=source,
            settled=draft.columns_written(now),
            actor_kind=actor.kind,
            actor_name=actor.name,
            user_id=actor.user_id,
        )
        return journal_sql.settle_intent(db, params)
    columns = draft.as_columns()
    del columns["status"]  # the transition's to write
    with durable():
        settled = transitions.intent_transition(
            # Only the ids are read: like the SQL path, this one holds ids, not the row.
            intent=Intent(pk=intent_pk, run_id=run_id),
            source=source,
            target=draft.status,
            actor=actor,
            event=JournalEvent.Kind.OUTCOME_RECORDED,
            # journal_sql.SETTLE_INTENT builds the same in SQL.
            data=_outcome_event_data(draft),
            changes={"request_id": draft.request_id, "settled_at": now, **columns},
            at=now,
        )
    return settled.moved


def _outcome_event_data(draft: _OutcomeDraft) -> dict[str, Any]:
    data: dict[str, Any] = {
        "status": draft.status,
        "error_class": draft.error_class,
        "receipt": draft.receipt,
    }
    if draft.evidence_at is not None and draft.status == IntentStatus.ALREADY_SO:
        # As reconciliation's already_so event: when, and the record the downstream answered with.
        data["evidence"] = {"at": draft.evidence_at.isoformat(), "record": draft.record or {}, "detail": ""}
    return data


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


COUNTERS = {"retry": "retries", "repair": "repairs", "replan": "replans", "reflection": "reflections"}


def run_count(*, run: Run, kind: str, actor: Actor) -> Run:
    """Count one retry, repair, replan or reflection of the run, each kind apart from the others."""
    column = COUNTERS.get(kind)
    if column is None:
        raise InvalidInput(f"kind must be one of {', '.join(COUNTERS)}", field="kind")
    with durable():
        Run.objects.filter(pk=run.pk).update(**{column: F(column) + 1})
        event_record(
            run=run, kind=JournalEvent.Kind.COUNTED, actor=actor, at=timezone.now(), data={"kind": kind}
        )
    return Run.objects.select_related("tenant").get(pk=run.pk)


@dataclass(frozen=True)
class Cancelled:
    run: Run
    completed: list[Intent]
    uncertain: list[Intent]
    cleanup_scheduled: list[str]


def run_cancel(*, run: Run, reason: str, actor: Actor) -> Cancelled:
    """Stop admitting new steps. The run row is locked against the intent insert's share lock,
    so no intent is admitted after this commits. Nothing is undone: what completed stands. A
    call already in flight stays `intended` and is reconciled once it has been quiet for the
    stale threshold (cleanup_scheduled says so, with its key); one whose outcome is, or turns
    out, unknown hands the run to a person, since no agent and no dead-run decision will come
    back to it (cancelled_in_doubt_hand_over). Cancelling twice returns the same answer."""
    reason = _clean_text(reason, field="reason", limit=MAX_SUMMARY_CHARS, required=True)
    now = timezone.now()
    with durable():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        cancelling = locked.status == RunStatus.RUNNING
        if cancelling:
            transitions.run_transition(
                run=locked,
                source=RunStatus.RUNNING,
                target=RunStatus.CANCELLED,
                actor=actor,
                event=JournalEvent.Kind.RUN_CANCELLED,
                data={"reason": reason},
                changes={"outcome_detail": reason, "ended_at": now},
                at=now,
            )
        elif locked.status != RunStatus.CANCELLED:
            raise Conflict(f"run is {locked.status}; only a running run can be cancelled", field="status")
        intents = list(locked.intents.order_by("intended_at", "id"))
        unknown = [i for i in intents if i.status == IntentStatus.UNKNOWN]
        # Only on the cancel itself: a repeat must not reopen what a person has since resolved.
        if cancelling and cancelled_in_doubt_hand_over(run=locked, unknown=unknown, actor=actor, at=now):
            locked.refresh_from_db()
    uncertain = [i for i in intents if i.status in (IntentStatus.INTENDED, IntentStatus.UNKNOWN)]
    return Cancelled(
        run=locked,
        completed=[i for i in intents if i.status == IntentStatus.PERFORMED],
        uncertain=uncertain,
        cleanup_scheduled=[_cleanup_of(intent) for intent in uncertain],
    )


def _cleanup_of(intent: Intent) -> str:
    """What will become of a cancelled run's call in doubt, in words, with the key to ask about."""
    if intent.status == IntentStatus.UNKNOWN:
        return f"settle {intent.tool} (step {intent.step_id}): its outcome is unknown; a person decides"
    quiet = int(stale_after(intent.tool).total_seconds())
    return (
        f"reconcile {intent.tool} (step {intent.step_id}): once the call has been quiet for {quiet} s, "
        f"reconciliation asks the downstream about key {intent.idempotency_key}; "
        "if it cannot say, the run goes to a person"
    )


def unknown_outcome_detail(unknown: list[Intent]) -> str:
    """An unknown-outcome escalation's detail: each call in doubt, its key, and why."""
    return "; ".join(f"{i.tool} (key {i.idempotency_key}): {i.unknown_reason}" for i in unknown)


def cancelled_in_doubt_hand_over(
    *, run: Run, unknown: list[Intent], actor: Actor, at: datetime
) -> Escalation | None:
    """A cancelled run has no agent left to settle its calls and no dead-run decision to come, so
    a call of it whose outcome is unknown would wait for nobody: the run, still cancelled, goes to
    a person. Inside the caller's transaction, with `run` read under its row lock; nothing when
    the run is not cancelled, a person already has it, or nothing is unknown."""
    if run.status != RunStatus.CANCELLED or run.awaiting_person or not unknown:
        return None
    return run_hand_over(
        run=run,
        reason=OutcomeReason.UNKNOWN_OUTCOME,
        detail=unknown_outcome_detail(unknown),
        actor=actor,
        status=RunStatus.CANCELLED,
        from_statuses=(RunStatus.CANCELLED,),
        at=at,
    )


def escalations_resolve(*, run: Run, by: Any, note: str, at: datetime) -> int:
    """Close the run's open escalations (run_hand_over opened them): a person finished the job
    or resumed the run, and `note` says how. The number closed; 0 when none was open."""
    return Escalation.objects.filter(run=run, resolved_at__isnull=True).update(
        resolved_at=at, resolved_by=by, resolution_note=note
    )


def run_hand_over(
    *,
    run: Run,
    reason: str,
    detail: str,
    actor: Actor,
    status: str = RunStatus.ESCALATED,
    from_statuses: tuple[str, ...] = (RunStatus.RUNNING,),
    at: datetime | None = None,
    event_data: dict[str, Any] | None = None,
) -> Escalation | None:
    """Hand a run to a person, inside the caller's transaction: the run ends with `status`
    (escalated, or compensated when everything was undone) and the reason, joins the queue
    (awaiting_person), gets an open Escalation (whose notifications go out after commit) and
    its journal event. None, changing nothing, when the run is not in one of `from_statuses`
    (it already ended, or was cancelled)."""
    if not connection.in_atomic_block:
        raise RuntimeError("run_hand_over must run inside the transaction that decided it")
    now = at or timezone.now()
    handed = transitions.run_transition(
        run=run,
        source=from_statuses,
        target=status,
        actor=actor,
        event=JournalEvent.Kind.RUN_COMPENSATED
        if status == RunStatus.COMPENSATED
        else JournalEvent.Kind.RUN_ESCALATED,
        data={"reason": reason, "detail": detail, **(event_data or {})},
        changes={
            "outcome_reason": reason,
            "outcome_detail": detail,
            "ended_at": now,
            "escalations": F("escalations") + 1,
            "awaiting_person": True,
        },
        at=now,
    )
    if not handed.moved:
        return None
    escalation = Escalation.objects.create(run=run, reason=reason, detail=detail, created_at=now)
    escalation_opened.send(sender=Escalation, escalation=escalation)
    return escalation


@journal_log_context
def dispatch_ambiguous_record(*, intent: Intent, error_class: str, message: str, actor: Actor) -> None:
    """The call may or may not have reached the downstream (a timeout after sending, a crash in
    the tool). The row stays `intended`; the event keeps the evidence for whoever settles it."""
    logger.warning("dispatch outcome unknown (%s): the intent stays open for reconciliation", error_class)
    with durable():
        event_record(
            run=intent.run,
            intent=intent,
            kind=JournalEvent.Kind.DISPATCH_AMBIGUOUS,
            actor=actor,
            at=timezone.now(),
            data={"error_class": error_class, "message": message[:MAX_SUMMARY_CHARS]},
        )


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
    draft = _intent_draft(run=run, tool=tool, args=args, turn=turn, occurrence=occurrence)
    token = bind_log_context(run_id=draft.run_id, step_id=draft.step_id)
    try:
        return _perform(draft, dispatch=dispatch, actor=actor, compensation=compensation)
    finally:
        unbind_log_context(token)


def _perform(draft: _IntentDraft, *, dispatch: Dispatch, actor: Actor, compensation: bool) -> Performed:
    try:
        new_id, intended_at = _intent_write(draft, actor=actor, compensation=compensation)
        if new_id is None:
            existing = _intent_already_recorded(draft, compensation=compensation)
    except CONNECTION_ERRORS as exc:
        _drop_broken_connection()
        raise JournalUnavailable(
            f"the intent for {draft.tool} could not be recorded: the journal's database did not "
            f"confirm it ({str(exc).strip() or type(exc).__name__}), so the call was not made"
        ) from exc
    if new_id is None:
        if existing.is_settled:
            return Performed(intent=existing, replayed=True)
        raise IntentInDoubt(existing)

    def recorded() -> Intent:
        return _intent_loaded(new_id, draft, intended_at=intended_at)

    # From here on the call has left (or may have): a lost database is OutcomeNotRecorded, so
    # the caller learns that the call was made, not only that something failed.
    try:
        try:
            result = dispatch(draft.args, draft.key)
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
        outcome = _outcome_draft(
            ok=True,
            summary=result.summary,
            receipt=result.receipt,
            error_class="",
            request_id=result.request_id,
            # A success for a state older than the intent is already_so (predates_intent).
            evidence_at=result.evidence_at,
            intended_at=intended_at,
        )
        settled_at = _outcome_write(new_id, draft.run_pk, outcome, actor=actor)
        if settled_at is None:  # settled meanwhile by someone else (reconciliation, a person)
            return Performed(intent=_outcome_already_recorded(new_id, outcome), replayed=False)
    except CONNECTION_ERRORS as exc:
        _drop_broken_connection()
        raise OutcomeNotRecorded(recorded(), exc) from exc
    settled = _intent_loaded(
        new_id,
        draft,
        intended_at=intended_at,
        request_id=outcome.request_id,
        settled_at=settled_at,
        **outcome.as_columns(),
    )
    return Performed(intent=settled, replayed=False)


# --- what the customer was told ---------------------------------------------------------------


@dataclass(frozen=True)
class MessageInput:
    channel: str
    body: str


def customer_message_validate(*, channel: Any, body: Any) -> MessageInput:
    if channel not in CustomerMessage.Channel.values:
        raise InvalidInput(
            f"channel must be one of {', '.join(CustomerMessage.Channel.values)}", field="channel"
        )
    return MessageInput(
        channel=channel, body=_clean_text(body, field="body", limit=MAX_MESSAGE_CHARS, required=True)
    )


def customer_message_about(*, run: Run, about_steps: Any) -> list[str]:
    """The step ids a message reports, each one a step of this run (InvalidInput otherwise): a
    message can only be linked to steps that exist, so a flag on it is never a guess."""
    if about_steps is None:
        return []
    if not isinstance(about_steps, list) or not all(isinstance(s, str) for s in about_steps):
        raise InvalidInput("about_steps must be a list of step ids", field="about_steps")
    wanted = list(dict.fromkeys(about_steps))
    known = set(Intent.objects.filter(run=run, step_id__in=wanted).values_list("step_id", flat=True))
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise InvalidInput(f"about_steps: no step {unknown[0]!r} in this run", field="about_steps")
    return wanted


def customer_message_insert(
    *,
    run: Run,
    channel: str,
    body: str,
    actor: Actor,
    told_at: datetime | None = None,
    about_steps: list[str] | None = None,
) -> CustomerMessage:
    """The message row and its journal event, inside the caller's transaction."""
    message = CustomerMessage.objects.create(
        run=run,
        channel=channel,
        body=body,
        told_at=told_at or timezone.now(),
        about_steps=customer_message_about(run=run, about_steps=about_steps),
    )
    event_record(
        run=run,
        kind=JournalEvent.Kind.CUSTOMER_TOLD,
        actor=actor,
        at=timezone.now(),
        data={"channel": channel, "message_id": message.pk},
    )
    return message


def customer_message_record(
    *,
    run: Run,
    channel: str,
    body: str,
    told_at: datetime | None = None,
    about_steps: list[str] | None = None,
    actor: Actor,
) -> CustomerMessage:
    """Record what the customer has been told, so the next person's message stays consistent;
    `about_steps` names the run's steps whose effects the message reports."""
    message = customer_message_validate(channel=channel, body=body)
    told_at = told_at or timezone.now()
    # A few minutes ahead is a clock's skew; more is not when anyone was told.
    _check_time(told_at, field="told_at", horizon=timedelta(minutes=10))
    with durable():
        return customer_message_insert(
            run=run,
            channel=message.channel,
            body=message.body,
            actor=actor,
            told_at=told_at,
            about_steps=about_steps,
        )
