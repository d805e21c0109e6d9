"""Settling intent rows that dead runs left `intended`, by asking the downstream system what
became of the call's idempotency key.

Rows are worked in batches (settings.SEAM_RECONCILE_BATCH_SIZE), in three steps, none holding a
transaction across the network:
1. claim — one durable transaction takes a short lease (`next_lookup_at`) on up to a batch of
   rows that are still open and due and that no other session holds locked (SKIP LOCKED): the
   sweep takes the oldest stale ones, so a second sweeper (two beats, two workers) claims the
   next batch rather than this one;
2. ask — `tools.services.intent_lookup` for each claimed row, outside any transaction; a row whose
   lease lapsed before its turn is left to whoever claims it next;
3. settle — one durable transaction: each row's compare-and-swap from `intended`
   (journal.transitions.intents_transition: one UPDATE for all rows writing the same columns)
   and the events of the rows that moved, written in one INSERT. Settling a row that someone else settled first changes nothing, so a doubled sweep is
   harmless. A batch whose settle fails is settled again row by row, so one row the database
   refuses cannot hold back the others.

Each row keeps its own outcome (Reconciled), as when rows were settled one at a time; batching
saves the commits (two per batch instead of two per row, each waiting for its WAL flush)."""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import requests
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from journal.models import ErrorClass, Intent, IntentStatus, JournalEvent, Run
from journal.selectors import OPEN_CALL, in_flight_intents, read_prepared, stale_intents
from journal.services import (
    OPEN_TRANSACTION_MESSAGE,
    Actor,
    OpenTransactionRefused,
    cancelled_in_doubt_hand_over,
    inside_open_transaction,
)
from journal.tool_errors import ToolError
from journal.transitions import IntentMove, intents_transition
from journal.why import CallVerdict, Why, why
from observability import counters as metrics
from observability.context import log_context
from tools import services as tools
from tools.connectors import AlreadySo, LookupResult, NotPerformed, Performed, Unknown, caused_by_intent
from tools.registry import UnknownTool, in_flight_floor

from .lookups import Asking, start_asking

MAX_REASON_CHARS = 4000
# A lookup is a read: a failure to get an answer, even after the request left, changes nothing
# downstream, so both classes mean "ask again later".
RETRYABLE_LOOKUP_ERRORS = frozenset({ErrorClass.TRANSIENT, ErrorClass.AMBIGUOUS})

logger = logging.getLogger(__name__)


class ReconcileOutcome(StrEnum):
    PERFORMED = "performed"  # settled: the downstream has the effect (receipt stored)
    NOT_PERFORMED = "not_performed"  # settled: the downstream never performed it
    ALREADY_SO = "already_so"  # settled: the world was so before the intent; not the run's work
    UNKNOWN = "unknown"  # settled for a person: nobody could say
    RETRY_LATER = "retry_later"  # the lookup failed; asked again after a backoff
    SKIPPED = "skipped"  # not open, not due, or claimed by another sweeper: nothing done


@dataclass(frozen=True)
class Reconciled:
    """One row's result. `detail` is a code for the log and the reconcile command: the verdict's
    code, or why the row was skipped (SKIP_*), with the failing lookup's error where one was."""

    intent_id: int
    outcome: ReconcileOutcome
    detail: str = ""


SKIP_SETTLED_MEANWHILE = "settled_meanwhile"
SKIP_LEASE_LAPSED = "lease_lapsed"
SKIP_NOT_SETTLED = "database_refused"
SKIP_NOT_DUE = "not_open_or_due"


# --- the three steps --------------------------------------------------------------------------


