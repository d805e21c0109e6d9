"""Settling intent rows that dead runs left `intended`, by asking the downstream system what
became of the call's idempotency key.

Each row is worked in three steps, none holding a transaction across the network:
1. claim — a compare-and-swap that sets a short lease (`next_lookup_at`) on a row that is
   still open and due, committed at once, so a second sweeper (two beats, two workers) skips it;
2. ask — `tools.services.intent_lookup`, outside any transaction;
3. settle — journal.transitions' compare-and-swap from `intended` and its journal event,
   committed together (durable). Settling a row that someone else settled first changes
   nothing, so a doubled sweep is harmless."""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from journal.models import ErrorClass, Intent, IntentStatus, JournalEvent, Run
from journal.selectors import in_flight_intents, stale_intents
from journal.services import (
    OPEN_TRANSACTION_MESSAGE,
    Actor,
    OpenTransactionRefused,
    cancelled_in_doubt_hand_over,
    event_record,
    inside_open_transaction,
)
from journal.tool_errors import ToolError
from journal.transitions import intent_transition
from observability import counters as metrics
from observability.context import log_context
from tools import services as tools
from tools.connectors import AlreadySo, NotPerformed, Performed, Unknown, caused_by_intent
from tools.registry import UnknownTool, in_flight_floor

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
    intent_id: int
    outcome: ReconcileOutcome
    detail: str = ""


# --- the three steps --------------------------------------------------------------------------


def _claim(*, intent_id: int, now: datetime) -> Intent | None:
    """Take a lease on the row if it is open and due; None if it is not (or someone has it)."""
    lease = timedelta(seconds=float(settings.SEAM_LOOKUP_LEASE_SECONDS))
    # SKIP LOCKED: a row another session holds locked (a long transaction, a person's action, a
    # stuck settle) is "someone else has it" for now, not a wait. A plain UPDATE would queue
    # behind that lock, and every sweep after it too, since each comes to the oldest row first.
    due = (
        Intent.objects.select_for_update(skip_locked=True, no_key=True)
        .filter(pk=intent_id, status=IntentStatus.INTENDED)
        .filter(Q(next_lookup_at__isnull=True) | Q(next_lookup_at__lte=now))
        .values("pk")
    )
    with transaction.atomic(durable=True):
        claimed = Intent.objects.filter(pk__in=due).update(next_lookup_at=now + lease)
    if claimed != 1:
        return None
    return Intent.objects.select_related("run").get(pk=intent_id)


def _settle(
    *,
    intent: Intent,
    status: str,
    actor: Actor,
    summary: str,
    receipt: dict[str, Any] | None = None,
    unknown_reason: str = "",
    also: dict[str, Any] | None = None,
    evidence: dict[str, Any] | None = None,
) -> bool:
    """Compare-and-swap the open row to its reconciled status, with its event. False when the row
    was no longer open (settled by the runtime, a person, or another sweeper)."""
    now = timezone.now()
    unknown_reason = unknown_reason[:MAX_REASON_CHARS]
    with transaction.atomic(durable=True):
        run: Run | None = None
        if status == IntentStatus.UNKNOWN:
            # An unknown outcome may hand the run to a person (a cancelled run), which writes the
            # run row: its lock is taken first, in the order staff actions take run then intent.
            run = Run.objects.select_for_update(no_key=True).get(pk=intent.run_id)
        data: dict[str, Any] = {"status": status, "how": "lookup", "tool": intent.tool}
        if receipt:
            data["receipt"] = receipt
        if unknown_reason:
            data["reason"] = unknown_reason
        if evidence:
            data["evidence"] = evidence
        settled = intent_transition(
            intent=intent,
            source=IntentStatus.INTENDED,
            target=status,
            actor=actor,
            event=JournalEvent.Kind.INTENT_RECONCILED,
            data=data,
            changes={
                "outcome_summary": summary[:MAX_REASON_CHARS],
                "receipt": receipt or {},
                "unknown_reason": unknown_reason,
                "settled_at": now,
                "next_lookup_at": None,
                **(also or {}),
            },
            at=now,
        )
        if settled.moved and run is not None:
            cancelled_in_doubt_hand_over(run=run, unknown=[intent], actor=actor, at=now)
    return settled.moved


