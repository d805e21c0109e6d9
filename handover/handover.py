"""The handover: what a person needs to finish a run the agent could not, generated from the rows
(intent rows and their receipts, the plan, the compensation catalogue, what the customer was
told), never summarised by a model.

    completed      every write that happened, with what the downstream said and whether (and
                   until when) it can still be taken back
    not_done       planned writes that never happened
    uncertain      writes nobody can say happened or not, with the key to ask about
    already_so     planned writes the world already showed before the run recorded them
                   (someone else's doing, e.g. the customer's): not the run's work, never
                   offered for undo, never sent again
    customer_told  what the customer already knows
    next_action    a concrete suggestion, by rules, from the four lists above: a code for
                   machines beside the sentence for people

The objects below are the one description of the handover: the run page renders them, and
handover.handover_schema builds from their fields the serializer that answers
GET /api/v1/runs/{id}/handover/ and that /api/schema/ publishes. A field's `described(...)`
annotation is its description there; `__json_properties__` names properties the JSON carries too.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import Annotated, Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Case, Max, Q, Value, When
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from compensations.mapping import MappingError, compensation_args
from compensations.models import Compensation, CompensationStatus
from compensations.reversibility import ReversibilityNow, may_undo, reversibility_now
from compensations.selectors import catalogue_for
from fanout.models import Outcome as FanOutOutcome
from fanout.selectors import run_coverage
from journal.channels import CustomerChannel
from journal.models import (
    ActorKind,
    CustomerMessage,
    ErrorClass,
    Intent,
    IntentStatus,
    JournalEvent,
    OutcomeReason,
    Run,
    RunStatus,
)
from journal.selectors import compensation_intent_ids_in, plan_with_keys, stuck_runs
from tools.registry import all_tools, find_tool

from .models import AuditEntry

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


class NextActionCode(models.TextChoices):
    """What the next-action box asks of a person, for machines (the sentence is for people)."""

    SETTLE_UNCERTAIN = "settle_uncertain", "Find out whether an uncertain step happened"
    FINISH_FAILED_UNDO = "finish_failed_undo", "Take a failed undo's dead letter"
    WAIT_FOR_UNDO = "wait_for_undo", "Wait: an undo is in progress"
    NOTHING_WAITING = "nothing_waiting", "Nothing waits on a person"
    TELL_CUSTOMER_UNDONE = "tell_customer_undone", "Everything was undone: tell the customer, resolve"
    FINISH_BY_HAND = "finish_by_hand", "A step was undone: finish by hand or undo the rest"
    WAIT_FOR_AGENT = "wait_for_agent", "The agent is still working"
    RESUME = "resume", "Resume the run (or undo what it did)"
    CHECK_AND_RESOLVE = "check_and_resolve", "Everything was done: check, then resolve"
    RESUME_OR_RESOLVE = "resume_or_resolve", "Nothing changed: resume, or resolve with a note"
    TELL_CUSTOMER_SETTLED = (
        "tell_customer_settled",
        "Every step was undone or settled by hand: tell the customer, resolve",
    )


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
    reason_detail: str
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
    totals: Annotated[
        dict[str, int],
        described(
            "How many items each list (completed, not_done, uncertain, already_so, customer_told) "
            "holds. The API answers with the first HANDOVER_LIST_LIMIT of each unless asked for all "
            "(?all=1): a list shorter than its total was cut."
        ),
    ] = field(default_factory=dict)


# --- the rows -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PerformedStep:
    """A performed step of a long run that no list shows whole, read without building a model:
    no undo was asked for it and no loaded event names it. Its arguments and receipt are read
    (`args`, `receipt`) only when its tool is one the catalogue may undo or the customer hears
    from, the only cases the handover reads them in for a step it does not show; otherwise None.
    The handover counts it, tells whether it can still be undone, names it in the next action and
    checks declared links against it; building 10,000 of them as models cost a run of 10,000
    calls a third of its page's time (bench/pages.py)."""

    pk: int
    step_id: str
    tool: str
    idempotency_key: str
    intended_at: datetime
    settled_at: datetime | None
    args: dict[str, Any] | None
    receipt: dict[str, Any] | None
    status: ClassVar[str] = IntentStatus.PERFORMED


