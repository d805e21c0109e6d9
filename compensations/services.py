"""The compensations executor. Undoing a step is a new action: its own intent row (recorded
through the same journal, admitted even on an ended run), its own idempotency key (derived from
the compensating tool and its arguments, so a redelivered task finds it instead of sending it
again), its own outcome. A compensation that cannot be finished goes to the dead-letter queue
with a person as its owner, and the run is escalated with `compensation_failed`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from journal import services as journal
from journal.models import Intent, IntentStatus, JournalEvent, OutcomeReason, Run, RunStatus
from journal.selectors import compensation_intent_ids
from journal.tool_errors import ToolError
from journal.transitions import run_touch, run_transition
from journal.why import RunWhy, why
from observability import counters as metrics
from observability.context import log_context
from tools import services as tools

from .mapping import MappingError, compensation_args
from .models import (
    CatalogueEntry,
    Compensation,
    CompensationStatus,
    DeadLetter,
    DroppedSend,
    Reversibility,
)
from .reversibility import reversibility_now
from .selectors import catalogue_entry_for, undo_is_sent

FINISHED = (
    CompensationStatus.DONE,
    CompensationStatus.PARTIAL,
    CompensationStatus.DEAD_LETTERED,
    CompensationStatus.NOT_POSSIBLE,
)
RETRYABLE = ("transient",)

logger = logging.getLogger(__name__)


class CompensationPending(Exception):
    """The compensation's own call is in doubt (ambiguous, or found open after a worker died):
    it waits for reconciliation to settle its intent; try again later."""


class CompensationRetry(Exception):
    """A transient failure within the retry budget: try again later."""


class SendDropped(Exception):
    """The worker came to send and found the state that queued the send gone (a person resolved
    the dead letter since): nothing was sent, a DroppedSend row says so."""


def _copied(original: Intent) -> dict[str, Any]:
    """What a compensation copies of its original, for the queue's and the insights page's reads."""
    run = original.run
    return {"run_id": run.pk, "tenant_id": run.tenant_id, "task_type": run.task_type, "tool": original.tool}


def compensation_request(*, original: Intent, actor: journal.Actor) -> Compensation:
    """Ask for one performed step to be undone. Two requests (two clicks, two workers) get the
    same compensation; a step nothing undoes gets a `not_possible` record saying why."""
    if original.status != IntentStatus.PERFORMED:
        raise journal.Conflict(
            f"{original.step_id} is {original.status}; only a performed step is undone", field="status"
        )
    existing = Compensation.objects.filter(original=original).order_by("-id").first()
    if existing is not None:
        return existing
    entry = catalogue_entry_for(tenant_id=original.run.tenant_id, tool=original.tool)
    if entry is None or entry.reversibility == Reversibility.NONE or not entry.compensating_tool:
        # The catalogue's own note on why, when it has one; blank: nothing undoes the tool, which
        # the handover says in its words.
        why = entry.staff_notes if entry and entry.staff_notes else ""
        with transaction.atomic():
            run_touch(run_id=original.run_id)
            return Compensation.objects.create(
                original=original,
                **_copied(original),
                status=CompensationStatus.NOT_POSSIBLE,
                not_undone=why,
            )
    try:
        with transaction.atomic():
            return Compensation.objects.create(original=original, **_copied(original))
    except IntegrityError:
        return Compensation.objects.exclude(status=CompensationStatus.NOT_POSSIBLE).get(original=original)


def compensation_claim_stalled(*, quiet_for: timedelta, limit: int = 500) -> list[int]:
    """Claim, to be queued again, each pending compensation that no worker has touched for
    `quiet_for`: its message was lost (the broker restarted empty or was flushed, a whole worker
    died and its message waits out the visibility timeout). The row, not the broker, says what
    is owed; the caller (compensations.tasks.requeue_stalled) queues the ids returned.

    Each row is claimed with a compare-and-swap on updated_at, so two beats requeue it once, and
    the next pass leaves it alone while this message is on its way. A message that turns out to
    be a second one is harmless: execution finds the compensation's intent by its key."""
    now = timezone.now()
    cutoff = now - quiet_for
    stalled = Compensation.objects.filter(status=CompensationStatus.PENDING, updated_at__lt=cutoff)
    requeued = []
    for pk in stalled.order_by("updated_at").values_list("pk", flat=True)[:limit]:
        if stalled.filter(pk=pk).update(updated_at=now):
            requeued.append(pk)
    return requeued


