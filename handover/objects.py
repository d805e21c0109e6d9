"""The handover's objects: what the run page renders and the handover's API serialises
(agent_api.handover_schema builds its serializer from their fields). A field's `described(...)`
annotation is its description there; `__json_properties__` names properties the JSON carries too.
Their sentences come from handover.words."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, ClassVar

from django.db import models

from compensations import reversibility as domain
from compensations.models import CompensationStatus
from fanout.models import Outcome as FanOutOutcome
from journal.channels import CustomerChannel
from journal.models import IntentStatus, RunStatus

from . import words
from .codes import NextActionCode

HANDOVER_VERSION = "1"


@dataclass(frozen=True)
class FieldDoc:
    """A field's description (and DRF field options) for the published schema:
    `detail: Annotated[str, described("The receipt in words.")]`."""

    options: dict[str, Any]


def described(help_text: str = "", **drf: Any) -> FieldDoc:
    return FieldDoc({"help_text": help_text, **drf} if help_text else drf)


# --- the objects --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReversibilityNow(domain.ReversibilityNow):
    """compensations.reversibility's value with its words (handover.words): the handover's API
    carries the fields and the sentence, and, for clients written before this value existed,
    `flag_or_sentence` (its `reversible`): true, false, or the sentence."""

    __json_properties__: ClassVar[tuple[str, ...]] = ("sentence",)

    @classmethod
    def of(cls, value: domain.ReversibilityNow) -> ReversibilityNow:
        return cls(value.kind, condition=value.condition, deadline=value.deadline, loss=value.loss)

    @property
    def sentence(self) -> str:
        """In words, as the run page and the confirmations say it."""
        return words.reversibility_sentence(self)

    @property
    def flag_or_sentence(self) -> bool | str:
        """The handover's `reversible` as it always was: true, false, or the sentence."""
        if self.kind == domain.ReversibilityKind.YES:
            return True
        if self.kind == domain.ReversibilityKind.NONE:
            return False
        return self.sentence

    def __str__(self) -> str:
        return self.sentence


@dataclass(frozen=True)
class StepCompensation:
    id: int
    status: CompensationStatus
    not_undone: Annotated[str, described("What the undo could not take back, if it was partial.")]
    dead_letter: Annotated[
        int | None, described("The dead letter's id when the undo failed and a person owns it.")
    ]
    settled_by_hand: Annotated[
        str,
        described(
            "Who resolved the failed undo's dead letter and their note, once resolved by a person; "
            "empty while it is open (or when the undo did not fail)."
        ),
    ] = ""
    undone_at: Annotated[
        datetime | None, described("When the undo went through (wholly or partly); null otherwise.")
    ] = None
    dead_letter_resolved: Annotated[
        bool, described("A person (or a retry) answered the failed undo's dead letter.")
    ] = False


