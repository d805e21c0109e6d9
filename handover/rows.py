"""The handover's rows: everything a handover (and the run page's timeline) is generated from,
loaded in a fixed number of queries however long the run, and the state token a page saw."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar, NamedTuple

from django.db.models import Max, Q
from django.utils import timezone

from audit.models import AuditEntry
from compensations.models import Compensation
from compensations.reversibility import may_undo
from compensations.selectors import catalogue_for
from fanout.selectors import run_coverage
from journal.models import CustomerMessage, Intent, IntentStatus, JournalEvent, Run, RunStatus
from journal.selectors import compensation_intent_ids_in, stuck_runs
from tools.registry import all_tools


# Not frozen, with slots: a long run builds one per step past the shown ones, and a frozen
# dataclass's __init__ costs three times as much. Nothing assigns to one after it is built.
@dataclass(slots=True)
class PerformedStep:
    """A performed step of a long run that no list shows whole, read without building a model:
    no undo was asked for it and no loaded event names it. Its arguments, receipt and times are
    read (`args`, `receipt`, `intended_at`, `settled_at`) only when its tool is one the catalogue
    may undo, the customer hears from or a customer-facing tool announces, the only cases the
    handover reads them in for a step it does not show; otherwise None. The handover counts it,
    tells whether it can still be undone, names it in the next action and checks declared links
    against it; building 10,000 of them as models cost a run of 10,000 calls a third of its
    page's time, and reading every one's JSON and times another fifth (bench/pages.py)."""

    pk: int
    step_id: str
    tool: str
    idempotency_key: str
    intended_at: datetime | None = None
    settled_at: datetime | None = None
    args: dict[str, Any] | None = None
    receipt: dict[str, Any] | None = None
    status: ClassVar[str] = IntentStatus.PERFORMED
    error_class: ClassVar[str] = ""


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
    # past them read as scalars, in order. `intents` then holds every other step, and `order`
    # every step's id in order (the tail's times are not all read).
    tail: list[PerformedStep] = field(default_factory=list)
    order: list[int] = field(default_factory=list)

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
        by_pk: dict[int, Intent | PerformedStep] = {s.pk: s for s in self.tail}
        by_pk.update((i.pk, i) for i in self.intents)
        return [by_pk[pk] for pk in self.order]


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


# What a handover reads of every performed step it does not load whole (PerformedStep's first
# fields); its times and JSON are read for some tools only (_tail_details).
PERFORMED_STEP_COLUMNS = ("id", "step_id", "tool", "idempotency_key")


class _CutIntents(NamedTuple):
    intents: list[Intent]
    tail: list[PerformedStep]
    order: list[int]
    catalogue: dict[str, Any]


def _detailed_tools(catalogue: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The tools whose steps the handover reads more of even when it does not show them: (those
    whose arguments and receipt it reads, those whose times it reads). The arguments and receipt
    of the tools the catalogue may undo (whether and how each step can be undone depends on
    them) and of those the customer hears from (what they were told); the times of those, and of
    the tools a customer-facing tool announces (whether the message came after them)."""
    facing = {
        name: spec.customer_facing for name, spec in all_tools().items() if spec.customer_facing is not None
    }
    read = {tool for tool, entry in catalogue.items() if may_undo(entry)} | set(facing)
    return read, read | {tool for f in facing.values() for tool in f.announces}


def _tail_details(run: Run, tools: tuple[set[str], set[str]], tail: list[PerformedStep]) -> None:
    """Fill in the times, and the arguments and receipt, of the tail's steps of those tools
    (_detailed_tools): one query, for those rows only. Reading them for every row (two JSON values
    and two times each) cost a run of 10,000 calls more than the rest of its read (bench/pages.py)."""
    read, dated = tools
    if not dated or not tail:
        return
    details = {
        pk: rest
        for pk, *rest in run.intents.filter(
            tool__in=sorted(dated), status=IntentStatus.PERFORMED
        ).values_list("id", "intended_at", "settled_at", "args", "receipt")
    }
    for step in tail:
        found = details.get(step.pk)
        if found is not None:
            step.intended_at, step.settled_at = found[0], found[1]
            if step.tool in read:
                step.args, step.receipt = found[2], found[3]


def _cut_intents(
    run: Run,
    *,
    limit: int,
    compensations: dict[int, Any],
    compensation_intent_ids: set[int],
    named: set[int],
) -> _CutIntents:
    """The run's steps for a handover cut to its first `limit` items: the intents loaded whole,
    the other performed steps as PerformedSteps, every step's id in order, and the catalogue
    entries of the run's tools.

    Loaded whole: the first `limit` calls (the run page's calls list) and the first `limit`
    performed steps (the completed list), every step not performed, every undo and every step
    with one, and every step an event in `named` belongs to (the timeline's). Of the others, the
    times, arguments and receipt are read for some tools only (_detailed_tools)."""
    # Every entry of the tenant's catalogue (tens of rows): which tools the run used is not known
    # before its steps are read, and reading them twice costs more.
    catalogue = catalogue_for(tenant_id=run.tenant_id)
    ordered = run.intents.order_by("intended_at", "id")
    scalars = list(ordered.values_list("status", *PERFORMED_STEP_COLUMNS))
    keep: set[int] = set()
    tail: list[PerformedStep] = []
    performed = 0  # performed steps so far that are not undos: the completed list's order
    for position, (status, pk, step_id, tool, key) in enumerate(scalars):
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
            tail.append(PerformedStep(pk, step_id, tool, key))
    _tail_details(run, _detailed_tools(catalogue), tail)
    intents = list(ordered.filter(pk__in=keep) if tail else ordered)
    return _CutIntents(intents, tail, [row[1] for row in scalars] if tail else [], catalogue)


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
    # (after an admin fixed the catalogue) shows the live one. Found by the compensations' copy of
    # their original's run, one index lookup, not through every intent of the run.
    compensations = {
        c.original_id: c
        for c in Compensation.objects.filter(run=run)
        .select_related("dead_letter__owner", "dead_letter__resolved_by", "intent")
        .order_by("id")
    }
    compensation_intent_ids = compensation_intent_ids_in(events)  # notable: all of them are loaded
    tail: list[PerformedStep] = []
    order: list[int] = []
    if limit is None:
        intents = list(run.intents.order_by("intended_at", "id"))
        tools = {i.tool for i in intents} | {step.get("tool", "") for step in run.plan}
        catalogue = catalogue_for(tenant_id=run.tenant_id, tools=tools)
    else:
        named = {e.intent_id for e in events if e.intent_id is not None}
        intents, tail, order, catalogue = _cut_intents(
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
        order=order,
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