def compensation_execute(*, compensation: Compensation, actor: journal.Actor) -> Compensation:
    """Run one compensation through the journal. Idempotent: a finished one is returned as is;
    a redelivered one finds its own intent by key and does not send again."""
    compensation = Compensation.objects.select_related("original__run__tenant", "intent").get(
        pk=compensation.pk
    )
    if compensation.status in FINISHED:
        return compensation
    original = compensation.original
    with log_context(run_id=original.run_id, step_id=original.step_id, compensation_id=compensation.pk):
        try:
            done = _execute(compensation=compensation, actor=actor)
        except SendDropped as dropped:
            logger.warning("compensation send dropped: %s", dropped)
            return Compensation.objects.get(pk=compensation.pk)
        except CompensationRetry:
            metrics.compensation_executed("retry")
            logger.info("compensation will be retried (transient failure)")
            raise
        except CompensationPending:
            metrics.compensation_executed("pending")
            logger.info("compensation in doubt: waiting for reconciliation")
            raise
        metrics.compensation_executed(done.status)
        log = logger.error if done.status == CompensationStatus.DEAD_LETTERED else logger.info
        log("compensation %s: %s", done.status, done.last_error or done.not_undone or "undone")
    return done


def _execute(*, compensation: Compensation, actor: journal.Actor) -> Compensation:
    original = compensation.original
    entry = catalogue_entry_for(tenant_id=original.run.tenant_id, tool=original.tool)
    if entry is None:
        raise CatalogueEntry.DoesNotExist(f"no catalogue entry for {original.tool}")
    try:
        args = compensation_args(entry, original.args, original.receipt)
    except MappingError as exc:
        # Nothing was sent and no attempt will ever build the call (a step a person marked
        # performed has no receipt): a person finishes it, from the dead letter.
        return _dead_letter(
            compensation=compensation, error_class="invalid_input", error=str(exc), actor=actor
        )
    run = original.run
    if not compensation_claim_send(compensation=compensation):
        raise SendDropped(f"round {compensation.retry_round}")
    try:
        intent = _send_compensation(
            compensation=compensation, run=run, tool=entry.compensating_tool, args=args, actor=actor
        )
    except journal.IntentInDoubt as doubt:
        _link(compensation, doubt.intent)
        raise CompensationPending(str(doubt)) from doubt
    except ToolError as exc:
        return _after_tool_error(
            compensation=compensation, run=run, entry=entry, args=args, exc=exc, actor=actor
        )
    _link(compensation, intent)
    if intent.status != IntentStatus.PERFORMED:
        # Replayed from an earlier, failed attempt of this very key.
        return _dead_letter(
            compensation=compensation,
            error_class=intent.error_class or "bug",
            error=intent.outcome_summary,
            actor=actor,
        )
    partial, loss = _not_undone(entry, original, intent)
    return _record_undone(compensation=compensation, run=run, partial=partial, loss=loss)


def _after_tool_error(
    *,
    compensation: Compensation,
    run: Run,
    entry: CatalogueEntry,
    args: dict[str, Any],
    exc: ToolError,
    actor: journal.Actor,
) -> Compensation:
    """The compensating call failed: wait for reconciliation if it may have happened, retry a
    transient failure while attempts remain, else dead-letter it for a person."""
    intent_in_error = _compensation_intent(run, entry.compensating_tool, args, compensation.retry_round)
    if intent_in_error is not None:
        _link(compensation, intent_in_error)
    if exc.error_class == "ambiguous":
        raise CompensationPending(exc.message) from exc
    attempts = Compensation.objects.values_list("attempts", flat=True).get(pk=compensation.pk)
    if exc.error_class in RETRYABLE and attempts < settings.SEAM_COMPENSATION_MAX_ATTEMPTS:
        Compensation.objects.filter(pk=compensation.pk).update(
            last_error=f"{exc.error_class}: {exc.message}", sending_since=None
        )
        raise CompensationRetry(exc.message) from exc
    return _dead_letter(
        compensation=compensation, error_class=exc.error_class, error=exc.message, actor=actor
    )


