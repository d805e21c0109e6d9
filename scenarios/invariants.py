"""What must hold after a run died, checked against the world rather than against Seam's own
rows alone.

The world is asked the way reconciliation asks it: each performed or open intent's own tool
connector looks its call up (by key, by business id, by an object's state: whatever that
provider offers), so a flow on any provider is checked by its own connectors and a provider
other than the sandbox shows no false violations. A recorded-as-performed call its provider
says was not performed is a violation; a provider that cannot say leaves the call unconfirmed.

No lookup can see an effect nobody recorded, so the demo's sandbox, which can list every effect
in its ledger, is also asked for orphans and doubles. An effect in the ledger belongs to an
intent by its idempotency key; the legacy ERP ignores keys, so its effects belong by what the
call carried (sku, qty and reference: a stock correction and its undo share the reference and
differ in the sign of the quantity)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from handover import handover_for
from journal.models import Intent, IntentStatus, JournalEvent, Run
from journal.selectors import compensation_intent_ids
from journal.tool_errors import ToolError
from sandbox.models import Effect
from tools.connectors import AlreadySo, LookupResult, NotPerformed, Performed, Unknown, caused_by_intent
from tools.registry import find_tool
from tools.services import lookup_query

PRECONDITION_PREFIX = "precondition:"
# Tools whose provider ignores idempotency keys, and the arguments that identify one call.
KEYLESS_IDENTITY: dict[str, tuple[str, ...]] = {"adjust_stock": ("sku", "qty", "reference")}


@dataclass(frozen=True)
class WorldCheck:
    performed: int  # intents settled as performed
    open: int  # intents still `intended`
    effects: int  # the run's performed or open calls whose provider says they were performed
    violations: tuple[str, ...]
    # Performed or open calls whose provider could not say (no lookup, or the lookup failed).
    unconfirmed: tuple[str, ...] = ()


def intent_lookup(intent: Intent) -> LookupResult:
    """What the intent's own tool connector says became of its call. An unregistered tool, or a
    lookup that failed, cannot say: Unknown."""
    spec = find_tool(intent.tool)
    if spec is None:
        return Unknown(f"{intent.tool} is not a registered tool")
    try:
        query = lookup_query(intent)
        return caused_by_intent(spec.get_connector().lookup(query), query)
    except ToolError as exc:
        return Unknown(f"the lookup failed ({exc.error_class}): {exc.message}")


def _identity(values: dict[str, Any], names: tuple[str, ...]) -> str:
    return "ref:" + "|".join(str(values.get(name)) for name in names)


def intent_identity(intent: Intent) -> str:
    """What names this intent's effect in the ledger: its key, or for a keyless provider what
    the call carried."""
    names = KEYLESS_IDENTITY.get(intent.tool)
    return _identity(intent.args, names) if names else intent.idempotency_key


def effect_identity(effect: Any) -> str:
    if effect.idempotency_key:
        return str(effect.idempotency_key)
    return _identity(effect.request, KEYLESS_IDENTITY.get(effect.operation, ("reference",)))


def _run_effects(intents: list[Intent], *, world_is_this_run: bool) -> list[Any]:

    ledger = Effect.objects.all()
    if not world_is_this_run:
        keys = [i.idempotency_key for i in intents]
        references = [str(i.args.get("reference")) for i in intents if i.tool in KEYLESS_IDENTITY]
        ledger = ledger.filter(idempotency_key__in=keys) | ledger.filter(
            idempotency_key="", business_ref__in=references
        )
    return [e for e in ledger if not (e.idempotency_key or "").startswith(PRECONDITION_PREFIX)]


def check_run(run: Run, *, world_is_this_run: bool = True) -> WorldCheck:
    """Each performed or open intent's call, as its own connector looks it up; and, in the
    sandbox's ledger, orphans and doubles. With `world_is_this_run` (a test's fresh world), any
    ledger effect without an intent row in front of it is an orphan. Otherwise (a shared demo
    world) only this run's effects — by key, or by business reference for the ERP — are
    considered."""
    intents = list(Intent.objects.filter(run=run))
    violations = _ledger_violations(intents, world_is_this_run=world_is_this_run)
    open_rows = [i for i in intents if i.status == IntentStatus.INTENDED]
    if len(open_rows) > 1:
        violations.append(f"{len(open_rows)} intents left open; a run has at most one call in flight")
    performed = [i for i in intents if i.status == IntentStatus.PERFORMED]
    confirmed = 0
    unconfirmed: list[str] = []
    for intent in sorted([*performed, *open_rows], key=lambda i: i.pk):
        answer = intent_lookup(intent)
        if isinstance(answer, Performed):
            confirmed += 1
        elif isinstance(answer, NotPerformed):
            if intent.status == IntentStatus.PERFORMED:
                violations.append(
                    f"{intent.step_id} is recorded as performed but its provider says it was not"
                )
        elif isinstance(answer, AlreadySo):
            # The world was already so before the intent: nothing of this run's to count.
            if intent.status == IntentStatus.PERFORMED:
                violations.append(
                    f"{intent.step_id} is recorded as performed but the world was already so before it"
                )
        else:
            unconfirmed.append(f"{intent.step_id}: {answer.reason}")
    return WorldCheck(
        performed=len(performed),
        open=len(open_rows),
        effects=confirmed,
        violations=tuple(violations),
        unconfirmed=tuple(unconfirmed),
    )


def _ledger_violations(intents: list[Intent], *, world_is_this_run: bool) -> list[str]:
    """Orphans (an effect in the sandbox's ledger no intent stands in front of) and doubles (one
    intent's effect there twice): what only a provider that lists every effect can show."""
    identities = {intent_identity(i) for i in intents}
    violations: list[str] = []
    mine = []
    for effect in _run_effects(intents, world_is_this_run=world_is_this_run):
        if effect_identity(effect) not in identities:
            what = (
                f"key {effect.idempotency_key}"
                if effect.idempotency_key
                else f"without key, ref {effect.business_ref}"
            )
            violations.append(f"orphan write: {effect.provider}.{effect.operation} {what}")
            continue
        mine.append(effect)
    twice = [k for k, n in Counter(effect_identity(e) for e in mine).items() if n > 1]
    violations.extend(f"effect performed twice: {k}" for k in twice)
    return violations


SETTLE_EVENTS = (JournalEvent.Kind.OUTCOME_RECORDED, JournalEvent.Kind.INTENT_RECONCILED)


def check_recovered(run: Run) -> tuple[str, ...]:
    """After recovery (reconciliation, the policy's decision, any compensation re-run): the
    world check of `check_run`, and

    - nothing settled twice: each intent has at most one settling event (`outcome_recorded` or
      `intent_reconciled`) per admission (the first, plus one per `intent_readmitted`);
    - every event about an intent is about one of this run's intents (events refer to their run
      and intent without database constraints, so this is where a stray reference would show);
    - every intent settled or `unknown`: none is left `intended`;
    - the handover's `completed` equals the effects that exist: the step ids it lists are
      exactly the run's non-compensation intents whose effect is in the ledger (an `already_so`
      intent's effect predates it and is not the run's). An effect later
      undone by a compensation still happened, so it stays in `completed` (with its
      compensation); the undo effects themselves belong to compensation intents, which the
      handover never lists as completed work, and are checked here to exist exactly once for
      each performed compensation intent."""

    world = check_run(run)
    intents = list(Intent.objects.filter(run=run).order_by("id"))
    return (
        *world.violations,
        *(
            f"{i.step_id} is still intended after recovery"
            for i in intents
            if i.status == IntentStatus.INTENDED
        ),
        *_stray_events(run, intents),
        *_settled_twice(run, intents),
        *_completed_against_world(run, intents),
    )


def _stray_events(run: Run, intents: list[Intent]) -> list[str]:
    """Events of this run that name an intent the run does not have."""
    intent_ids = {intent.pk for intent in intents}
    strays = JournalEvent.objects.filter(run=run, intent__isnull=False).exclude(intent_id__in=intent_ids)
    return [
        f"the {kind} event of intent {intent_id} names an intent this run does not have"
        for kind, intent_id in strays.values_list("kind", "intent_id")
    ]


def _settled_twice(run: Run, intents: list[Intent]) -> list[str]:
    """Intents with more settling events than admissions (the first, plus one per re-admission)."""
    events = Counter(
        (intent_id, kind)
        for intent_id, kind in JournalEvent.objects.filter(
            run=run, kind__in=(*SETTLE_EVENTS, JournalEvent.Kind.INTENT_READMITTED)
        ).values_list("intent_id", "kind")
    )
    violations = []
    for intent in intents:
        settled = sum(events[(intent.pk, kind)] for kind in SETTLE_EVENTS)
        allowed = 1 + events[(intent.pk, JournalEvent.Kind.INTENT_READMITTED)]
        if settled > allowed:
            violations.append(f"{intent.step_id} was settled {settled} times (admitted {allowed})")
    return violations


def _completed_against_world(run: Run, intents: list[Intent]) -> list[str]:
    """The handover's `completed` against the effects in the world, and each performed undo's
    effect existing exactly once."""
    effects = Counter(effect_identity(e) for e in _run_effects(intents, world_is_this_run=True))
    undo_ids = compensation_intent_ids(run=run)
    listed = {item.step_id for item in handover_for(run).completed}
    # An already_so step's effect is in the world, but it predates the intent: someone else's,
    # which the handover rightly does not list as the run's work.
    existing = {
        i.step_id
        for i in intents
        if i.pk not in undo_ids and i.status != IntentStatus.ALREADY_SO and effects[intent_identity(i)]
    }
    violations = [
        f"the handover lists {step_id} as completed but the world has no such effect"
        for step_id in sorted(listed - existing)
    ]
    violations.extend(
        f"{step_id} happened in the world but the handover does not list it as completed"
        for step_id in sorted(existing - listed)
    )
    for intent in intents:
        if intent.pk in undo_ids and intent.status == IntentStatus.PERFORMED:
            count = effects[intent_identity(intent)]
            if count != 1:
                violations.append(f"undo {intent.step_id} exists {count} times in the world")
    return violations