@dataclass
class HandoverRows:
    """Everything the handover is generated from, loaded in a fixed number of queries."""

    run: Run
    intents: list[Intent]
    messages: list[CustomerMessage]
    events: list[JournalEvent]
    audit: list[AuditEntry]
    compensations: dict[int, Any]  # original intent id → its live Compensation
    catalogue: dict[str, Any]  # tool → CatalogueEntry
    compensation_intent_ids: set[int] = field(default_factory=set)
    coverage: dict[str, Any] | None = None
    stuck: bool = False
    # How many events the run has, and the newest one's id: `events` may hold only some of them.
    event_count: int = 0
    last_event_id: int = 0
    # Loaded for a handover cut to its first items (handover_rows' `limit`): the performed steps
    # past them read as scalars, in order. `intents` then holds every other step.
    tail: list[PerformedStep] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether `intents` holds every step of the run."""
        return not self.tail

    @property
    def intent_count(self) -> int:
        return len(self.intents) + len(self.tail)

    @cached_property
    def tail_keys(self) -> set[str]:
        """The idempotency keys of the steps in `tail`: every one was performed."""
        return {step.idempotency_key for step in self.tail}

    @cached_property
    def steps(self) -> list[Intent | PerformedStep]:
        """Every step of the run in order (intended_at, id), whole or not."""
        if not self.tail:
            return list(self.intents)
        return sorted([*self.intents, *self.tail], key=lambda s: (s.intended_at, s.pk))


# The newest events of a run that handover_rows loads for the timeline, beside those the
# handover reads (_notable_events): a run of 10,000 calls has 20,000 events, and building each as
# a model cost seconds (bench/pages.py).
RECENT_EVENTS = 200


def _notable_events(facing_tools: set[str]) -> Q:
    """The events the handover reads, whatever their age: what the customer was told, lookups'
    answers, a person's judgements, escalations and their resolutions, and the intent_recorded
    event of an undo or of a call that reached the customer."""
    kind = JournalEvent.Kind
    recorded = Q(kind=kind.INTENT_RECORDED)
    return (
        Q(
            kind__in=[
                kind.CUSTOMER_TOLD,
                kind.INTENT_RECONCILED,
                kind.RUN_ESCALATED,
                kind.RUN_COMPENSATED,
                kind.ESCALATION_RESOLVED,
            ]
        )
        | Q(kind=kind.OUTCOME_RECORDED, data__has_key="judged_by")
        # A send answered for a state older than its intent: its evidence (_already_so).
        | Q(kind=kind.OUTCOME_RECORDED, data__status=IntentStatus.ALREADY_SO)
        | (recorded & (Q(data__compensation=True) | Q(intent__tool__in=facing_tools)))
    )


@dataclass(frozen=True)
class RunEvents:
    """Events of a run in time order (all, or the newest and the notable), with how many it has
    and the newest one's id."""

    events: list[JournalEvent]
    count: int
    last_id: int


def run_events(run: Run, intents: dict[int, Intent] | None = None, *, every: bool = False) -> RunEvents:
    """The run's events in time order, each with its intent from `intents` (no join): every one,
    or the newest RECENT_EVENTS and the notable ones (_notable_events). A run with fewer events
    than that costs one query, as when every event was read."""
    events = run.events.order_by("at", "id")
    if every:
        loaded = list(events)
        count, last_id = len(loaded), max((e.pk for e in loaded), default=0)
    else:
        recent = list(run.events.order_by("-id")[:RECENT_EVENTS])
        last_id = recent[0].pk if recent else 0
        if len(recent) < RECENT_EVENTS:
            loaded, count = recent[::-1], len(recent)
        else:
            facing = {name for name, spec in all_tools().items() if spec.customer_facing is not None}
            notable = list(events.filter(_notable_events(facing), id__lt=recent[-1].pk))
            loaded = sorted([*notable, *recent], key=lambda e: (e.at, e.pk))
            count = run.events.count()
    if intents is not None:
        events_attach_intents(loaded, intents)
    return RunEvents(events=loaded, count=count, last_id=last_id)


def events_attach_intents(events: list[JournalEvent], intents: dict[int, Intent]) -> None:
    """Give each event its intent from `intents` (no join, no query per event)."""
    intent_field = JournalEvent._meta.get_field("intent")
    for event in events:
        if event.intent_id is not None and event.intent_id in intents:
            intent_field.set_cached_value(event, intents[event.intent_id])


# What a handover reads of a performed step it does not load whole (PerformedStep's fields).
PERFORMED_STEP_COLUMNS = ("id", "step_id", "tool", "idempotency_key", "intended_at", "settled_at")


def _cut_intents(
    run: Run,
    *,
    limit: int,
    compensations: dict[int, Any],
    compensation_intent_ids: set[int],
    named: set[int],
) -> tuple[list[Intent], list[PerformedStep], dict[str, Any]]:
    """The run's steps for a handover cut to its first `limit` items: (the intents loaded whole,
    the other performed steps as PerformedSteps, the catalogue entries of the run's tools).

    Loaded whole: the first `limit` calls (the run page's calls list) and the first `limit`
    performed steps (the completed list), every step not performed, every undo and every step
    with one, and every step an event in `named` belongs to (the timeline's). Of the others, the
    arguments and receipt are read for the tools the catalogue may undo (whether and how each
    step can be undone depends on them) and those the customer hears from (what they were told)."""
    # Every entry of the tenant's catalogue (tens of rows): which tools the run used is not known
    # before its steps are read, and reading them twice costs more.
    catalogue = catalogue_for(tenant_id=run.tenant_id)
    read_tools = sorted(
        {tool for tool, entry in catalogue.items() if may_undo(entry)}
        | {tool for tool, spec in all_tools().items() if spec.customer_facing is not None}
    )
    ordered = run.intents.order_by("intended_at", "id")
    json_columns = [
        Case(When(tool__in=read_tools, then=column), default=None, output_field=models.JSONField())
        if read_tools
        else Value(None, output_field=models.JSONField())
        for column in ("args", "receipt")
    ]
    scalars = list(ordered.values_list("status", *PERFORMED_STEP_COLUMNS, *json_columns))
    keep: set[int] = set()
    tail: list[PerformedStep] = []
    performed = 0  # performed steps so far that are not undos: the completed list's order
    for position, (status, pk, *step) in enumerate(scalars):
        shown = position < limit
        if status == IntentStatus.PERFORMED and pk not in compensation_intent_ids:
            shown = shown or performed < limit
            performed += 1
        if (
            shown
            or status != IntentStatus.PERFORMED
            or pk in compensations
            or pk in compensation_intent_ids
            or pk in named
        ):
            keep.add(pk)
        else:
            tail.append(PerformedStep(pk, *step))
    intents = list(ordered.filter(pk__in=keep) if tail else ordered)
    return intents, tail, catalogue


