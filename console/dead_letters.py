"""What people do with the dead-letter queue: take a failed compensation, hand it to someone,
retry it, or resolve it by hand. Each action checks the person's role and tenant, writes its
audit row in the same transaction, and queues any retry after commit (console.actions explains
the pattern; these act on a dead letter rather than a run)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from audit.chain import audit_record
from audit.models import AuditAction
from compensations.models import Compensation, CompensationStatus, DeadLetter
from compensations.tasks import compensate_step
from journal import services as journal

from .actions import ACT, MAX_NOTE_CHARS, ActionRefused, StaffContext, staff_member

ASSIGN = "compensations.assign_deadletter"


class LetterChanged(journal.Conflict):
    """The letter (or its compensation) moved after the person's page was drawn: refused, with
    what it is now, never applied to a state they did not see."""

    def __init__(self, letter: DeadLetter, changes: list[str]) -> None:
        super().__init__(
            "this dead letter changed since you loaded it: " + "; ".join(changes or ["it was updated"]),
            field="state",
        )
        self.letter = letter
        self.changes = changes


def _when(at: Any) -> str:
    return f"{timezone.localtime(at):%Y-%m-%d %H:%M %Z}"


def letter_changes(letter: DeadLetter) -> list[str]:
    """In words, what the letter and its compensation are now: what a stale page did not show."""
    compensation = letter.compensation
    changes = []
    if letter.resolved_at is not None:
        who = letter.resolved_by.get_username() if letter.resolved_by else "the retry, which succeeded"
        note = f": {letter.resolution_note}" if letter.resolution_note else ""
        changes.append(f"resolved by {who} at {_when(letter.resolved_at)}{note}")
    if compensation.sending_since is not None:
        changes.append(f"its retry is being sent (since {_when(compensation.sending_since)})")
    elif compensation.status == CompensationStatus.PENDING:
        changes.append(f"a retry (round {compensation.retry_round}) is queued")
    elif compensation.status == CompensationStatus.DEAD_LETTERED and letter.resolved_at is None:
        changes.append(f"it failed: {letter.error}")
    elif compensation.status in (CompensationStatus.DONE, CompensationStatus.PARTIAL):
        changes.append(f"the undo is now {compensation.get_status_display().lower()}")
    changes.append(f"owner: {letter.owner.get_username() if letter.owner else 'nobody'}")
    return changes


@contextlib.contextmanager
def _acting_on(
    ctx: StaffContext, dead_letter_id: Any, seen_state: str, permission: str = ACT
) -> Iterator[DeadLetter]:
    """The letter and its compensation, locked (in that order, as the workers lock them) for the
    rest of the transaction, after checking who acts, on which letter, and what they saw. A
    resolved letter is refused first (409, saying who resolved it), then a missing state, then
    a stale one."""
    if not ctx.user.has_perm(permission):
        raise PermissionDenied(f"your role does not allow this ({permission})")
    with journal.durable():
        letter = (
            DeadLetter.objects.select_for_update(of=("self",))
            .select_related("compensation__original__run", "owner", "resolved_by")
            .filter(pk=dead_letter_id, compensation__original__run__tenant=ctx.tenant)
            .first()
        )
        if letter is None:
            raise journal.NotFound("no such dead letter", field="dead_letter_id")
        # The compensation as it is now, locked: a worker claims its send under this same lock.
        letter.compensation = (
            Compensation.objects.select_for_update(of=("self",))
            .select_related("original__run")
            .get(pk=letter.compensation_id)
        )
        _refuse_if_resolved(letter)
        if not seen_state:
            raise journal.InvalidInput(
                "state is required: the state of the dead letter you saw", field="state"
            )
        if seen_state != letter.state_token:
            raise LetterChanged(letter, letter_changes(letter))
        yield letter


def _moved(letter: DeadLetter, **changes: Any) -> None:
    """A person's change to the letter: its version moves with it."""
    DeadLetter.objects.filter(pk=letter.pk).update(version=F("version") + 1, **changes)


def _audit(ctx: StaffContext, letter: DeadLetter, action: str, **fields: Any) -> None:
    original = letter.compensation.original
    audit_record(
        user=ctx.user,
        tenant=ctx.tenant,
        action=action,
        run=original.run,
        step_id=original.step_id,
        request_id=ctx.request_id,
        **fields,
    )


def _refuse_if_resolved(letter: DeadLetter) -> None:
    if letter.resolved_at is not None:
        raise ActionRefused(
            "this dead letter is already resolved: " + letter_changes(letter)[0], field="dead_letter_id"
        )


def dead_letter_take(ctx: StaffContext, *, dead_letter_id: Any, state: str) -> DeadLetter:
    with _acting_on(ctx, dead_letter_id, state) as letter:
        previous = letter.owner.get_username() if letter.owner else None
        _moved(letter, owner=ctx.user)
        _audit(
            ctx,
            letter,
            AuditAction.DEAD_LETTER_TAKE,
            old={"dead_letter": letter.pk, "owner": previous},
            new={"dead_letter": letter.pk, "owner": ctx.user.get_username()},
        )
    return letter