def _claim(*, candidates: QuerySet[Intent], limit: int, now: datetime) -> tuple[list[Intent], datetime]:
    """Take a lease on up to `limit` of `candidates` that are open and due, in their order: (the
    rows claimed; when the lease ends). A row not open, not due, or held by someone else is left
    out, so two sweepers claiming from the same candidates at once get different rows."""
    lease_end = now + timedelta(seconds=float(settings.SEAM_LOOKUP_LEASE_SECONDS))
    # SKIP LOCKED: a row another session holds locked (another sweeper's claim, a person's action,
    # a stuck settle) is "someone else has it" for now, not a wait. A plain UPDATE would queue
    # behind that lock, and every sweep after it too, since each comes to the oldest row first.
    due = (
        candidates.select_for_update(skip_locked=True, no_key=True, of=("self",))
        .filter(OPEN_CALL)
        .filter(Q(next_lookup_at__isnull=True) | Q(next_lookup_at__lte=now))
    )[
        # The rows alone: a lookup reads the intent, never its run.
        :limit
    ]
    with transaction.atomic(durable=True):
        # Prepared: each claim is the same statement, planned once per connection, not once per
        # batch over every month's partitions.
        claimed = read_prepared(due)
        # Their runs' months too: PostgreSQL then plans only those months' partitions.
        Intent.objects.filter(
            pk__in=[intent.pk for intent in claimed],
            run_created_at__in=sorted({intent.run_created_at for intent in claimed}),
        ).update(next_lookup_at=lease_end)
    for intent in claimed:
        intent.next_lookup_at = lease_end
    return claimed, lease_end


@dataclass(frozen=True)
class Verdict:
    """What the downstream's answer, or the failure to get one, makes of one claimed row: the
    status it settles in (`intended` again for a failed lookup asked again later), the row's other
    columns and its event's data."""

    intent: Intent
    outcome: ReconcileOutcome
    target: str
    event: str
    changes: dict[str, Any]
    data: dict[str, Any]
    detail: str = ""


def _settling(
    *,
    intent: Intent,
    outcome: ReconcileOutcome,
    status: str,
    verdict: Why,
    now: datetime,
    receipt: dict[str, Any] | None = None,
    also: dict[str, Any] | None = None,
    evidence: dict[str, Any] | None = None,
) -> Verdict:
    """The verdict that settles the open row in `status`, with its reconciled event. The row's
    `verdict` says what settled it, as a code and its facts (journal.why), and replaces the
    agent's words of an ambiguous answer, which the verdict's facts keep where they matter."""
    settled_why = _bounded(verdict.as_json())
    data: dict[str, Any] = {"status": status, "how": "lookup", "tool": intent.tool, "verdict": settled_why}
    if receipt:
        data["receipt"] = receipt
    if evidence:
        data["evidence"] = evidence
    return Verdict(
        intent=intent,
        outcome=outcome,
        target=status,
        event=JournalEvent.Kind.INTENT_RECONCILED,
        changes={
            "outcome_summary": "",
            "receipt": receipt or {},
            "verdict": settled_why,
            "settled_at": now,
            "next_lookup_at": None,
            # The agent's evidence (an ambiguous error) is answered by this verdict; an unknown
            # row keeps its class, which says the tool answered with an error. Written only
            # where there is one, so the usual rows keep their one UPDATE (batches group rows
            # by the columns they write).
            **({"error_class": ""} if intent.error_class and status != IntentStatus.UNKNOWN else {}),
            **(also or {}),
        },
        data=data,
        # The log and the command say why a row went unknown; a settled row's outcome says it all.
        detail=str(verdict.code) if status == IntentStatus.UNKNOWN else "",
    )