def handover_rows(run: Run, *, limit: int | None = None) -> HandoverRows:
    """Load a run's rows for its handover: intents, messages, journal events (with who; the newest
    and those the handover reads, run_events), audit entries, compensations (with dead letters),
    the catalogue entries of its tools, and whether the run is stuck.

    With `limit` (a handover to be cut to its first `limit` items, handover_build's), the
    performed steps no list shows whole and nothing can undo are read as scalars (`tail`,
    _cut_intents): a run of 10,000 calls builds some hundred models, not 10,000."""
    messages = list(run.customer_messages.order_by("told_at", "id"))
    loaded = run_events(run)
    events = loaded.events
    audit = list(run.audit_entries.order_by("seq"))
    # The newest compensation of each step wins: a `not_possible` record followed by a live one
    # (after an admin fixed the catalogue) shows the live one.
    compensations = {
        c.original_id: c
        for c in Compensation.objects.filter(original__run=run)
        .select_related("dead_letter__owner", "dead_letter__resolved_by", "intent")
        .order_by("id")
    }
    compensation_intent_ids = compensation_intent_ids_in(events)  # notable: all of them are loaded
    tail: list[PerformedStep] = []
    if limit is None:
        intents = list(run.intents.order_by("intended_at", "id"))
        tools = {i.tool for i in intents} | {step.get("tool", "") for step in run.plan}
        catalogue = catalogue_for(tenant_id=run.tenant_id, tools=tools)
    else:
        named = {e.intent_id for e in events if e.intent_id is not None}
        intents, tail, catalogue = _cut_intents(
            run,
            limit=limit,
            compensations=compensations,
            compensation_intent_ids=compensation_intent_ids,
            named=named,
        )
    events_attach_intents(events, {i.pk: i for i in intents})
    return HandoverRows(
        run=run,
        intents=intents,
        messages=messages,
        events=events,
        audit=audit,
        compensations=compensations,
        catalogue=catalogue,
        compensation_intent_ids=compensation_intent_ids,
        coverage=_coverage(run),
        stuck=run_is_stuck(run),
        event_count=loaded.count,
        last_event_id=loaded.last_id,
        tail=tail,
    )


def _coverage(run: Run) -> dict[str, Any] | None:
    """A fan-out's coverage, when the run had one."""
    result: dict[str, Any] | None = run_coverage(run)
    return result


def run_is_stuck(run: Run, now: datetime | None = None) -> bool:
    """Whether journal.selectors.stuck_runs counts the run (one query, only for a running run)."""
    if run.status != RunStatus.RUNNING:
        return False
    return stuck_runs(now=now or timezone.now()).filter(pk=run.pk).exists()


# --- reading receipts and the catalogue -------------------------------------------------------


def _when(value: Any) -> str:
    """A receipt's date or datetime as a person reads it; anything else as it is."""
    # Only a value starting YYYY- is parsed: most receipt values are ids, and parsing each one
    # cost a long run's page a third of its time.
    if isinstance(value, str) and value[:4].isdigit() and value[4:5] == "-":
        # A plain date first: Python's ISO parser would read "2026-12-01" as a naive midnight.
        day = parse_date(value) if len(value) == 10 else None
        if day is not None:
            return day.strftime("%a %d %b")
        moment = parse_datetime(value)
        if moment is not None and timezone.is_aware(moment):
            return timezone.localtime(moment).strftime("%a %d %b %H:%M")
    return str(value)


def receipt_detail(intent: Intent) -> str:

    readable = {k: _when(v) if isinstance(v, str) else v for k, v in (intent.receipt or {}).items()}
    spec = find_tool(intent.tool)  # not get_tool: an exception per unregistered step is slow
    if spec is not None:
        return spec.describe_receipt(readable)
    return ", ".join(f"{k} {v}" for k, v in readable.items())


def reversibility(entry: Any, intent: Intent | PerformedStep, now: datetime) -> ReversibilityNow:
    """How far the performed step can still be taken back at `now` (compensations.reversibility)."""
    return reversibility_now(entry, intent.receipt, now)


# --- the lists --------------------------------------------------------------------------------


def _money(args: dict[str, Any]) -> Decimal:
    try:
        return Decimal(str(args.get("amount", "0")))
    except InvalidOperation:
        return Decimal(0)