@dataclass(frozen=True)
class CompletedStep:
    __json_properties__: ClassVar[tuple[str, ...]] = ("reversible",)

    step_id: str
    tool: str
    at: Annotated[str, described("Local time of day it settled, HH:MM:SS (settled_at is the moment itself).")]
    settled_at: datetime
    detail: Annotated[str, described("The receipt in words.")]
    reversibility: Annotated[ReversibilityNow, described("How far it can still be taken back, now.")]
    receipt: Annotated[dict[str, Any], described("The downstream's own identifiers.")]
    undo_tool: Annotated[str, described("The catalogue's compensating tool; empty when nothing undoes it.")]
    compensation: Annotated[StepCompensation | None, described("The undo, once one was asked for.")]
    warnings: Annotated[list[str], described("What a person must know before undoing it.")]
    undo_blocked: Annotated[
        str,
        described(
            "Why the undo cannot be built from the step's arguments and receipt (it is then not "
            "offered); empty when it can."
        ),
    ] = ""
    intended_at: Annotated[datetime | None, described("When the call was about to be sent.")] = None
    settled_how: Annotated[
        str,
        described(
            'What settled_at is: "happened" (the call\'s own answer), "found" (reconciliation '
            'asked the downstream), or "marked" (a person judged it happened: settled_at is when '
            "they said so, not when it happened)."
        ),
    ] = "happened"
    settled_by: Annotated[str, described("Who found or marked it; empty for the call's own answer.")] = ""

    @property
    def reversible(self) -> bool | str:
        """true, false, or the condition and deadline in words (reversibility.sentence)."""
        return self.reversibility.flag_or_sentence

    @property
    def undone(self) -> bool:
        """Undone (wholly or partly): the step no longer stands."""
        return self.compensation is not None and self.compensation.status in UNDONE

    @property
    def undo_pending(self) -> bool:
        return self.compensation is not None and self.compensation.status == CompensationStatus.PENDING

    @property
    def undo_failed(self) -> bool:
        """The undo failed and its dead letter is still open: a person must finish it."""
        return (
            self.compensation is not None
            and self.compensation.dead_letter is not None
            and not self.compensation.dead_letter_resolved
        )

    @property
    def settled_by_hand(self) -> bool:
        """The undo failed and a person resolved its dead letter (undone by hand, or left standing
        on purpose: the resolution note says which)."""
        return (
            self.compensation is not None
            and self.compensation.dead_letter is not None
            and self.compensation.dead_letter_resolved
            and self.compensation.status == CompensationStatus.DEAD_LETTERED
        )


@dataclass(frozen=True)
class NotDoneStep:
    """A planned step that did not happen: what it was to send, and the key to it."""

    step_id: Annotated[str, described("Empty when the step was never attempted.")]
    tool: str
    args: dict[str, Any]
    detail: str
    idempotency_key: Annotated[str, described("The key the step is (or would be) sent with.")]
    why: Annotated[str, described('"never attempted", "not performed: …" or "failed (<class>): …".')]


@dataclass(frozen=True)
class UncertainStep:
    """A step nobody can say happened or not, with the key to ask the downstream about."""

    step_id: str
    tool: str
    args: dict[str, Any]
    detail: str
    idempotency_key: Annotated[str, described("The key the step was sent with.")]
    status: IntentStatus
    why: str
    lookup_attempts: Annotated[int, described(min_value=0)]
    compensation: Annotated[bool, described("The uncertain call is itself an undo.")]


class CustomerToldSource(models.TextChoices):
    """Which path a message reached the customer by."""

    AGENT = "agent", "Recorded by the agent"
    TOOL = "tool", "Sent by a customer-facing tool"
    STAFF = "staff", "Recorded by a person"


class ContradictionCode(models.TextChoices):
    """Why the run's state now contradicts what the customer was told."""

    UNDONE = "undone", "The step it reports was undone"
    PARTLY_UNDONE = "partly_undone", "The step it reports was partly undone"
    NOT_PERFORMED = "not_performed", "The step it reports did not happen"


@dataclass(frozen=True)
class Contradiction:
    """A step the message reports that no longer stands, and the step that undid it."""

    code: ContradictionCode
    step_id: Annotated[str, described("The step the message reports.")]
    tool: str
    undone_by: Annotated[
        str, described("The undo's step id; empty when the reported step itself did not happen.")
    ]
    why: Annotated[str, described("The contradiction in words.")]


@dataclass(frozen=True)
class AlreadySoStep:
    """A step whose effect was already there before the run recorded its intent: someone else's
    doing, not this run's. Shown so nobody takes it for the run's work, undoes it or sends it."""

    step_id: str
    tool: str
    args: dict[str, Any]
    detail: str
    idempotency_key: str
    evidence_at: Annotated[
        datetime | None, described("When the downstream's record of the state dates from, if it said.")
    ]
    why: Annotated[str, described("What reconciliation found, in words.")]