def _record_undone(*, compensation: Compensation, run: Run, partial: bool, loss: str) -> Compensation:
    """The compensating call was performed: the undo is done (or partial, with what was not
    undone where the catalogue or the tool says), an open dead letter for it is answered (no
    person resolved it, no note: the handover says a retry did), and the run's page moves. A
    letter a person resolved keeps their resolution: only an open one is answered here."""
    with journal.durable():
        # The letter first, then the compensation: the order a person's action locks them in.
        _lock_letter(compensation)
        Compensation.objects.filter(pk=compensation.pk).update(
            status=CompensationStatus.PARTIAL if partial else CompensationStatus.DONE,
            not_undone=loss,
            last_error="",
            sending_since=None,
        )
        DeadLetter.objects.filter(compensation=compensation, resolved_at__isnull=True).update(
            resolved_at=timezone.now(), version=F("version") + 1
        )
        # The run's page shows the undo's status: its state token must move with it.
        run_touch(run_id=run.pk)
    return Compensation.objects.get(pk=compensation.pk)


def _lock_letter(compensation: Compensation) -> DeadLetter | None:
    return DeadLetter.objects.select_for_update(of=("self",)).filter(compensation_id=compensation.pk).first()


def compensation_claim_send(*, compensation: Compensation) -> bool:
    """Right before a worker sends a compensating call: under the dead letter's and the
    compensation's row locks, is the compensation still in the state that queued this send
    (pending, in the same retry round) and has no person resolved its dead letter since? Then
    the send is claimed (attempts, sending_since, the letter's version) and True is returned.

    Otherwise the send is dropped: nothing goes out, the letter is left exactly as the person
    left it, and a DroppedSend row (with who resolved it) records that the worker gave way."""
    now = timezone.now()
    with journal.durable():
        letter = _lock_letter(compensation)
        row = Compensation.objects.select_for_update(of=("self",)).get(pk=compensation.pk)
        resolved_by = letter.resolved_by_id if letter is not None and letter.resolved_by_person else None
        still_owed = row.status == CompensationStatus.PENDING and row.retry_round == compensation.retry_round
        if still_owed and resolved_by is None:
            # Touching updated_at says "a worker has this in hand" to compensation_claim_stalled.
            Compensation.objects.filter(pk=row.pk).update(
                attempts=F("attempts") + 1, updated_at=now, sending_since=now
            )
            if letter is not None:
                DeadLetter.objects.filter(pk=letter.pk).update(version=F("version") + 1)
            return True
        if still_owed:
            # Owed, but a person resolved its letter: back to the state their resolution left.
            Compensation.objects.filter(pk=row.pk).update(
                status=CompensationStatus.DEAD_LETTERED, sending_since=None
            )
        reason = "resolved_by_person" if resolved_by is not None else f"no_longer_owed:{row.status}"
        DroppedSend.objects.create(
            compensation=row, retry_round=compensation.retry_round, resolved_by_id=resolved_by, reason=reason
        )
        if letter is not None:
            DeadLetter.objects.filter(pk=letter.pk).update(version=F("version") + 1)
        run_touch(run_id=compensation.original.run_id, at=now)
    return False


STEP_SLOT_ATTEMPTS = 5


def _send_compensation(
    *, compensation: Compensation, run: Run, tool: str, args: dict[str, Any], actor: journal.Actor
) -> Intent:
    """The compensating call through the journal, under its own key, in the run's next turn.

    A redelivered task finds its intent by key: performed or failed, the stored outcome comes
    back; proved `not_performed` by reconciliation (the worker died before the call left), it is
    re-admitted and sent with the same key. Two compensations of one run at once may both pick
    the same next turn; the one that loses the step slot takes the turn after."""
    for _ in range(STEP_SLOT_ATTEMPTS):
        turn = _next_turn(run)
        try:
            performed = tools.tool_perform(
                run=run,
                tool=tool,
                args=args,
                turn=turn,
                occurrence=compensation.retry_round,
                actor=actor,
                compensation=True,
            )
        except journal.StepTaken:
            continue  # another compensation of this run took the turn: take the next
        if performed.intent.status == IntentStatus.NOT_PERFORMED:
            return tools.tool_resend(intent=performed.intent, actor=actor)
        return performed.intent
    raise journal.Conflict(f"no free turn for {tool} after {STEP_SLOT_ATTEMPTS} attempts", field="step_id")