def _warnings(*, tool: str, args: dict[str, Any], reversible: ReversibilityNow) -> list[str]:
    """What a person must know before the click: money above the high-value threshold, and
    effects nothing (or only part) can take back."""
    warnings = []
    amount = _money(args)
    if amount >= Decimal(str(settings.SEAM_HIGH_VALUE_AMOUNT)):
        warnings.append(f"high value: {amount} {args.get('currency', '')}".strip())
    if not reversible.can_undo:
        warnings.append(f"irreversible: nothing undoes {tool}")
    elif reversible.loses:
        warnings.append(reversible.sentence)
    return warnings


def _step_compensation(compensation: Any) -> StepCompensation | None:
    if compensation is None:
        return None
    dead_letter = getattr(compensation, "dead_letter", None)
    settled = ""
    if dead_letter is not None and dead_letter.resolved_at is not None:
        who = dead_letter.resolved_by.get_username() if dead_letter.resolved_by else "a retry"
        settled = f"{who}: {dead_letter.resolution_note}" if dead_letter.resolution_note else who
    return StepCompensation(
        id=compensation.pk,
        status=CompensationStatus(compensation.status),
        not_undone=compensation.not_undone,
        dead_letter=dead_letter.pk if dead_letter is not None else None,
        settled_by_hand=settled,
        dead_letter_resolved=dead_letter is not None and dead_letter.resolved_at is not None,
        undone_at=compensation.intent.settled_at
        if compensation.status in UNDONE and compensation.intent is not None
        else None,
    )


def undo_unbuildable(entry: Any, intent: Intent | PerformedStep) -> str:
    """Why the compensating call cannot be built from this step (a step a person marked
    performed has no receipt to take the downstream's identifiers from); '' when it can."""
    try:
        compensation_args(entry, intent.args or {}, intent.receipt or {})
    except MappingError as exc:
        return str(exc)
    return ""


def _settled_how(rows: HandoverRows) -> dict[int, tuple[str, str]]:
    """intent id → how its performed outcome was learnt ("found", "marked") and by whom; the
    call's own answer ("happened") is the default."""
    how: dict[int, tuple[str, str]] = {}
    for event in rows.events:
        if event.intent_id is None or event.data.get("status") != IntentStatus.PERFORMED:
            continue
        if event.kind == JournalEvent.Kind.OUTCOME_RECORDED and event.data.get("judged_by"):
            how[event.intent_id] = ("marked", str(event.data["judged_by"]))
        elif event.kind == JournalEvent.Kind.INTENT_RECONCILED:
            how[event.intent_id] = ("found", event.actor_name)
    return how


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


def _completed(
    rows: HandoverRows, plan_detail: dict[str, str], now: datetime, limit: int | None = None
) -> tuple[list[CompletedStep], list[CompletedStep | StandingStep]]:
    """The completed steps as CompletedSteps (every one, or with `limit` the first `limit` and
    every one an undo was asked for), and every step in order, those others as StandingSteps,
    for the next action."""
    completed: list[CompletedStep] = []
    every: list[CompletedStep | StandingStep] = []
    zone = timezone.get_current_timezone()  # once: looking it up per step is slow
    settled_how = _settled_how(rows)
    cannot_undo = ReversibilityNow.none()  # one value for every step nothing undoes
    for intent in rows.steps:
        if intent.status != IntentStatus.PERFORMED or intent.pk in rows.compensation_intent_ids:
            continue
        entry = rows.catalogue.get(intent.tool)
        reversible = reversibility(entry, intent, now) if may_undo(entry) else cannot_undo
        compensation = rows.compensations.get(intent.pk)
        undo_tool = entry.compensating_tool if entry and reversible.can_undo else ""
        if isinstance(intent, PerformedStep) or (
            limit is not None and compensation is None and len(every) >= limit
        ):
            every.append(
                StandingStep(
                    step_id=intent.step_id,
                    tool=intent.tool,
                    undo_tool=undo_tool,
                    undo_blocked=undo_unbuildable(entry, intent) if undo_tool else "",
                    reversibility=reversible,
                )
            )
            continue
        detail = receipt_detail(intent)
        if plan_detail.get(intent.idempotency_key) and not detail:
            detail = plan_detail[intent.idempotency_key]
        step = CompletedStep(
            step_id=intent.step_id,
            tool=intent.tool,
            at=timezone.localtime(intent.settled_at or intent.intended_at, zone).strftime("%H:%M:%S"),
            settled_at=intent.settled_at or intent.intended_at,
            detail=detail,
            reversibility=reversible,
            receipt=intent.receipt,
            undo_tool=undo_tool,
            undo_blocked=undo_unbuildable(entry, intent) if undo_tool else "",
            intended_at=intent.intended_at,
            settled_how=settled_how.get(intent.pk, ("happened", ""))[0],
            settled_by=settled_how.get(intent.pk, ("happened", ""))[1],
            compensation=_step_compensation(compensation),
            warnings=[]
            if compensation is not None
            else _warnings(tool=intent.tool, args=intent.args, reversible=reversible),
        )
        completed.append(step)
        every.append(step)
    return completed, every


NOT_DONE_WHY: dict[str | None, str] = {
    None: "never attempted",
    IntentStatus.NOT_PERFORMED: "not performed: the downstream has no record of it",
    IntentStatus.FAILED: "failed",
}


