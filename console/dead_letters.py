"""What people do with the dead-letter queue: take a failed compensation, hand it to someone,
retry it, or resolve it by hand. Each action checks the person's role and tenant, writes its
audit row in the same transaction, and queues any retry after commit (console.actions explains
the pattern; these act on a dead letter rather than a run)."""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def _acting_on(ctx: StaffContext, dead_letter_id: Any, permission: str = ACT) -> Iterator[DeadLetter]:
    if not ctx.user.has_perm(permission):
        raise PermissionDenied(f"your role does not allow this ({permission})")
    with journal.durable():
        letter = (
            DeadLetter.objects.select_for_update(of=("self",))
            .select_related("compensation__original__run", "owner")
            .filter(pk=dead_letter_id, compensation__original__run__tenant=ctx.tenant)
            .first()
        )
        if letter is None:
            raise journal.NotFound("no such dead letter", field="dead_letter_id")
        yield letter


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
        raise ActionRefused("this dead letter is already resolved", field="dead_letter_id")


def dead_letter_take(ctx: StaffContext, *, dead_letter_id: Any) -> DeadLetter:
    with _acting_on(ctx, dead_letter_id) as letter:
        _refuse_if_resolved(letter)
        previous = letter.owner.get_username() if letter.owner else None
        DeadLetter.objects.filter(pk=letter.pk).update(owner=ctx.user)
        _audit(
            ctx,
            letter,
            AuditAction.DEAD_LETTER_TAKE,
            old={"dead_letter": letter.pk, "owner": previous},
            new={"dead_letter": letter.pk, "owner": ctx.user.get_username()},
        )
    return letter


def dead_letter_assign(ctx: StaffContext, *, dead_letter_id: Any, owner_id: int) -> DeadLetter:
    """A team lead hands a dead letter to a person of the same tenant who may act on runs."""
    with _acting_on(ctx, dead_letter_id, permission=ASSIGN) as letter:
        _refuse_if_resolved(letter)
        owner = staff_member(ctx.tenant, owner_id, field="owner")
        previous = letter.owner.get_username() if letter.owner else None
        DeadLetter.objects.filter(pk=letter.pk).update(owner=owner)
        _audit(
            ctx,
            letter,
            AuditAction.DEAD_LETTER_ASSIGN,
            old={"dead_letter": letter.pk, "owner": previous},
            new={"dead_letter": letter.pk, "owner": owner.get_username()},
        )
    return letter


def dead_letter_retry(ctx: StaffContext, *, dead_letter_id: Any, note: str = "") -> Compensation:
    """Send the compensation again, as a new round with a new key (the failed call's key would
    only replay its failure). The letter closes itself if the retry succeeds; if it fails again
    it is reopened with the new error, keeping its owner."""

    with _acting_on(ctx, dead_letter_id) as letter:
        note = journal.clean_text(note, field="note", limit=MAX_NOTE_CHARS)
        _refuse_if_resolved(letter)
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
    return compensation


def dead_letter_resolve(ctx: StaffContext, *, dead_letter_id: Any, note: str) -> DeadLetter:
    """Close the letter: a person undid the effect by hand, or decided it stands. Note required."""
    with _acting_on(ctx, dead_letter_id) as letter:
        # Checked inside: who may act, and on which letter, is said before what is missing.
        note = journal.clean_text(note, field="note", limit=MAX_NOTE_CHARS, required=True)
        _refuse_if_resolved(letter)
        DeadLetter.objects.filter(pk=letter.pk).update(
            resolved_at=timezone.now(), resolved_by=ctx.user, resolution_note=note
        )
        _audit(
            ctx,
            letter,
            AuditAction.DEAD_LETTER_RESOLVE,
            old={"dead_letter": letter.pk, "resolved": False},
            new={"dead_letter": letter.pk, "resolved": True},
            note=note,
        )
    return letter
