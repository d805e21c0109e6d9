"""How far a performed step can still be taken back, now: a value read from the step's catalogue
entry (its grade, compensations.models.Reversibility) and its receipt (a deadline field).

    yes       the compensating tool undoes it completely
    until     completely, until a condition ("until collection") or a deadline read from the
              receipt; `loss` is what undoing after the deadline costs, if it still can
    partial   undoing it always loses something: `loss` says what (an `until` step past its
              deadline is partial when something is still undone at a cost)
    none      nothing undoes it

A value, not words: the console says it (handover.words.reversibility_sentence), and the
handover's API carries the fields beside that sentence. `condition` and `loss` are the catalogue
entry's own words, which a tenant writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

from django.db import models
from django.utils.dateparse import parse_datetime

from .models import Reversibility


class ReversibilityKind(models.TextChoices):
    YES = "yes", "Reversible"
    UNTIL = "until", "Reversible until a condition or deadline"
    PARTIAL = "partial", "Partially reversible"
    NONE = "none", "Not reversible"


@dataclass(frozen=True)
class ReversibilityNow:
    """How far a performed step can be taken back now: yes, until a condition or deadline,
    partially (losing `loss`), or not at all."""

    kind: ReversibilityKind
    condition: str = ""  # until: the condition in words, "until collection"
    deadline: datetime | None = None  # until: the receipt's deadline; partial: the one that passed
    loss: str = ""  # partial: what is lost; until: what undoing after the deadline loses

    @classmethod
    def yes(cls) -> Self:
        return cls(ReversibilityKind.YES)

    @classmethod
    def none(cls) -> Self:
        return cls(ReversibilityKind.NONE)

    @classmethod
    def until(cls, *, condition: str = "", deadline: datetime | None = None, loss: str = "") -> Self:
        return cls(ReversibilityKind.UNTIL, condition=condition, deadline=deadline, loss=loss)

    @classmethod
    def partial(cls, *, loss: str, deadline: datetime | None = None) -> Self:
        return cls(ReversibilityKind.PARTIAL, loss=loss, deadline=deadline)

    @property
    def can_undo(self) -> bool:
        """Whether a compensating call can still be sent (completely or at a loss)."""
        return self.kind != ReversibilityKind.NONE

    @property
    def loses(self) -> bool:
        """Undoing it now loses something: a person must be told before the click."""
        return self.kind == ReversibilityKind.PARTIAL

    @property
    def conditional(self) -> bool:
        """Reversible only partly or for a while: the words matter beside the undo."""
        return self.kind in (ReversibilityKind.UNTIL, ReversibilityKind.PARTIAL)


def _deadline_of(entry: Any, receipt: dict[str, Any]) -> datetime | None:
    if not entry.deadline_field:
        return None
    raw = receipt.get(entry.deadline_field)
    return parse_datetime(raw) if isinstance(raw, str) else None


def may_undo(entry: Any) -> bool:
    """Whether some step of `entry`'s tool may be undone: the catalogue has an entry for it, not
    graded `none`, with a compensating tool. When not, no step of the tool can be, whatever its
    receipt says, and nothing of the step need be read to know it."""
    return entry is not None and entry.reversibility != Reversibility.NONE and bool(entry.compensating_tool)


def reads_receipt(entry: Any) -> bool:
    """Whether reversibility_now's answer for a step of `entry`'s tool depends on the step (its
    receipt's deadline): only for an undoable `reversible_until` grade. Otherwise every step of
    the tool gets the same answer, which a long run's handover works out once."""
    return may_undo(entry) and entry.reversibility not in (Reversibility.REVERSIBLE, Reversibility.PARTIAL)


def reversibility_now(entry: Any, receipt: dict[str, Any] | None, now: datetime) -> ReversibilityNow:
    """How far a step of `entry`'s tool, with this receipt, can be taken back at `now`. No entry,
    a `none` grade or no compensating tool: none (may_undo). A deadline that passed leaves the
    step partial when undoing it late still works at a loss, else none."""
    if not may_undo(entry):
        return ReversibilityNow.none()
    if entry.reversibility == Reversibility.REVERSIBLE:
        return ReversibilityNow.yes()
    if entry.reversibility == Reversibility.PARTIAL:
        return ReversibilityNow.partial(loss=entry.loss)
    deadline = _deadline_of(entry, receipt or {})
    if deadline is not None:
        if deadline <= now:
            return (
                ReversibilityNow.partial(loss=entry.loss, deadline=deadline)
                if entry.loss
                else ReversibilityNow.none()
            )
        return ReversibilityNow.until(condition=entry.until_condition, deadline=deadline, loss=entry.loss)
    if entry.until_condition:
        return ReversibilityNow.until(condition=entry.until_condition)
    return ReversibilityNow.yes()