def _not_done(rows: HandoverRows, planned: list[dict[str, Any]]) -> list[NotDoneStep]:
    by_key = {i.idempotency_key: i for i in rows.intents}
    performed_tail = rows.tail_keys
    not_done = []
    for step in planned:
        if step["key"] in performed_tail:
            continue
        intent = by_key.get(step["key"])
        status = intent.status if intent is not None else None
        if status not in NOT_DONE_WHY:
            continue  # performed, or in doubt (listed as uncertain)
        why = NOT_DONE_WHY[status]
        if intent is not None and status == IntentStatus.FAILED:
            why = f"failed ({intent.error_class or 'unknown class'}): {intent.outcome_summary}"
        not_done.append(
            NotDoneStep(
                tool=step["tool"],
                detail=step.get("detail", ""),
                args=step.get("args", {}),
                idempotency_key=step["key"],
                why=why,
                step_id=intent.step_id if intent is not None else "",
            )
        )
    return not_done


def _uncertain(rows: HandoverRows, plan_detail: dict[str, str]) -> list[UncertainStep]:
    """Rows whose outcome is unknown, and rows still open on a run nobody is running."""
    run_alive = rows.run.status == RunStatus.RUNNING and not rows.stuck
    uncertain = []
    for intent in rows.intents:
        if intent.status == IntentStatus.UNKNOWN or (
            intent.status == IntentStatus.INTENDED and not run_alive
        ):
            uncertain.append(
                UncertainStep(
                    step_id=intent.step_id,
                    tool=intent.tool,
                    args=intent.args,
                    detail=plan_detail.get(intent.idempotency_key, ""),
                    idempotency_key=intent.idempotency_key,
                    status=IntentStatus(intent.status),
                    why=_uncertain_why(intent),
                    lookup_attempts=intent.lookup_attempts,
                    compensation=intent.pk in rows.compensation_intent_ids,
                )
            )
    return uncertain


def tool_error_words(intent: Intent) -> str:
    """What the agent reported of a call whose tool answered with an error that may not mean
    nothing happened (ok=false, error_class=ambiguous), or "" for any other row."""
    if intent.status != IntentStatus.INTENDED or intent.error_class != ErrorClass.AMBIGUOUS:
        return ""
    text = intent.outcome_summary.strip() or "no text"
    return f"the tool answered with an error: {text}; whether it acted is unknown"


def _uncertain_why(intent: Intent) -> str:
    if intent.unknown_reason:
        return intent.unknown_reason
    if intent.status != IntentStatus.INTENDED:
        return ""
    told = tool_error_words(intent)
    asking = "reconciliation is still asking the downstream"
    return f"{told}; {asking}" if told else asking


def _contradiction(rows: HandoverRows, intent: Intent | PerformedStep) -> Contradiction | None:
    """What contradicts a message reporting `intent`, if the rows prove something does: its undo
    went through (wholly or partly), or the step turned out not to have happened. A step still in
    doubt or with its undo under way proves nothing yet."""
    if intent.status in (IntentStatus.NOT_PERFORMED, IntentStatus.FAILED):
        return Contradiction(
            code=ContradictionCode.NOT_PERFORMED,
            step_id=intent.step_id,
            tool=intent.tool,
            undone_by="",
            why=f"{_words(intent.tool)} did not happen ({intent.status})",
        )
    compensation = rows.compensations.get(intent.pk)
    if intent.status != IntentStatus.PERFORMED or compensation is None or compensation.status not in UNDONE:
        return None
    undo = compensation.intent
    partly = compensation.status == CompensationStatus.PARTIAL
    why = f"{_words(intent.tool)} was {'partly ' if partly else ''}undone"
    if undo is not None:
        why += f" by {_words(undo.tool)}"
    if partly and compensation.not_undone:
        why += f" ({compensation.not_undone} still stands)"
    return Contradiction(
        code=ContradictionCode.PARTLY_UNDONE if partly else ContradictionCode.UNDONE,
        step_id=intent.step_id,
        tool=intent.tool,
        undone_by=undo.step_id if undo is not None else "",
        why=why,
    )