@dataclass(frozen=True)
class CustomerTold:
    """One message the customer received, whichever path sent it."""

    at: datetime
    channel: CustomerChannel
    body: str
    source: CustomerToldSource
    told_by: Annotated[str, described("Who recorded or sent it (an agent, a person, reconciliation).")]
    step_id: Annotated[
        str, described("The customer-facing tool call's step id; empty for a recorded message.")
    ]
    tool: Annotated[str, described("The customer-facing tool; empty for a recorded message.")]
    about_steps: Annotated[
        list[str],
        described(
            "Steps whose effects the message reports: named when the message was recorded, or the "
            "earlier performed steps of the tools a customer-facing tool declares it announces."
        ),
    ]
    contradicted_by: Annotated[
        list[Contradiction],
        described("Reported steps the run's state now contradicts; empty when nothing proves one."),
    ]


@dataclass(frozen=True)
class AvailableUndo:
    __json_properties__: ClassVar[tuple[str, ...]] = ("reversible",)

    step_id: str
    tool: str
    undo_tool: str
    reversibility: ReversibilityNow

    @property
    def reversible(self) -> bool | str:
        return self.reversibility.flag_or_sentence


@dataclass(frozen=True)
class NextAction:
    code: NextActionCode
    text: Annotated[str, described("The suggestion in words.")]
    compensations_available: list[AvailableUndo]
    waiting: Annotated[bool, described("Whether the run waits on a person.")]


@dataclass(frozen=True)
class MissingBranch:
    branch: str
    tool: str
    required: bool
    why: str
    retry: str
    attempts: Annotated[int, described(min_value=1)]


@dataclass(frozen=True)
class CheckedBranch:
    branch: str
    tool: str
    required: bool
    result: dict[str, Any]
    latency_ms: int | None
    attempts: Annotated[int, described(min_value=1)]


@dataclass(frozen=True)
class FanOutDecision:
    proceed: bool
    rule: str
    summary: str
    rests_on: list[str]
    promise: dict[str, Any]
    conflict: Annotated[dict[str, Any] | None, described('{"question": …, "sides": [{"source", "says"}, …]}')]


@dataclass(frozen=True)
class Coverage:
    """What the run's latest fan-out covered (fanout.selectors.run_coverage)."""

    fanout: str
    turn: Annotated[int, described(min_value=0)]
    deadline_ms: Annotated[int, described(min_value=0)]
    coverage: Annotated[str, described('Branches that answered, of all: "2/3".')]
    outcome: Annotated[str, described(choices=[("", "not settled"), *FanOutOutcome.choices])]
    outcome_label: str
    missing: list[MissingBranch]
    checked: list[CheckedBranch]
    decision: FanOutDecision

    @classmethod
    def of(cls, coverage: dict[str, Any]) -> Coverage:
        return cls(
            **{
                **coverage,
                "missing": [MissingBranch(**m) for m in coverage["missing"]],
                "checked": [CheckedBranch(**c) for c in coverage["checked"]],
                "decision": FanOutDecision(**coverage["decision"]),
            }
        )


@dataclass(frozen=True)
class ToolAttempts:
    """How the calls of one tool ended: `outcomes` maps "ok" (performed), an error class, or
    another status (intended, unknown, not_performed, already_so) to how many calls ended so."""

    tool: str
    attempts: Annotated[int, described(min_value=0)]
    outcomes: dict[str, int]


@dataclass(frozen=True)
class AttemptCounts:
    """The run's attempts, and its retries, repairs, replans, reflections and escalations counted
    apart (handover.attempts.run_attempts). `retries`, `repairs` and `replans` are the larger of
    what the journal's calls show (`derived`) and what the agent reported (`reported`), so a
    runtime that never reports is still measured; reflections and escalations are as reported."""

    attempts: Annotated[int, described("Calls the run recorded, whatever became of them.", min_value=0)]
    retries: Annotated[int, described(min_value=0)]
    repairs: Annotated[int, described(min_value=0)]
    replans: Annotated[int, described(min_value=0)]
    reflections: Annotated[int, described(min_value=0)]
    escalations: Annotated[int, described(min_value=0)]
    derived: Annotated[
        dict[str, int],
        described(
            "retries, repairs and replans as the journal's calls show them: a retry is the same "
            "call (tool and canonical arguments) as an earlier failed one; a repair the same tool "
            "with changed arguments after it refused them (invalid_input); a replan any other call "
            "after a conflict."
        ),
    ]
    reported: Annotated[
        dict[str, int],
        described("retries, repairs, replans, reflections and escalations as the agent reported them."),
    ]
    by_tool: Annotated[
        list[ToolAttempts], described("Each tool's calls by how they ended, in first-call order.")
    ]
    error_classes: Annotated[
        dict[str, int], described("Failed calls per error class, the most frequent first.")
    ]
    looping: Annotated[
        bool, described("The run was stopped for looping on a failing call (reason_why code looping).")
    ]

    @property
    def failed(self) -> int:
        return sum(self.error_classes.values())