def _backoff(attempts: int) -> timedelta:
    """Exponential in the number of failed lookups, capped, with jitter so that rows that failed
    together (a provider outage) are not all asked again in the same instant."""
    base = float(settings.SEAM_LOOKUP_BACKOFF_SECONDS)
    cap = float(settings.SEAM_LOOKUP_BACKOFF_MAX_SECONDS)
    delay = min(cap, base * 2 ** max(attempts - 1, 0))
    return timedelta(seconds=random.uniform(delay / 2, delay))


def _lookup_failed(*, intent: Intent, error: str, actor: Actor) -> Reconciled:
    attempts = intent.lookup_attempts + 1
    budget = int(settings.SEAM_LOOKUP_MAX_ATTEMPTS)
    if attempts >= budget:
        reason = f"the downstream could not be asked after {attempts} attempts; last error: {error}"
        settled = _settle(
            intent=intent,
            status=IntentStatus.UNKNOWN,
            actor=actor,
            summary="settled by reconciliation: lookup budget spent, outcome unknown",
            unknown_reason=reason,
            also={"lookup_attempts": F("lookup_attempts") + 1, "last_lookup_error": error[:MAX_REASON_CHARS]},
        )
        outcome = ReconcileOutcome.UNKNOWN if settled else ReconcileOutcome.SKIPPED
        return Reconciled(intent_id=intent.pk, outcome=outcome, detail=reason)
    now = timezone.now()
    retry_at = now + _backoff(attempts)
    with transaction.atomic(durable=True):
        updated = Intent.objects.filter(pk=intent.pk, status=IntentStatus.INTENDED).update(
            lookup_attempts=F("lookup_attempts") + 1,
            last_lookup_error=error[:MAX_REASON_CHARS],
            next_lookup_at=retry_at,
        )
        if updated:
            event_record(
                run=intent.run,
                intent=intent,
                kind=JournalEvent.Kind.LOOKUP_FAILED,
                actor=actor,
                at=now,
                data={
                    "attempt": attempts,
                    "error": error[:MAX_REASON_CHARS],
                    "retry_at": retry_at.isoformat(),
                },
            )
    if not updated:
        return Reconciled(intent_id=intent.pk, outcome=ReconcileOutcome.SKIPPED, detail="no longer open")
    return Reconciled(
        intent_id=intent.pk,
        outcome=ReconcileOutcome.RETRY_LATER,
        detail=f"attempt {attempts} of {budget} failed ({error}); next at {retry_at.isoformat()}",
    )


# --- the services -----------------------------------------------------------------------------


def intent_reconcile(*, intent_id: int, actor: Actor) -> Reconciled:
    """Ask the downstream about one open intent and settle it with the answer.

    Performed → `performed` with the downstream's receipt; NotPerformed → `not_performed`;
    AlreadySo, or a Performed whose evidence is older than the intent (the engine's own rule,
    whatever the connector says: connectors.caused_by_intent) → `already_so`, not the run's work;
    Unknown, an unregistered tool, or a lookup error that is not transient → `unknown` with the
    reason, for a person. A transient failure counts an attempt and backs off; past
    settings.SEAM_LOOKUP_MAX_ATTEMPTS the row becomes `unknown`. A row that is not open, not due,
    or claimed by another sweeper is skipped untouched."""
    if inside_open_transaction():
        raise OpenTransactionRefused(OPEN_TRANSACTION_MESSAGE)
    intent = _claim(intent_id=intent_id, now=timezone.now())
    if intent is None:
        metrics.reconcile_outcome(ReconcileOutcome.SKIPPED)
        return Reconciled(intent_id=intent_id, outcome=ReconcileOutcome.SKIPPED, detail="not open or not due")
    with log_context(run_id=intent.run_id, step_id=intent.step_id, intent_id=intent.pk):
        result = _reconcile_claimed(intent=intent, actor=actor)
        metrics.reconcile_outcome(result.outcome)
        log = logger.warning if result.outcome == ReconcileOutcome.UNKNOWN else logger.info
        log("intent reconciled: %s%s", result.outcome, f" ({result.detail})" if result.detail else "")
    return result