def _customer_told(rows: HandoverRows) -> list[CustomerTold]:
    """Everything the customer received: the messages the agent or a person recorded, and every
    performed call of a tool declared customer-facing (in the run or in a resumption). A message
    is flagged only through a link someone declared (the message's `about_steps`, the tool's
    `announces`), never one guessed from its words."""
    steps = rows.steps
    by_step = {i.step_id: i for i in steps}
    told_event = {
        e.data.get("message_id"): e for e in rows.events if e.kind == JournalEvent.Kind.CUSTOMER_TOLD
    }
    first_event: dict[int, JournalEvent] = {}
    for event in rows.events:
        if event.intent_id is not None:
            first_event.setdefault(event.intent_id, event)

    def contradicted(about: list[str]) -> list[Contradiction]:
        found = (_contradiction(rows, by_step[s]) for s in about if s in by_step)
        return [c for c in found if c is not None]

    told = []
    for message in rows.messages:
        recorded = told_event.get(message.pk)
        staff = recorded is not None and recorded.actor_kind == ActorKind.USER
        about = list(message.about_steps or [])
        told.append(
            CustomerTold(
                at=message.told_at,
                channel=CustomerChannel(message.channel),
                body=message.body,
                source=CustomerToldSource.STAFF if staff else CustomerToldSource.AGENT,
                told_by=recorded.actor_name if recorded is not None else "",
                step_id="",
                tool="",
                about_steps=about,
                contradicted_by=contradicted(about),
            )
        )
    for intent in steps:
        spec = find_tool(intent.tool)
        facing = spec.customer_facing if spec is not None else None
        if facing is None or intent.status != IntentStatus.PERFORMED:
            continue
        if intent.pk in rows.compensation_intent_ids:
            continue
        sent_at = intent.settled_at or intent.intended_at
        about = [
            i.step_id
            for i in steps
            if i.tool in facing.announces
            and i.status == IntentStatus.PERFORMED
            and i.pk not in rows.compensation_intent_ids
            and (i.settled_at or i.intended_at) <= intent.intended_at
        ]
        sent = first_event.get(intent.pk)
        told.append(
            CustomerTold(
                at=sent_at,
                channel=CustomerChannel(facing.channel),
                body=facing.describe(intent.args or {}, intent.receipt or {}),
                source=CustomerToldSource.TOOL,
                told_by=sent.actor_name if sent is not None else "",
                step_id=intent.step_id,
                tool=intent.tool,
                about_steps=about,
                contradicted_by=contradicted(about),
            )
        )
    return sorted(told, key=lambda t: t.at)


def _already_so(rows: HandoverRows, plan_detail: dict[str, str]) -> list[AlreadySoStep]:
    # Settled already_so by reconciliation's lookup, or by the send's own answer (its outcome).
    settling = (JournalEvent.Kind.INTENT_RECONCILED, JournalEvent.Kind.OUTCOME_RECORDED)
    evidence = {
        e.intent_id: e.data.get("evidence") or {}
        for e in rows.events
        if e.kind in settling and e.data.get("status") == IntentStatus.ALREADY_SO
    }
    return [
        AlreadySoStep(
            step_id=intent.step_id,
            tool=intent.tool,
            args=intent.args,
            detail=plan_detail.get(intent.idempotency_key, ""),
            idempotency_key=intent.idempotency_key,
            evidence_at=parse_datetime(str(evidence.get(intent.pk, {}).get("at") or "")),
            why=intent.outcome_summary,
        )
        for intent in rows.intents
        if intent.status == IntentStatus.ALREADY_SO
    ]


def _words(tool: str) -> str:
    return tool.replace("_", " ")


# Compensation statuses after which a step no longer stands.
UNDONE = (CompensationStatus.DONE, CompensationStatus.PARTIAL)

# What a run that ended with nobody waiting on it is, in the next-action box's words.
CLOSED_SAYS: dict[str, str] = {
    RunStatus.COMPLETED: "the run completed",
    RunStatus.CANCELLED: "the run was cancelled",
    RunStatus.ESCALATED: "its escalation was resolved",
    RunStatus.COMPENSATED: "the run was compensated and its escalation resolved",
}