@dataclass(frozen=True)
class Handover:
    """What a person needs to finish a run the agent could not, generated from the rows."""

    handover_version: str
    run_id: uuid.UUID
    ticket_id: str
    order_id: str
    task_type: str
    status: RunStatus
    reason: Annotated[
        str, described("Why the run needs a person (an outcome reason, or run_stuck); empty if it does not.")
    ]
    reason_detail: Annotated[
        str, described("Why a machine could not finish the run, in words (reason_why said plainly).")
    ]
    reason_why: Annotated[
        dict[str, Any],
        described(
            "Why a machine could not finish the run, typed: {code, ...facts} (journal.why.RunWhy), "
            "with `undo` when the run's writes were undone first. Empty for a run ended before "
            "reasons were typed, whose reason_detail keeps its words."
        ),
    ]
    reason_holds: Annotated[
        bool,
        described(
            "Whether the reason is still true now: false once what it names was settled (the "
            "uncertain call decided, the failed undo's dead letter resolved) or the escalation "
            "was resolved. The reason and its detail are then history."
        ),
    ]
    reason_answered: Annotated[
        str, described("What answered the reason, in words, once it no longer holds; empty while it does.")
    ]
    awaiting_person: Annotated[bool, described("An escalation of the run is open: it is in the queue.")]
    assignee: str | None
    completed: list[CompletedStep]
    not_done: list[NotDoneStep]
    uncertain: list[UncertainStep]
    already_so: Annotated[
        list[AlreadySoStep], described("Already so before the run: not its work; never undone or re-sent.")
    ]
    customer_told: list[CustomerTold]
    next_action: NextAction
    coverage: Annotated[Coverage | None, described("The run's latest fan-out, if it had one.")]
    versions: dict[str, str]
    deadline: datetime | None
    deadline_passed: bool
    state: Annotated[
        str, described("The run as this handover saw it; actions carrying an older one are refused.")
    ]
    attempts: Annotated[
        AttemptCounts,
        described(
            "The run's attempts, retries, repairs, replans, reflections and escalations, and the loop flag."
        ),
    ]
    totals: Annotated[
        dict[str, int],
        described(
            "How many items each list (completed, not_done, uncertain, already_so, customer_told) "
            "holds. The API answers with the first HANDOVER_LIST_LIMIT of each unless asked for all "
            "(?all=1): a list shorter than its total was cut."
        ),
    ] = field(default_factory=dict)


# Not frozen, with slots: a long run builds one per step past the shown ones, and a frozen
# dataclass's __init__ costs three times as much. Nothing assigns to one after it is built.
@dataclass(slots=True)
class StandingStep:
    """What the next action reads of a completed step past the shown ones that no undo was asked
    for: it stands, and whether (and how) it can still be undone. Never shown or serialised: a
    handover cut to its first items (handover_build's `limit`) builds these instead of the
    CompletedStep (receipt in words, warnings, times) nobody will see."""

    step_id: str
    tool: str
    undo_tool: str
    undo_blocked: str
    reversibility: ReversibilityNow
    compensation: None = None
    undone: ClassVar[bool] = False
    undo_pending: ClassVar[bool] = False
    undo_failed: ClassVar[bool] = False
    settled_by_hand: ClassVar[bool] = False


# Compensation statuses after which a step no longer stands.
UNDONE = (CompensationStatus.DONE, CompensationStatus.PARTIAL)