def dead_letter_assign(ctx: StaffContext, *, dead_letter_id: Any, owner_id: int, state: str) -> DeadLetter:
    """A team lead hands a dead letter to a person of the same tenant who may act on runs."""
    with _acting_on(ctx, dead_letter_id, state, permission=ASSIGN) as letter:
        owner = staff_member(ctx.tenant, owner_id, field="owner")
        previous = letter.owner.get_username() if letter.owner else None
        _moved(letter, owner=owner)
        _audit(
            ctx,
            letter,
            AuditAction.DEAD_LETTER_ASSIGN,
            old={"dead_letter": letter.pk, "owner": previous},
            new={"dead_letter": letter.pk, "owner": owner.get_username()},
        )
    return letter


def dead_letter_retry(ctx: StaffContext, *, dead_letter_id: Any, state: str, note: str = "") -> Compensation:
    """Send the compensation again, as a new round with a new key (the failed call's key would
    only replay its failure). The letter closes itself if the retry succeeds; if it fails again
    it is reopened with the new error, keeping its owner. The send itself is a worker's: it is
    queued after commit, and the worker drops it if the letter is resolved before it is sent."""

    with _acting_on(ctx, dead_letter_id, state) as letter:
        note = journal.clean_text(note, field="note", limit=MAX_NOTE_CHARS)
        compensation = letter.compensation
        retried = Compensation.objects.filter(
            pk=compensation.pk, status=CompensationStatus.DEAD_LETTERED
        ).update(
            status=CompensationStatus.PENDING,
            attempts=0,
            last_error="",
            retry_round=F("retry_round") + 1,
        )
        if not retried:
            raise ActionRefused("this compensation is already being retried", field="dead_letter_id")
        _moved(letter)
        _audit(
            ctx,
            letter,
            AuditAction.DEAD_LETTER_RETRY,
            old={"dead_letter": letter.pk, "compensation_status": compensation.status},
            new={
                "dead_letter": letter.pk,
                "compensation_status": CompensationStatus.PENDING,
                "retry_round": compensation.retry_round + 1,
            },
            note=note,
        )
        transaction.on_commit(lambda: compensate_step.delay(compensation.pk))
    return Compensation.objects.get(pk=compensation.pk)


def dead_letter_resolve(ctx: StaffContext, *, dead_letter_id: Any, note: str, state: str) -> DeadLetter:
    """Close the letter: a person undid the effect by hand, or decided it stands. Note required.

    A retry queued and not yet sent is withdrawn (the compensation goes back to the state the
    letter was opened in, and the worker drops the send when it comes to it); a retry already on
    its way cannot be called back, so resolving waits until it has answered (409)."""
    with _acting_on(ctx, dead_letter_id, state) as letter:
        # Checked inside: who may act, and on which letter, is said before what is missing.
        note = journal.clean_text(note, field="note", limit=MAX_NOTE_CHARS, required=True)
        compensation = letter.compensation
        if compensation.sending_since is not None:
            raise ActionRefused(
                f"its retry is being sent (since {_when(compensation.sending_since)}) and cannot be "
                "called back: resolve it once it has answered; this page updates when it does",
                field="dead_letter_id",
            )
        withdrawn = compensation.status == CompensationStatus.PENDING
        if withdrawn:
            Compensation.objects.filter(pk=compensation.pk).update(status=CompensationStatus.DEAD_LETTERED)
        _moved(letter, resolved_at=timezone.now(), resolved_by=ctx.user, resolution_note=note)
        _audit(
            ctx,
            letter,
            AuditAction.DEAD_LETTER_RESOLVE,
            old={"dead_letter": letter.pk, "resolved": False}
            | ({"compensation_status": CompensationStatus.PENDING} if withdrawn else {}),
            # A queued retry it withdrew is said in the record of the decision.
            new={"dead_letter": letter.pk, "resolved": True}
            | ({"compensation_status": CompensationStatus.DEAD_LETTERED} if withdrawn else {}),
            note=note,
        )
    return DeadLetter.objects.get(pk=letter.pk)


def retry_result_words(compensation: Compensation) -> str:
    """What a retry came to, as far as it is known when the page answers: sent and failed again
    (with the provider's error), sent and done, or queued for a worker (the usual case: the page
    updates when the worker has sent it)."""
    status = compensation.status
    if status == CompensationStatus.DEAD_LETTERED:
        letter = DeadLetter.objects.filter(compensation=compensation).first()
        error = letter.error if letter is not None else compensation.last_error
        return f"Retry failed again: {error}"
    if status in (CompensationStatus.DONE, CompensationStatus.PARTIAL):
        return f"Retried: the undo is {compensation.get_status_display().lower()}."
    return ""


def letters_state_token(letters: Any) -> str:
    """One token for a page of letters: it moves when a letter is added, leaves, or moves
    (its version, its compensation's status, attempts or round), so a poll answers 204 until
    then."""
    rows = letters.values_list(
        "pk", "version", "compensation__status", "compensation__attempts", "compensation__retry_round"
    )
    return hashlib.sha256(repr(list(rows)).encode()).hexdigest()[:20]