def next_action(
    *,
    run: Run,
    completed: Sequence[CompletedStep | StandingStep],
    not_done: list[NotDoneStep],
    uncertain: list[UncertainStep],
    stuck: bool = False,
) -> NextAction:
    """A concrete suggestion, by rules, in order: settle what is uncertain first (nothing else is
    safe until then); then finish what was not done or undo what was; a failed undo goes to its
    dead letter; a run that did everything only needs closing; a run that ended with nobody waiting
    on it needs nothing (`waiting` is then false). `stuck`: the running run's agent went quiet."""
    available = [
        AvailableUndo(step_id=c.step_id, tool=c.tool, undo_tool=c.undo_tool, reversibility=c.reversibility)
        for c in completed
        if c.undo_tool and not c.undo_blocked and c.compensation is None
    ]
    failed_undo = [c for c in completed if c.undo_failed]
    undone = [c for c in completed if c.undone]
    pending_undo = [c for c in completed if c.undo_pending]
    # A failed undo whose dead letter a person resolved is settled: undone by hand, or left
    # standing on purpose (their note says which). It is neither undoable nor still owed.
    by_hand = [c for c in completed if c.settled_by_hand]
    standing = [c for c in completed if not c.undone and not c.settled_by_hand]
    # What still stands splits into what can still be undone and what nothing undoes (its undo
    # `not_possible`, or no compensating tool); a partial undo leaves its loss standing.
    undoable = [c for c in standing if c.undo_tool and c.compensation is None]
    # By identity: comparing the dataclasses by value made this quadratic (10,000 steps: minutes).
    undoable_ids = {id(c) for c in undoable}
    irreversible = [
        c for c in standing if id(c) not in undoable_ids and not (c.undo_pending or c.undo_failed)
    ]
    partly = [c for c in undone if c.compensation and c.compensation.status == CompensationStatus.PARTIAL]
    ended_unattended = run.status != RunStatus.RUNNING and not run.awaiting_person
    if uncertain:
        first = uncertain[0]
        code = NextActionCode.SETTLE_UNCERTAIN
        text = (
            f"find out whether {_words(first.tool)} happened before anything else: ask the downstream "
            f"again (retry the lookup), or mark it performed or not performed with a note"
        )
    elif failed_undo:
        code = NextActionCode.FINISH_FAILED_UNDO
        text = "; ".join(
            f"undoing {_words(c.tool)} failed: take its dead letter and finish it by hand"
            for c in failed_undo
        )
    elif pending_undo:
        code = NextActionCode.WAIT_FOR_UNDO
        text = f"wait: undoing {', '.join(_words(c.tool) for c in pending_undo)} is in progress"
    elif ended_unattended:
        # Ended, and no escalation is open: advice to resume or resolve would name buttons the
        # page no longer offers. Undoing a step stays possible (a customer may change their mind).
        code = NextActionCode.NOTHING_WAITING
        text = f"nothing waits on a person: {CLOSED_SAYS.get(run.status, f'the run is {run.status}')}"
        if undone:
            text += f"; undone since: {', '.join(_words(c.tool) for c in undone)}"
        if available:
            text += "; a step it did can still be undone below if the customer asks"
    elif by_hand and not standing and not partly:
        code = NextActionCode.TELL_CUSTOMER_SETTLED
        settled = "; ".join(
            f"{_words(c.tool)}'s failed undo was resolved by {c.compensation.settled_by_hand}"
            for c in by_hand
            if c.compensation
        )
        text = f"{', '.join(_words(c.tool) for c in undone)} was undone and {settled}" if undone else settled
        text += ": tell the customer what was and was not carried out, then resolve"
    elif undone and not standing and not partly:
        code = NextActionCode.TELL_CUSTOMER_UNDONE
        text = "everything the run did was undone: tell the customer the request was not carried out, then resolve"
    elif undone:
        # Something remains: a step only partly taken back, one nothing undoes, or one still
        # undoable. Only the last is offered as an undo.
        code = NextActionCode.FINISH_BY_HAND
        text = f"{', '.join(_words(c.tool) for c in undone)} was undone, so resuming is not possible"
        remains = [
            f"{_words(c.tool)} was only partly undone ({c.compensation.not_undone})"
            for c in partly
            if c.compensation
        ]
        if irreversible:
            remains.append(f"{', '.join(_words(c.tool) for c in irreversible)} cannot be undone")
        if remains:
            text += f"; what remains: {'; '.join(remains)}"
        text += ": finish by hand"
        if undoable:
            text += f", or undo what still stands ({', '.join(_words(c.tool) for c in undoable)})"
    elif not_done and run.status == RunStatus.RUNNING and not stuck:
        code = NextActionCode.WAIT_FOR_AGENT
        text = "the agent is still working this run: wait"
    elif not_done:
        code = NextActionCode.RESUME
        todo = ", ".join(f"{_words(n.tool)}" + (f" ({n.detail})" if n.detail else "") for n in not_done)
        undo = "; ".join(
            f"{_words(a.undo_tool)} to undo {_words(a.tool)}"
            + (f" ({a.reversibility.sentence})" if a.reversibility.conditional else "")
            for a in available
        )
        text = f"resume the run to {todo}"
        if undo:
            text += f", or {undo} if the customer would rather not go ahead"
    elif completed:
        code = NextActionCode.CHECK_AND_RESOLVE
        text = "everything planned was done: check what the customer was told, then resolve"
    else:
        code = NextActionCode.RESUME_OR_RESOLVE
        text = "nothing was changed downstream: resume the run, or resolve it with a note"
    # Work before anything else (an uncertain step, an undo failed or under way) still waits on
    # a person even on an ended run; otherwise an ended run with no escalation open waits on nobody.
    waiting = bool(uncertain or failed_undo or pending_undo) or not ended_unattended
    return NextAction(code=code, text=text, compensations_available=available, waiting=waiting)


def run_state_token(run: Run, rows: HandoverRows | None = None) -> str:
    """What a page saw of a run: its row version, its newest journal event and newest audit row.
    An action carrying an older token acts on a run that has changed since and is refused."""
    if rows is not None:
        last_event = rows.last_event_id
        last_audit = max((a.seq for a in rows.audit), default=0)
    else:
        last_event = run.events.aggregate(last=Max("id"))["last"] or 0
        last_audit = run.audit_entries.aggregate(last=Max("seq"))["last"] or 0
    return f"{run.version}.{last_event}.{last_audit}"


def _when_words(at: datetime) -> str:
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M %Z")