def _next_turn(run: Run) -> int:
    return (run.intents.aggregate(last=Max("turn"))["last"] or 0) + 1


def _not_undone(entry: CatalogueEntry, original: Intent, undo: Intent) -> tuple[bool, str]:
    """Whether the undo left something standing, and what, in the catalogue's and the tool's
    words ('' when neither says: the handover says "not everything"). The catalogue's grade says
    so first: a `partial` entry always loses its `loss`, a `reversible_until` one does once its
    deadline has passed when the undo was sent. The compensating tool's own receipt may say so
    too (a provider that carried the undo out only at a cost), in its tool's words
    (tools.receipt_loss): the engine names no provider's fields."""
    graded = reversibility_now(entry, original.receipt, undo.intended_at)
    reported = tools.receipt_loss(tool=undo.tool, receipt=undo.receipt)
    if not (graded.loses or reported):
        return False, ""
    return True, ": ".join(part for part in (entry.loss, reported) if part)


def _compensation_intent(run: Run, tool: str, args: dict[str, Any], occurrence: int) -> Intent | None:
    return run.intents.filter(tool=tool, args=args, occurrence=occurrence).order_by("-id").first()


def _link(compensation: Compensation, intent: Intent) -> None:
    # A retried compensation (a new round) links its new intent in place of the failed one.
    Compensation.objects.filter(pk=compensation.pk).exclude(intent=intent).update(intent=intent)


def _owner_for(run: Run) -> Any:
    users = get_user_model().objects
    name = getattr(settings, "SEAM_DEAD_LETTER_DEFAULT_OWNER", "")
    if name:
        owner = users.filter(username=name).first()
        if owner is not None:
            return owner
    return (
        users.filter(groups__name="team_lead", membership__tenant=run.tenant, is_active=True)
        .order_by("pk")
        .first()
        or users.filter(is_superuser=True, is_active=True).order_by("pk").first()
    )


def _dead_letter(
    *, compensation: Compensation, error_class: str, error: str, actor: journal.Actor
) -> Compensation:
    run = compensation.original.run
    now = timezone.now()
    failed = why(RunWhy.UNDO_FAILED, tool=compensation.original.tool, error_class=error_class, error=error)
    with journal.durable():
        letter = _lock_letter(compensation)
        updated = (
            Compensation.objects.filter(pk=compensation.pk)
            .exclude(status__in=FINISHED)
            .update(
                status=CompensationStatus.DEAD_LETTERED,
                last_error=f"{error_class}: {error}",
                sending_since=None,
            )
        )
        if not updated:
            return Compensation.objects.get(pk=compensation.pk)
        run_touch(run_id=run.pk, at=now)
        if letter is not None and letter.resolved_by_person:
            # A person resolved the letter: their decision (who, when, note) stands. The failure
            # is on the compensation; the letter is neither reopened nor rewritten.
            DeadLetter.objects.filter(pk=letter.pk).update(version=F("version") + 1)
            return Compensation.objects.get(pk=compensation.pk)
        _letter_open(compensation=compensation, letter=letter, error_class=error_class, error=error)
        # The run stays (or becomes) escalated, now for this reason; a cancelled run stays
        # cancelled, its dead letter (with an owner) being the person's call to act.
        journal.run_hand_over(
            run=run,
            reason=OutcomeReason.COMPENSATION_FAILED,
            why=failed,
            actor=actor,
            from_statuses=(
                RunStatus.RUNNING,
                RunStatus.ESCALATED,
                RunStatus.COMPENSATED,
                RunStatus.COMPLETED,
            ),
            at=now,
        )
    return Compensation.objects.get(pk=compensation.pk)


