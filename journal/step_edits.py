"""A person's correction of a planned step's arguments before the run is resumed, as agent
inboxes let a reviewer edit a tool call before approving it.

The edit rewrites that step of the run's plan. A planned step's idempotency key derives from its
arguments (journal.selectors.plan_with_keys), so from then on the handover, the resume preview and
the resumption itself (reconciliation.decisions.run_resume) see the new arguments under a new key:
nothing keeps the old key for them. An edit is refused once the step's call was sent (in flight,
in doubt, performed or already so), and refused when its new key names a call this run already
recorded or another planned step: a key is never reused for other arguments.

Written in the caller's transaction, which holds the run's row lock and writes the person's audit
row beside it (console.actions.step_args_edit_request); the run's version is bumped here with a
compare-and-swap, so a page or writer holding the old plan is refused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F
from django.utils import timezone

from .durability import inside_open_transaction
from .errors import Conflict, InvalidInput, NotFound
from .events import Actor, event_record
from .keys import idempotency_key
from .models import Intent, IntentStatus, JournalEvent, Run, RunStatus
from .selectors import plan_with_keys
from .validation import check_registered_arguments, clean_args_json

# The statuses of a step's intent that leave it editable: no call was sent (None), or the one
# sent is known not to have acted. Any other status means the call went out and may have acted.
EDITABLE_STATUSES: frozenset[str | None] = frozenset({None, IntentStatus.NOT_PERFORMED, IntentStatus.FAILED})


class StepNotEditable(Conflict):
    """The run or the step is not in a state where its arguments may be changed."""


@dataclass(frozen=True)
class StepArgsEdited:
    """What an edit changed: the step (its place in the plan and its tool), its arguments and
    its key before and after, and the journal event that records it."""

    index: int
    tool: str
    old_args: dict[str, Any]
    new_args: dict[str, Any]
    old_key: str
    new_key: str
    event: JournalEvent


def step_editable(*, run: Run, step_key: str) -> tuple[int, list[dict[str, Any]]]:
    """The step's place in the run's plan (with every planned step's key), when its arguments
    may be edited now; else StepNotEditable (or NotFound) saying why. The console's dialog asks
    it too, so it says what the edit would refuse."""
    if not run.awaiting_person or run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        raise StepNotEditable("only a run waiting for a person has its steps edited", field="run")
    planned = plan_with_keys(run)
    index = next((i for i, step in enumerate(planned) if step["key"] == step_key), None)
    if index is None:
        raise NotFound(
            "the run plans no step with that key (it may have been edited meanwhile)", field="step"
        )
    sent = (
        Intent.objects.filter(run=run, run_created_at=run.created_at, idempotency_key=step_key)
        .values_list("status", flat=True)
        .first()
    )
    if sent not in EDITABLE_STATUSES:
        raise StepNotEditable(
            f"{planned[index]['tool']} was already sent ({sent}); its arguments stay as sent", field="step"
        )
    return index, planned


def step_args_check(*, run: Run, step_key: str, args: Any) -> tuple[int, dict[str, Any], dict[str, Any], str]:
    """The checks of step_args_edit without writing: the step's place in the plan, its planned
    entry, the new arguments canonicalised, and the key they would be sent with. The console's
    preview calls it so the diff it shows is refused by the same rules as the edit."""
    index, planned = step_editable(run=run, step_key=step_key)
    step = planned[index]
    new_args, _spelled = clean_args_json(args)
    check_registered_arguments(step["tool"], new_args)
    if new_args == step.get("args", {}):
        raise InvalidInput("args are unchanged: change at least one argument", field="args")
    new_key = idempotency_key(
        key_namespace=run.tenant.key_namespace,
        run_id=str(run.pk),
        tool=step["tool"],
        args=new_args,
        policy_version=run.policy_version,
        occurrence=step.get("occurrence", 0),
    )
    if any(other["key"] == new_key for other in planned):
        raise StepNotEditable("another planned step already sends these arguments", field="args")
    if Intent.objects.filter(idempotency_key=new_key, run_created_at=run.created_at).exists():
        raise StepNotEditable(
            "a call with these arguments was already recorded for this run; its key is not reused",
            field="args",
        )
    return index, step, new_args, new_key


def step_args_edit(
    *, run: Run, step_key: str, args: Any, actor: Actor, at: datetime | None = None
) -> StepArgsEdited:
    """Replace the arguments of the planned step whose key is `step_key` with `args` (validated
    by the tool's schema, refused naming the field), bump the run's version and record a
    step_args_edited event with the old and new arguments and keys. Refused (StepNotEditable)
    unless the run waits for a person and the step's call was never sent or is known not to
    have acted. Runs inside the caller's transaction, which must hold the run's row lock."""
    if not inside_open_transaction():
        raise RuntimeError("step_args_edit runs inside the transaction that locks the run's row")
    index, step, new_args, new_key = step_args_check(run=run, step_key=step_key, args=args)
    now = at or timezone.now()
    plan = [dict(entry) for entry in run.plan]
    plan[index] = {**plan[index], "args": new_args}
    moved = Run.objects.filter(pk=run.pk, version=run.version).update(
        plan=plan, version=F("version") + 1, updated_at=now
    )
    if moved != 1:
        raise Conflict("the run changed meanwhile; nothing was edited", field="run")
    run.plan, run.updated_at, run.version = plan, now, run.version + 1
    old_args = step.get("args", {})
    intent = Intent.objects.filter(run=run, run_created_at=run.created_at, idempotency_key=step_key).first()
    event = event_record(
        run=run,
        intent=intent,
        kind=JournalEvent.Kind.STEP_ARGS_EDITED,
        actor=actor,
        at=now,
        data={
            "index": index,
            "tool": step["tool"],
            "old_args": old_args,
            "new_args": new_args,
            "old_key": step_key,
            "new_key": new_key,
        },
    )
    return StepArgsEdited(
        index=index,
        tool=step["tool"],
        old_args=old_args,
        new_args=new_args,
        old_key=step_key,
        new_key=new_key,
        event=event,
    )
