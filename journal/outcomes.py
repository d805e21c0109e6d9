"""The outcome: what the call did, settled on its open intent by a compare-and-swap with its
event (journal.sql.SETTLE_INTENT, or the ORM's transaction for `already_so`). Recording the same
outcome again is harmless; a different one on a settled row is a conflict. An error whose
effect is unknown settles nothing: it is kept on the open row as evidence for reconciliation."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import (
    DEFAULT_DB_ALIAS,
    connections,
)
from django.utils import timezone

from observability import counters as metrics

from . import attempts, intent_columns, transitions
from . import sql as journal_sql
from .durability import durable, refuse_open_transaction
from .errors import Conflict, InvalidInput
from .events import Actor, Caller, event_record
from .keys import NotCanonicalisable, canonical_args, canonical_json
from .log_context import journal_log_context
from .models import (
    ErrorClass,
    Intent,
    IntentStatus,
    JournalEvent,
)
from .orm_rows import intent_of_columns
from .tool_errors import predates_intent
from .validation import MAX_RECEIPT_BYTES, MAX_SUMMARY_CHARS, clean_text
from .why import CallVerdict, why

# One DEBUG line per intent and per outcome (with run_id and step_id from the log context);
# an ambiguous dispatch is a WARNING.
logger = logging.getLogger("seam.journal")


@dataclass(frozen=True)
class OutcomeRecorded:
    intent: Intent
    changed: bool


@dataclass(slots=True)
class OutcomeDraft:
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
    # What settled the row when the outcome is not simply the tool's answer (journal.why); only
    # an already_so send has one, written by the ORM route that already_so takes.
    verdict: dict[str, Any] | None = None

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
        columns = {
            "status": self.status,
            "error_class": self.error_class,
            "outcome_summary": self.summary,
            "receipt": self.receipt,
        }
        if self.verdict:
            columns["verdict"] = self.verdict
        return columns

    @property
    def is_evidence(self) -> bool:
        """An ambiguous failure: the tool answered with an error whose effect is unknown. It
        leaves the row open and is kept as evidence (_evidence_write), not settled."""
        return self.status == IntentStatus.INTENDED

    def evidence(self) -> tuple[Any, ...]:
        """What journal_sql's NOTE_EVIDENCE statements write (journal_sql.evidence_columns)."""
        return journal_sql.evidence_columns(
            error_class=self.error_class,
            summary=self.summary,
            receipt_json=self.receipt_json,
            request_id=self.request_id,
        )


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


def _already_so_draft(draft: OutcomeDraft, *, evidence_at: datetime, intended_at: datetime) -> OutcomeDraft:
    """A success whose evidence predates the intent, as the row records it: `already_so`, not the
    run's work. The downstream's record goes to the event as evidence, never onto the row, where
    an undo would read it (as reconciliation's already_so)."""
    return OutcomeDraft(
        status=IntentStatus.ALREADY_SO,
        error_class="",
        summary=draft.summary,
        verdict=why(
            CallVerdict.ANSWER_PREDATES_INTENT,
            at=evidence_at.isoformat(),
            intended_at=intended_at.isoformat(),
        ).as_json(),
        receipt={},
        receipt_json="{}",
        request_id=draft.request_id,
        evidence_at=evidence_at,
        record=draft.receipt,
    )


def _clean_receipt(receipt: Any) -> tuple[dict[str, Any], str]:
    """The receipt as stored, with its canonical JSON: a JSON object within MAX_RECEIPT_BYTES."""
    if not receipt:
        return {}, "{}"
    if not isinstance(receipt, dict):
        raise InvalidInput("receipt must be a JSON object", field="receipt")
    try:
        receipt = canonical_args(receipt)
    except NotCanonicalisable as exc:
        raise InvalidInput(f"receipt: {exc}", field="receipt") from exc
    receipt_json = canonical_json(receipt)
    if len(receipt_json.encode("utf-8")) > MAX_RECEIPT_BYTES:
        raise InvalidInput(f"receipt is over {MAX_RECEIPT_BYTES} bytes", field="receipt")
    return receipt, receipt_json