def _reconcile_claimed(*, intent: Intent, actor: Actor) -> Reconciled:
    """Ask about a row this sweeper holds the lease on, and settle it with the answer."""
    try:
        query = tools.lookup_query(intent)
        answer = caused_by_intent(tools.intent_lookup(intent=intent), query)
    except UnknownTool as exc:
        return _settle_unknown(intent=intent, actor=actor, reason=f"no connector can be asked: {exc}")
    except ToolError as exc:
        if exc.error_class in RETRYABLE_LOOKUP_ERRORS:
            return _lookup_failed(intent=intent, error=f"{exc.error_class}: {exc.message}", actor=actor)
        return _settle_unknown(
            intent=intent, actor=actor, reason=f"the lookup failed ({exc.error_class}): {exc.message}"
        )
    except (requests.RequestException, OSError) as exc:
        return _lookup_failed(intent=intent, error=f"connection failure: {type(exc).__name__}", actor=actor)
    except Exception as exc:
        # A connector bug must not stall the sweep for every other row, nor be retried forever:
        # it is counted against the same budget and ends `unknown` with the evidence.
        return _lookup_failed(intent=intent, error=f"the connector raised {exc!r}"[:500], actor=actor)

    if isinstance(answer, Performed):
        settled = _settle(
            intent=intent,
            status=IntentStatus.PERFORMED,
            actor=actor,
            summary="settled by reconciliation: the downstream's lookup found the call performed",
            receipt=answer.receipt,
        )
        return _result(intent, settled, ReconcileOutcome.PERFORMED)
    if isinstance(answer, AlreadySo):
        when = answer.evidence_at.isoformat() if answer.evidence_at else "an unstated time"
        settled = _settle(
            intent=intent,
            status=IntentStatus.ALREADY_SO,
            actor=actor,
            summary=(
                f"settled by reconciliation: already so before the intent (evidence from {when}); "
                f"not this run's work{': ' + answer.detail if answer.detail else ''}"
            ),
            # The record is someone else's, not this call's receipt: kept in the event as
            # evidence, never on the row where an undo would read it.
            evidence={"at": when, "record": answer.receipt, "detail": answer.detail},
        )
        return _result(intent, settled, ReconcileOutcome.ALREADY_SO, detail=answer.detail)
    if isinstance(answer, NotPerformed):
        settled = _settle(
            intent=intent,
            status=IntentStatus.NOT_PERFORMED,
            actor=actor,
            summary="settled by reconciliation: the downstream has no record of this key",
        )
        return _result(intent, settled, ReconcileOutcome.NOT_PERFORMED)
    assert isinstance(answer, Unknown)
    return _settle_unknown(intent=intent, actor=actor, reason=f"the downstream cannot say: {answer.reason}")


def _settle_unknown(*, intent: Intent, actor: Actor, reason: str) -> Reconciled:
    settled = _settle(
        intent=intent,
        status=IntentStatus.UNKNOWN,
        actor=actor,
        summary="settled by reconciliation: outcome unknown, a person must decide",
        unknown_reason=reason,
    )
    return _result(intent, settled, ReconcileOutcome.UNKNOWN, detail=reason)


def _result(intent: Intent, settled: bool, outcome: ReconcileOutcome, detail: str = "") -> Reconciled:
    if not settled:
        return Reconciled(intent_id=intent.pk, outcome=ReconcileOutcome.SKIPPED, detail="settled meanwhile")
    return Reconciled(intent_id=intent.pk, outcome=outcome, detail=detail)


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
    now = timezone.now()
    floor = in_flight_floor()
    stale = stale_intents(older_than=older_than, run_id=run_id, now=now, floor=floor)
    ids = list(stale.values_list("pk", flat=True)[:limit])
    held = list(
        in_flight_intents(floor=floor, older_than=older_than, run_id=run_id, now=now).values_list(
            "tool", "intended_at"
        )
    )
    results = [intent_reconcile(intent_id=pk, actor=actor) for pk in ids]
    counts = Counter(str(r.outcome) for r in results)
    return SweepReport(
        counts={o.value: counts.get(o.value, 0) for o in ReconcileOutcome},
        results=results,
        held_back=len(held),
        held_until=max((at + floor.of(tool) for tool, at in held), default=None),
    )
