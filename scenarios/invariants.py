"""What must hold after a run died, checked against the sandbox's ledger (the world) rather
than against Seam's own rows alone."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from handover.models import Intent, IntentStatus, Run

PRECONDITION_PREFIX = "precondition:"


@dataclass(frozen=True)
class WorldCheck:
    performed: int  # intents settled as performed
    open: int  # intents still `intended`
    effects: int  # the run's effects in the ledger (excluding preconditions)
    violations: tuple[str, ...]


def check_run(run: Run, *, world_is_this_run: bool = True) -> WorldCheck:
    """With `world_is_this_run` (a test's fresh world), any effect without an intent row in
    front of it is an orphan. Otherwise (a shared demo world) only this run's effects — by key,
    or by business reference for the ERP — are considered."""
    from sandbox.models import Effect  # the sandbox is the world; Seam's code never imports it

    intents = list(Intent.objects.filter(run=run))
    keys = {i.idempotency_key: i for i in intents}
    references = {str(i.args.get("reference")): i for i in intents if i.tool == "adjust_stock"}
    violations: list[str] = []
    ledger = Effect.objects.all()
    if not world_is_this_run:
        ledger = ledger.filter(idempotency_key__in=list(keys)) | ledger.filter(
            idempotency_key="", business_ref__in=list(references)
        )
    effects = [e for e in ledger if not (e.idempotency_key or "").startswith(PRECONDITION_PREFIX)]
    mine = []
    for effect in effects:
        if effect.idempotency_key:
            if effect.idempotency_key not in keys:
                violations.append(
                    f"orphan write: {effect.provider}.{effect.operation} key {effect.idempotency_key}"
                )
                continue
        elif effect.business_ref not in references:
            violations.append(
                f"orphan write without key: {effect.provider}.{effect.operation} ref {effect.business_ref}"
            )
            continue
        mine.append(effect)
    twice = [
        k for k, n in Counter(e.idempotency_key or f"ref:{e.business_ref}" for e in mine).items() if n > 1
    ]
    violations.extend(f"effect performed twice: {k}" for k in twice)
    open_rows = [i for i in intents if i.status == IntentStatus.INTENDED]
    if len(open_rows) > 1:
        violations.append(f"{len(open_rows)} intents left open; a run has at most one call in flight")
    performed = [i for i in intents if i.status == IntentStatus.PERFORMED]
    effect_keys = {e.idempotency_key for e in mine if e.idempotency_key}
    effect_refs = {e.business_ref for e in mine if not e.idempotency_key}
    for intent in performed:
        exists = intent.idempotency_key in effect_keys or (
            intent.tool == "adjust_stock" and str(intent.args.get("reference")) in effect_refs
        )
        if not exists:
            violations.append(f"{intent.step_id} is recorded as performed but the world has no such effect")
    return WorldCheck(
        performed=len(performed), open=len(open_rows), effects=len(mine), violations=tuple(violations)
    )