def _letter_open(
    *, compensation: Compensation, letter: DeadLetter | None, error_class: str, error: str
) -> None:
    """Open the compensation's dead letter, or reopen it with the new error, keeping its owner
    (a retry failing again). Only a letter no person resolved reaches here."""
    attempts = Compensation.objects.values_list("attempts", flat=True).get(pk=compensation.pk)
    if letter is None:
        DeadLetter.objects.create(
            compensation=compensation,
            error_class=error_class,
            error=error,
            attempts=attempts,
            owner=_owner_for(compensation.original.run),
        )
        return
    DeadLetter.objects.filter(pk=letter.pk, resolved_by__isnull=True).update(
        error_class=error_class,
        error=error,
        attempts=attempts,
        resolved_at=None,
        version=F("version") + 1,
    )


@dataclass
class RunCompensation:
    undone: list[str] = field(default_factory=list)
    # (tool, what still stands in the catalogue's or tool's words, or "")
    partial: list[tuple[str, str]] = field(default_factory=list)
    # (tool, the catalogue's note on why nothing undoes it, or "")
    not_undone: list[tuple[str, str]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    # Compensations requested but left for their own tasks (beyond SEAM_STEPS_PER_PASS): the
    # caller queues compensations.compensate_step for each id once this pass is committed.
    queued: list[int] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Everything the run did was fully undone: nothing partial, impossible, failed or pending."""
        return not (self.partial or self.not_undone or self.failed or self.pending)

    def facts(self) -> dict[str, Any]:
        """What undoing came to, as a run's Why carries it (`undo`) and handover.words says it."""
        return {
            "undone": list(self.undone),
            "partial": [{"tool": tool, "loss": loss} for tool, loss in self.partial],
            "not_undone": [{"tool": tool, "why": note} for tool, note in self.not_undone],
            "failed": list(self.failed),
            "pending": list(self.pending),
        }


def run_compensate(*, run: Run, actor: journal.Actor) -> RunCompensation:
    """Undo the run's performed steps in reverse order, each through compensation_execute, and
    say what could not be undone. Compensation intents themselves are never compensated.

    At most settings.SEAM_STEPS_PER_PASS undos are sent here; the rest are requested and left
    pending in `queued`, each for a task of its own, so one long run never holds a worker."""
    result = RunCompensation()
    steps = list(
        run.intents.filter(status=IntentStatus.PERFORMED)
        .exclude(pk__in=compensation_intent_ids(run=run))
        .order_by("-intended_at", "-id")
    )
    sent = 0
    for step in steps:
        compensation = compensation_request(original=step, actor=actor)
        if compensation.status == CompensationStatus.NOT_POSSIBLE:
            result.not_undone.append((step.tool, compensation.not_undone))
            continue
        if undo_is_sent(compensation):
            if sent >= settings.SEAM_STEPS_PER_PASS:
                result.pending.append(step.tool)
                result.queued.append(compensation.pk)
                continue
            sent += 1
        try:
            done = compensation_execute(compensation=compensation, actor=actor)
        except (CompensationPending, CompensationRetry):
            result.pending.append(step.tool)
            continue
        if done.status == CompensationStatus.DONE:
            result.undone.append(step.tool)
        elif done.status == CompensationStatus.PARTIAL:
            result.partial.append((step.tool, done.not_undone))
        else:
            result.failed.append(step.tool)
    return result


def run_undo(*, run: Run, actor: journal.Actor) -> RunCompensation:
    """A person's "compensate the run": undo every performed step (run_compensate) and record
    what came of it. A run whose every write is undone is marked `compensated`; its escalation
    stays open until a person resolves it (the customer's request was still not done)."""
    result = run_compensate(run=run, actor=actor)
    if result.pending:
        return result  # the task tries again once the steps in doubt are settled
    now = timezone.now()
    data = {"undo": result.facts(), "complete": result.complete}
    with journal.durable():
        # Only an escalated run becomes `compensated`; any other still gets the event saying what
        # was undone.
        compensated = False
        if result.complete:
            compensated = run_transition(
                run=run,
                source=RunStatus.ESCALATED,
                target=RunStatus.COMPENSATED,
                actor=actor,
                event=JournalEvent.Kind.RUN_COMPENSATED,
                data=data,
                at=now,
            ).moved
        if not compensated:
            journal.event_record(
                run=run, kind=JournalEvent.Kind.RUN_COMPENSATED, actor=actor, at=now, data=data
            )
    return result