def _bounded(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts with each text cut to MAX_REASON_CHARS: a downstream's error can be a page."""
    return {k: v[:MAX_REASON_CHARS] if isinstance(v, str) else v for k, v in facts.items()}


def _backoff(attempts: int) -> timedelta:
    """Exponential in the number of failed lookups, capped, with jitter so that rows that failed
    together (a provider outage) are not all asked again in the same instant."""
    base = float(settings.SEAM_LOOKUP_BACKOFF_SECONDS)
    cap = float(settings.SEAM_LOOKUP_BACKOFF_MAX_SECONDS)
    delay = min(cap, base * 2 ** max(attempts - 1, 0))
    return timedelta(seconds=random.uniform(delay / 2, delay))


def _lookup_failed(*, intent: Intent, error: str, now: datetime) -> Verdict:
    """A failed lookup counts an attempt and asks again after a backoff; past the budget the row
    is settled `unknown`, for a person."""
    attempts = intent.lookup_attempts + 1
    budget = int(settings.SEAM_LOOKUP_MAX_ATTEMPTS)
    bookkeeping = {"lookup_attempts": F("lookup_attempts") + 1, "last_lookup_error": error[:MAX_REASON_CHARS]}
    if attempts >= budget:
        return _unknown(
            intent,
            verdict=why(CallVerdict.LOOKUP_BUDGET_SPENT, attempts=attempts, last_error=error),
            also=bookkeeping,
        )
    retry_at = now + _backoff(attempts)
    return Verdict(
        intent=intent,
        outcome=ReconcileOutcome.RETRY_LATER,
        target=IntentStatus.INTENDED,
        event=JournalEvent.Kind.LOOKUP_FAILED,
        changes={**bookkeeping, "next_lookup_at": retry_at},
        data={"attempt": attempts, "error": error[:MAX_REASON_CHARS], "retry_at": retry_at.isoformat()},
        detail=f"attempt {attempts}/{budget}: {error}",
    )


def _ask(intent: Intent) -> Verdict:
    """Ask the downstream about a row this sweeper holds the lease on: its verdict.

    Performed → `performed` with the downstream's receipt; NotPerformed → `not_performed`;
    AlreadySo, or a Performed whose evidence is older than the intent (the engine's own rule,
    whatever the connector says: connectors.caused_by_intent) → `already_so`, not the run's work;
    Unknown, an unregistered tool, or a lookup error that is not transient → `unknown` with the
    reason, for a person. A transient failure counts an attempt and backs off."""
    try:
        query = tools.lookup_query(intent)
        answer = caused_by_intent(tools.intent_lookup(intent=intent), query)
    except UnknownTool as exc:
        return _unknown(intent, verdict=_no_lookup(intent, exc))
    except ToolError as exc:
        if exc.error_class in RETRYABLE_LOOKUP_ERRORS:
            return _lookup_failed(
                intent=intent, error=f"{exc.error_class}: {exc.message}", now=timezone.now()
            )
        return _unknown(
            intent, verdict=why(CallVerdict.LOOKUP_REFUSED, error_class=exc.error_class, message=exc.message)
        )
    except (requests.RequestException, OSError) as exc:
        return _lookup_failed(
            intent=intent, error=f"connection failure: {type(exc).__name__}", now=timezone.now()
        )
    except Exception as exc:
        # A connector bug must not stall the sweep for every other row, nor be retried forever:
        # it is counted against the same budget and ends `unknown` with the evidence.
        return _lookup_failed(intent=intent, error=repr(exc)[:500], now=timezone.now())
    return _settled_by(intent, answer)


def _settled_by(intent: Intent, answer: LookupResult) -> Verdict:
    """The verdict a downstream's answer gives the row: settled as it says, or `unknown`."""
    now = timezone.now()
    if isinstance(answer, Performed):
        return _settling(
            intent=intent,
            outcome=ReconcileOutcome.PERFORMED,
            status=IntentStatus.PERFORMED,
            verdict=why(CallVerdict.FOUND_PERFORMED),
            now=now,
            receipt=answer.receipt,
        )
    if isinstance(answer, AlreadySo):
        when = answer.evidence_at.isoformat() if answer.evidence_at else ""
        return _settling(
            intent=intent,
            outcome=ReconcileOutcome.ALREADY_SO,
            status=IntentStatus.ALREADY_SO,
            verdict=why(CallVerdict.FOUND_ALREADY_SO, at=when, detail=answer.detail),
            now=now,
            # The record is someone else's, not this call's receipt: kept in the event as
            # evidence, never on the row where an undo would read it.
            evidence={"at": when, "record": answer.receipt, "detail": answer.detail},
        )
    if isinstance(answer, NotPerformed):
        return _settling(
            intent=intent,
            outcome=ReconcileOutcome.NOT_PERFORMED,
            status=IntentStatus.NOT_PERFORMED,
            verdict=why(CallVerdict.FOUND_NOT_PERFORMED),
            now=now,
        )
    assert isinstance(answer, Unknown)
    return _unknown(intent, verdict=why(CallVerdict.DOWNSTREAM_CANNOT_SAY, answer=answer.reason))


def _no_lookup(intent: Intent, exc: UnknownTool) -> Why:
    """Why a row nobody can be asked about goes to a person: with the tool's own error text when
    the agent reported that the tool answered with an error and may have acted (ambiguous)."""
    said = intent.outcome_summary.strip() if intent.error_class == ErrorClass.AMBIGUOUS else ""
    return why(
        CallVerdict.NO_LOOKUP,
        tool_said=said,
        ambiguous=intent.error_class == ErrorClass.AMBIGUOUS,
        error=str(exc),
    )


def _unknown(intent: Intent, *, verdict: Why, also: dict[str, Any] | None = None) -> Verdict:
    """No lookup could settle the row (`verdict` says why): sent again under its key where the
    tool honours it and the provider still keeps the key (_resent), else `unknown`, for a person."""
    if tools.resend_allowed(intent=intent, now=timezone.now()):
        return _resent(intent, lookup=verdict, also=also)
    return _settle_as(intent, ReconcileOutcome.UNKNOWN, IntentStatus.UNKNOWN, verdict, also=also)


def _resent(intent: Intent, *, lookup: Why, also: dict[str, Any] | None) -> Verdict:
    """Send the row's call again under its key, to a provider that deduplicates by it: its
    answer is the first call's effect, or this one's, never a second. A success settles the row
    as the lookup would have (`performed`, or `already_so` for evidence older than the intent); a
    refusal for good (invalid input, permanent) proves nothing was done: `not_performed`; a
    refusal of the key (conflict: the provider holds it for something else) or a bug is evidence
    for a person, never sent a third time; a failure that may pass is asked again later, within
    the lookup budget."""
    facts = {"lookup": lookup.as_json()}
    try:
        sent = tools.intent_resend_under_key(intent=intent)
        answer = caused_by_intent(sent, tools.lookup_query(intent))
    except ToolError as exc:
        return _resend_refused(intent, exc, facts, also=also)
    except Exception as exc:  # a connector bug: evidence for a person, as a lookup's would be
        failed = why(CallVerdict.RESEND_FAILED, **facts, error_class=ErrorClass.BUG, message=repr(exc)[:500])
        return _settle_as(intent, ReconcileOutcome.UNKNOWN, IntentStatus.UNKNOWN, failed, also=also)
    if isinstance(answer, AlreadySo):
        return _settled_by(intent, answer)
    assert isinstance(answer, Performed)
    return _settling(
        intent=intent,
        outcome=ReconcileOutcome.PERFORMED,
        status=IntentStatus.PERFORMED,
        verdict=why(CallVerdict.RESENT_UNDER_KEY, **facts),
        now=timezone.now(),
        receipt=answer.receipt,
        also=also,
    )


def _resend_refused(
    intent: Intent, exc: ToolError, facts: dict[str, Any], *, also: dict[str, Any] | None
) -> Verdict:
    """What a resend's error makes of the row (_resent says which error means what)."""
    refused = {**facts, "error_class": exc.error_class, "message": exc.message}
    if exc.error_class in (ErrorClass.INVALID_INPUT, ErrorClass.PERMANENT):
        verdict = why(CallVerdict.RESEND_REFUSED, **refused)
        return _settle_as(
            intent, ReconcileOutcome.NOT_PERFORMED, IntentStatus.NOT_PERFORMED, verdict, also=also
        )
    budget = int(settings.SEAM_LOOKUP_MAX_ATTEMPTS)
    if exc.error_class in RETRYABLE_LOOKUP_ERRORS and intent.lookup_attempts + 1 < budget:
        return _lookup_failed(intent=intent, error=f"{exc.error_class}: {exc.message}", now=timezone.now())
    code = CallVerdict.KEY_REFUSED if exc.error_class == ErrorClass.CONFLICT else CallVerdict.RESEND_FAILED
    return _settle_as(intent, ReconcileOutcome.UNKNOWN, IntentStatus.UNKNOWN, why(code, **refused), also=also)


def _settle_as(
    intent: Intent, outcome: ReconcileOutcome, status: str, verdict: Why, *, also: dict[str, Any] | None
) -> Verdict:
    return _settling(
        intent=intent, outcome=outcome, status=status, verdict=verdict, now=timezone.now(), also=also
    )


def _settle(verdicts: Sequence[Verdict], actor: Actor) -> list[Reconciled]:
    """Write the verdicts in one durable transaction: each row's compare-and-swap from
    `intended` and the events of those that moved. A row no longer open (settled by the runtime,
    a person, or another sweeper) is skipped. A cancelled run with a call now unknown goes to a
    person, under its row lock, taken first (staff actions take the run, then the intent)."""
    if not verdicts:
        return []
    now = timezone.now()
    with transaction.atomic(durable=True):
        unknown_runs = sorted({v.intent.run_id for v in verdicts if v.target == IntentStatus.UNKNOWN})
        runs = list(Run.objects.select_for_update(no_key=True).filter(pk__in=unknown_runs).order_by("pk"))
        moved = intents_transition(
            moves=[IntentMove(v.intent, v.target, v.event, v.data, v.changes) for v in verdicts],
            source=IntentStatus.INTENDED,
            actor=actor,
            at=now,
        )
        for run in runs:
            unknown = [
                v.intent
                for v, done in zip(verdicts, moved, strict=True)
                if done and v.target == IntentStatus.UNKNOWN and v.intent.run_id == run.pk
            ]
            cancelled_in_doubt_hand_over(run=run, unknown=unknown, actor=actor, at=now)
    return [
        Reconciled(intent_id=v.intent.pk, outcome=v.outcome, detail=v.detail)
        if done
        else Reconciled(
            intent_id=v.intent.pk, outcome=ReconcileOutcome.SKIPPED, detail=SKIP_SETTLED_MEANWHILE
        )
        for v, done in zip(verdicts, moved, strict=True)
    ]


def _settle_each(verdicts: Sequence[Verdict], actor: Actor) -> list[Reconciled]:
    """The batch's verdicts settled row by row, after the batch's transaction failed: a row the
    database refuses keeps its lease (asked again once it lapses) and holds back nobody else."""
    results = []
    for verdict in verdicts:
        try:
            results += _settle([verdict], actor)
        except DatabaseError as exc:
            logger.exception("intent %s could not be settled", verdict.intent.pk)
            results.append(
                Reconciled(
                    intent_id=verdict.intent.pk,
                    outcome=ReconcileOutcome.SKIPPED,
                    detail=f"{SKIP_NOT_SETTLED}: {exc}"[:MAX_REASON_CHARS],
                )
            )
    return results


# --- the services -----------------------------------------------------------------------------


def _ask_in_context(intent: Intent) -> Verdict:
    with log_context(run_id=intent.run_id, step_id=intent.step_id, intent_id=intent.pk):
        return _ask(intent)


def _reconcile_claimed(claimed: Sequence[Intent], lease_end: datetime, actor: Actor) -> list[Reconciled]:
    """Ask about each claimed row and settle the batch: one result per row, in order, each logged
    and counted."""
    return _settle_asked(start_asking(claimed, _ask_in_context, lease_end=lease_end), actor)


def _settle_asked(asking: Asking[Verdict], actor: Actor) -> list[Reconciled]:
    """Wait for a batch's answers and settle it: one result per claimed row, in order, each logged
    and counted."""
    verdicts, lapsed = asking.result()
    claimed = asking.claimed
    try:
        settled = _settle(verdicts, actor)
    except DatabaseError:
        logger.exception("a batch of %d rows could not be settled at once; settling each", len(verdicts))
        settled = _settle_each(verdicts, actor)
    by_id = {r.intent_id: r for r in settled} | {
        pk: Reconciled(intent_id=pk, outcome=ReconcileOutcome.SKIPPED, detail=SKIP_LEASE_LAPSED)
        for pk in lapsed
    }
    results = []
    for intent in claimed:
        result = by_id[intent.pk]
        metrics.reconcile_outcome(result.outcome)
        with log_context(run_id=intent.run_id, step_id=intent.step_id, intent_id=intent.pk):
            log = logger.warning if result.outcome == ReconcileOutcome.UNKNOWN else logger.info
            log("intent reconciled: %s%s", result.outcome, f" ({result.detail})" if result.detail else "")
        results.append(result)
    return results


def intents_reconcile(*, intent_ids: Sequence[int], actor: Actor) -> list[Reconciled]:
    """Ask the downstream about each of these open intents and settle it with the answer (_ask
    says how each answer settles), in batches of settings.SEAM_RECONCILE_BATCH_SIZE: one result
    per id, in order. A transient failure counts an attempt and backs off; past
    settings.SEAM_LOOKUP_MAX_ATTEMPTS the row becomes `unknown`. A row that is not open, not due,
    or claimed by another sweeper is skipped untouched."""
    if inside_open_transaction():
        raise OpenTransactionRefused(OPEN_TRANSACTION_MESSAGE)
    size = max(1, int(settings.SEAM_RECONCILE_BATCH_SIZE))
    results: list[Reconciled] = []
    for start in range(0, len(intent_ids), size):
        batch = intent_ids[start : start + size]
        claimed, lease_end = _claim(
            candidates=Intent.objects.filter(pk__in=list(batch)), limit=len(batch), now=timezone.now()
        )
        by_id = {r.intent_id: r for r in _reconcile_claimed(claimed, lease_end, actor)}
        for pk in batch:
            if pk not in by_id:
                metrics.reconcile_outcome(ReconcileOutcome.SKIPPED)
            results.append(
                by_id.get(pk)
                or Reconciled(intent_id=pk, outcome=ReconcileOutcome.SKIPPED, detail=SKIP_NOT_DUE)
            )
    return results


def intent_reconcile(*, intent_id: int, actor: Actor) -> Reconciled:
    """intents_reconcile for one intent."""
    return intents_reconcile(intent_ids=[intent_id], actor=actor)[0]


@dataclass(frozen=True)
class SweepReport:
    counts: dict[str, int]
    results: list[Reconciled]
    # Stale by the threshold, but younger than their tool's call timeout plus the margin: their
    # call may still be acting downstream, so they were not asked about; the last is due then.
    held_back: int = 0
    held_until: datetime | None = None


def reconcile_sweep(
    *,
    older_than: timedelta | None = None,
    run_id: Any = None,
    limit: int = 500,
    actor: Actor,
) -> SweepReport:
    """Reconcile up to `limit` stale open intents, oldest first. Returns counts by outcome and
    each row's result. Harmless when run twice at once: each row is claimed by one sweeper.

    Never an intent younger than its tool's call timeout plus the margin (tools.registry.
    in_flight_floor), whatever `older_than` says: a slow provider may still be acting on it, and
    a lookup now could find nothing yet. Those are counted as held back, with when the last of
    them is due."""
    if inside_open_transaction():
        raise OpenTransactionRefused(OPEN_TRANSACTION_MESSAGE)
    now = timezone.now()
    floor = in_flight_floor()
    stale = stale_intents(older_than=older_than, run_id=run_id, now=now, floor=floor)
    held = list(
        in_flight_intents(floor=floor, older_than=older_than, run_id=run_id, now=now).values_list(
            "tool", "intended_at"
        )
    )
    size = max(1, int(settings.SEAM_RECONCILE_BATCH_SIZE))
    results: list[Reconciled] = []
    # Each batch is claimed from the oldest stale rows nobody holds: sweepers running at once take
    # different batches instead of each finding the other's batch taken. A claimed row leaves the
    # stale set (its lease is later than `now`); a batch that comes back short means nothing
    # stale is left that nobody holds, and the sweep ends without asking again.
    # Once a batch's answers are in, the next batch is claimed and asked about before the answered
    # one is settled: its downstreams' latency passes while this thread writes the settle, not
    # after it. The sweeper still waits for each batch's answers before claiming another, so it
    # holds at most one batch that is being asked about.
    answered: Asking[Verdict] | None = None
    taken = 0
    while taken < limit:
        wanted = min(size, limit - taken)
        claimed, lease_end = _claim(candidates=stale, limit=wanted, now=timezone.now())
        taken += len(claimed)
        asking = start_asking(claimed, _ask_in_context, lease_end=lease_end)
        if answered is not None:
            results += _settle_asked(answered, actor)
        answered = asking
        if len(claimed) < wanted:
            break
        asking.result()  # its answers in before the next claim
    if answered is not None:
        results += _settle_asked(answered, actor)
    counts = Counter(str(r.outcome) for r in results)
    return SweepReport(
        counts={o.value: counts.get(o.value, 0) for o in ReconcileOutcome},
        results=results,
        held_back=len(held),
        held_until=max((at + floor.of(tool) for tool, at in held), default=None),
    )