def reason_now(
    rows: HandoverRows,
    *,
    reason: str,
    completed: Sequence[CompletedStep | StandingStep],
    uncertain: list[UncertainStep],
) -> tuple[bool, str]:
    """Whether the run's reason for needing a person is still true, and if not what answered it,
    from the rows: an escalation resolved answers any reason; an unknown outcome is answered
    once nothing is uncertain, a failed undo once no dead letter of the run is open. Other
    reasons (policy, a death mid-sequence, versions, a deadline) hold while the escalation is open."""
    run = rows.run
    if not reason:
        return True, ""
    if run.status == RunStatus.RUNNING and reason == "run_stuck":
        return True, ""
    escalated_at = max(
        (
            e.pk
            for e in rows.events
            if e.kind == JournalEvent.Kind.RUN_ESCALATED
            or (e.kind == JournalEvent.Kind.RUN_COMPENSATED and "reason" in e.data)
        ),
        default=0,
    )
    later = [e for e in rows.events if e.pk > escalated_at]
    if not run.awaiting_person and run.status != RunStatus.RUNNING:
        resolved = next((e for e in reversed(later) if e.kind == JournalEvent.Kind.ESCALATION_RESOLVED), None)
        if resolved is not None:
            note = resolved.data.get("note", "")
            return False, (
                f"resolved by {resolved.actor_name} at {_when_words(resolved.at)}"
                + (f": {note}" if note else "")
            )
        return False, f"nobody waits on this run now: it is {run.get_status_display().lower()}"
    if reason == OutcomeReason.UNKNOWN_OUTCOME and not uncertain:
        settled = [
            e
            for e in later
            if e.intent is not None
            and e.intent_id not in rows.compensation_intent_ids
            and e.kind in (JournalEvent.Kind.OUTCOME_RECORDED, JournalEvent.Kind.INTENT_RECONCILED)
        ]
        words = [
            f"{_words(e.intent.tool)} "
            + (
                f"marked {e.data.get('status', e.intent.status)} by {e.actor_name}"
                if e.data.get("judged_by")
                else f"found {e.data.get('status', e.intent.status)} by {e.actor_name}"
            )
            + f" at {_when_words(e.at)}"
            + (f" ({e.data['note']})" if e.data.get("note") else "")
            for e in settled
            if e.intent is not None
        ]
        return False, "; ".join(words) or "nothing is uncertain any more"
    if reason == OutcomeReason.COMPENSATION_FAILED and not any(c.undo_failed for c in completed):
        words = [
            f"{_words(c.tool)}: dead letter resolved by {c.compensation.settled_by_hand}"
            if c.settled_by_hand and c.compensation
            else f"{_words(c.tool)}: the undo went through on a retry"
            for c in completed
            if c.compensation is not None and c.compensation.dead_letter is not None
        ]
        return False, "; ".join(words) or "no undo of this run is failing any more"
    return True, ""


def handover_build(rows: HandoverRows, now: datetime | None = None, *, limit: int | None = None) -> Handover:
    """The handover of the rows. With `limit`, its completed list holds the first `limit` steps
    (and any an undo was asked for) for handover_cut to draw: the steps past them, which nobody
    will see, are read for the next action and `totals` only (StandingStep)."""
    if limit is None and not rows.complete:
        raise ValueError("these rows were loaded for a handover cut to its first items: pass its limit")
    now = now or timezone.now()
    run = rows.run
    planned = plan_with_keys(run)
    plan_detail = {step["key"]: step.get("detail", "") for step in planned}
    completed, every_step = _completed(rows, plan_detail, now, limit)
    not_done = _not_done(rows, planned)
    uncertain = _uncertain(rows, plan_detail)
    reason = run.outcome_reason or ("run_stuck" if rows.stuck else "")
    customer_told = _customer_told(rows)
    already_so = _already_so(rows, plan_detail)
    lists: dict[str, list[Any]] = {
        "completed": completed,
        "not_done": not_done,
        "uncertain": uncertain,
        "already_so": already_so,
        "customer_told": customer_told,
    }
    holds, answered = reason_now(rows, reason=reason, completed=every_step, uncertain=uncertain)
    return Handover(
        handover_version=HANDOVER_VERSION,
        run_id=run.pk,
        ticket_id=run.ticket_id,
        order_id=run.order_id,
        task_type=run.task_type,
        status=RunStatus(run.status),
        reason=reason,
        reason_detail=run.outcome_detail,
        reason_holds=holds,
        reason_answered=answered,
        awaiting_person=run.awaiting_person,
        assignee=run.assignee.get_username() if run.assignee_id and run.assignee else None,
        completed=completed,
        not_done=not_done,
        uncertain=uncertain,
        customer_told=customer_told,
        already_so=already_so,
        next_action=next_action(
            run=run, completed=every_step, not_done=not_done, uncertain=uncertain, stuck=rows.stuck
        ),
        coverage=Coverage.of(rows.coverage) if rows.coverage is not None else None,
        versions=run.versions,
        deadline=run.deadline,
        deadline_passed=bool(run.deadline and run.deadline <= now),
        state=run_state_token(run, rows),
        totals={name: len(items) for name, items in lists.items()} | {"completed": len(every_step)},
    )


def handover_for(run: Run, limit: int | None = None) -> Handover:
    """The run's handover, its lists cut to their first `limit` items (None: whole)."""
    return handover_cut(handover_build(handover_rows(run, limit=limit), limit=limit), limit)


# How many items of each of its lists a handover answers with unless asked for all (the API's
# ?all=1, the run page's "show all" links): a run of 10,000 calls answers as fast as one of ten.
HANDOVER_LIST_LIMIT = 50
HANDOVER_LISTS = ("completed", "not_done", "uncertain", "already_so", "customer_told")


def handover_cut(handover: Handover, limit: int | None = HANDOVER_LIST_LIMIT) -> Handover:
    """The handover with each list cut to its first `limit` items (None: whole); `totals` keeps
    each list's length."""
    if limit is None:
        return handover
    return dataclasses.replace(handover, **{name: getattr(handover, name)[:limit] for name in HANDOVER_LISTS})