def _clean_error_class(error_class: Any, *, ok: bool) -> str:
    error_class = error_class or ""
    if ok and error_class:
        raise InvalidInput("error_class is only for failed calls (ok=false)", field="error_class")
    if not ok and error_class not in ErrorClass.values:
        raise InvalidInput(
            f"error_class must be one of {', '.join(ErrorClass.values)} when ok is false",
            field="error_class",
        )
    return str(error_class)


def _status_of(*, ok: bool, error_class: str) -> str:
    if ok:
        return IntentStatus.PERFORMED
    if error_class == ErrorClass.AMBIGUOUS:
        # The tool answered with an error, and it may have acted all the same: evidence for
        # whoever settles the row (reconciliation's lookup, else a person), not an outcome.
        return IntentStatus.INTENDED
    return IntentStatus.FAILED


def outcome_draft(
    *,
    ok: Any,
    summary: Any,
    receipt: Any,
    error_class: Any,
    request_id: Any,
    evidence_at: Any = None,
    intended_at: datetime | None = None,
) -> OutcomeDraft:
    """The outcome checked. A success with `evidence_at` older than `intended_at` (the intent's
    time; tool_errors.predates_intent) is `already_so`."""
    if not isinstance(ok, bool):
        raise InvalidInput("ok must be true or false", field="ok")
    summary = clean_text(summary, field="summary", limit=MAX_SUMMARY_CHARS)
    request_id = clean_text(request_id, field="request_id", limit=200)
    receipt, receipt_json = _clean_receipt(receipt)
    error_class = _clean_error_class(error_class, ok=ok)
    status = _status_of(ok=ok, error_class=error_class)
    evidence_at = _clean_evidence_at(evidence_at, ok=ok)
    draft = OutcomeDraft(
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
    draft = outcome_draft(
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
    now = outcome_write(intent.pk, intent.run_id, draft, run_created_at=intent.run_created_at, actor=actor)
    if now is not None and draft.error_class == ErrorClass.BUG:
        attempts.stop_on_bug(intent=intent, message=draft.summary, actor=actor)
    if now is not None:
        settled = copy.copy(intent)
        for name, value in draft.as_columns().items():
            setattr(settled, name, value)
        settled.request_id = draft.request_id
        settled.settled_at = now
        return OutcomeRecorded(intent=settled, changed=True)
    return OutcomeRecorded(intent=outcome_already_recorded(intent.pk, draft), changed=False)


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
    draft = outcome_draft(
        ok=ok, summary=summary, receipt=receipt, error_class=error_class, request_id=request_id
    )
    if draft.error_class == ErrorClass.BUG:
        return None  # the run stops (outcome_record): rare, so the long way
    refuse_open_transaction(db)
    now = timezone.now()
    if draft.is_evidence:
        noted = journal_sql.note_step_evidence_as_caller(
            db, caller=caller, step_id=step_id, evidence=draft.evidence(), now=now
        )
        if noted is None:
            return None
        _evidence_logged(draft)
        return _caller_step(noted, caller=caller, step_id=step_id, draft=draft)
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
    return _caller_step(row, caller=caller, step_id=step_id, draft=draft, settled_at=now)


def _caller_step(
    answered: dict[str, Any],
    *,
    caller: Caller,
    step_id: str,
    draft: OutcomeDraft,
    settled_at: datetime | None = None,
) -> Intent:
    """The step a caller's statement wrote, from the columns it answered (the rest are those the
    request named and the statement wrote), built as Django would load it."""
    values = {
        **intent_columns.NEW_ROW,
        **answered,
        "run_id": caller.run_pk,
        "run_created_at": caller.run_created_at,
        "step_id": step_id,
        **draft.as_columns(),
        "request_id": draft.request_id,
        "settled_at": settled_at,
    }
    return intent_of_columns(values, None)


def outcome_write(
    intent_pk: int, run_id: Any, draft: OutcomeDraft, *, run_created_at: datetime, actor: Actor
) -> datetime | None:
    """Compare-and-swap: only an open row is settled, so two racing settlements (a retried
    acknowledgement, a worker and the runtime) produce one transition. The settled_at written,
    or None if the row was not open."""
    now = timezone.now()
    if not _settle_intent(intent_pk, run_id, draft, run_created_at=run_created_at, now=now, actor=actor):
        return None
    metrics.intent_settled(draft.status)
    logger.debug(
        "outcome recorded: %s%s", draft.status, f" ({draft.error_class})" if draft.error_class else ""
    )
    return now


def _evidence_record(intent: Intent, draft: OutcomeDraft, *, actor: Actor) -> OutcomeRecorded:
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


def _evidence_logged(draft: OutcomeDraft) -> None:
    logger.warning(
        "the tool answered with an error (%s) and may have acted: the intent stays open", draft.error_class
    )


def _evidence_write(intent_pk: int, draft: OutcomeDraft, *, actor: Actor) -> bool:
    """Keep an ambiguous failure's evidence on the open row, with its event: True when written;
    False when the row is not open or holds this evidence already (nothing is written)."""
    db = connections[DEFAULT_DB_ALIAS]
    refuse_open_transaction(db)
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


def outcome_already_recorded(intent_pk: int, draft: OutcomeDraft) -> Intent:
    """The row someone else settled: returned if it holds this same outcome, else Conflict."""
    fresh = Intent.objects.select_related("run").get(pk=intent_pk)
    said = draft.as_columns()
    if _outcome_fields(fresh, said) != said:
        raise Conflict(
            f"intent {fresh.step_id} is already settled as {fresh.status}"
            f"{' (' + fresh.error_class + ')' if fresh.error_class else ''} with a different outcome",
            field="ok",
        )
    return fresh


def _outcome_fields(intent: Intent, columns: dict[str, Any]) -> dict[str, Any]:
    """The row's values of the outcome's columns."""
    return {name: getattr(intent, name) for name in columns}


def _settle_intent(
    intent_pk: int, run_id: Any, draft: OutcomeDraft, *, run_created_at: datetime, now: datetime, actor: Actor
) -> bool:
    db = connections[DEFAULT_DB_ALIAS]
    refuse_open_transaction(db)
    # The transitions table decides which status an outcome moves the row from (a set lookup).
    source = transitions.outcome_source(target=draft.status)
    # already_so keeps its evidence in the event, which the single statement does not write;
    # rare, so it takes the ORM's transaction.
    if draft.status != IntentStatus.ALREADY_SO:
        params = journal_sql.settle_intent_params(
            intent_id=intent_pk,
            run_created_at=run_created_at,
            source=source,
            settled=draft.columns_written(now),
            actor_kind=actor.kind,
            actor_name=actor.name,
            user_id=actor.user_id,
        )
        return journal_sql.settle_intent(db, params, run_created_at=run_created_at)
    columns = draft.as_columns()
    del columns["status"]  # the transition's to write
    with durable():
        settled = transitions.intent_transition(
            # Only the ids are read: like the SQL path, this one holds ids, not the row.
            intent=Intent(pk=intent_pk, run_id=run_id, run_created_at=run_created_at),
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


def _outcome_event_data(draft: OutcomeDraft) -> dict[str, Any]:
    data: dict[str, Any] = {
        "status": draft.status,
        "error_class": draft.error_class,
        "receipt": draft.receipt,
    }
    if draft.evidence_at is not None and draft.status == IntentStatus.ALREADY_SO:
        # As reconciliation's already_so event: when, and the record the downstream answered with.
        data["evidence"] = {"at": draft.evidence_at.isoformat(), "record": draft.record or {}, "detail": ""}
    return data


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
