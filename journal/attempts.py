"""The error taxonomy's responses, enforced where an agent records its next intent: after a call
of a tool failed, what the agent may do next with that tool.

- `permanent`: the same call (same tool, same canonical arguments) is refused; a changed call is
  a new attempt.
- `invalid_input`: the same call is refused (it would be refused again); a changed call is a
  repair, and a run has `repairs` of them per tool.
- `transient`: the same call is a retry, `retries` of them per call, each at least
  `retry_spacing_seconds` after the last failure (a retry storm is refused with when to come
  back).
- `conflict`: read the new state and replan; the same call is admitted (the state may have moved).
- `bug`: the run is stopped and handed to a person when the outcome is recorded
  (journal.outcomes), so no intent follows.

Each refusal is an AttemptRefused with a typed `code` (AttemptCode) the runtime acts on, and a
journal event; a run refused `loop_refusals` times within `loop_minutes` is looping and goes to a
person (RunWhy.LOOPING) with the calls that show it. The budgets are per task type, from
settings.SEAM_ERROR_BUDGETS ("*" the default).

A person may allow a call refused after a `permanent` or `invalid_input` failure
(`attempt_allow`, an attempt_allowed event on the failed intent): that call's failures up to the
allowed one no longer count against the next intent, until the same call is recorded again, so
exactly one more such call is admitted; and the run's refusals before the allowance no longer
count toward a loop."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from .durability import durable
from .errors import Conflict
from .escalations import run_hand_over
from .events import Actor, event_record
from .keys import canonical_json
from .models import ErrorClass, Intent, IntentStatus, JournalEvent, OutcomeReason, Run, RunStatus
from .why import RunWhy, why


class AttemptCode(StrEnum):
    PERMANENT_REPEATED = "permanent_repeated"
    INVALID_REPEATED = "invalid_input_repeated"
    REPAIRS_SPENT = "repairs_spent"
    RETRIES_SPENT = "retries_spent"
    RETRY_TOO_SOON = "retry_too_soon"


# The refusals that count toward a loop: the agent repeating what a permanent or invalid-input
# error already answered.
LOOPING_CODES = (AttemptCode.PERMANENT_REPEATED, AttemptCode.INVALID_REPEATED, AttemptCode.REPAIRS_SPENT)
# The refusals a person may lift for one call (attempt_allow): the same call again after a
# permanent or invalid-input failure, which only a change outside the call (a permission granted,
# the downstream's data put right) can make pass.
ALLOWABLE_CODES = (AttemptCode.PERMANENT_REPEATED, AttemptCode.INVALID_REPEATED)


class AttemptRefused(Conflict):
    """The next intent is refused by the taxonomy's response to an earlier failure: `code` says
    which, `retry_after` (seconds) when to come back for a retry that came too soon."""

    def __init__(self, message: str, *, code: AttemptCode, retry_after: float | None = None) -> None:
        super().__init__(message, field="tool")
        self.code = code
        self.retry_after = retry_after


@dataclass(frozen=True)
class Budgets:
    repairs: int
    retries: int
    retry_spacing_seconds: float
    loop_refusals: int
    loop_minutes: float


def budgets_for(task_type: str) -> Budgets:
    declared: dict[str, dict[str, Any]] = settings.SEAM_ERROR_BUDGETS
    return Budgets(**{**declared["*"], **declared.get(task_type, {})})


@dataclass(frozen=True)
class _Failure:
    pk: int
    tool: str
    args: dict[str, Any]
    error_class: str
    settled_at: datetime | None


def has_failed_call(run_pk: Any, tool: str) -> bool:
    """Whether a call of `tool` failed in the run: then the next intent of it is checked here
    (the single statement that records intents leaves it to this module)."""
    return Intent.objects.filter(run_id=run_pk, tool=tool, status=IntentStatus.FAILED).exists()


def attempt_check(*, run_pk: Any, tool: str, args: dict[str, Any], actor: Actor) -> None:
    """Refuse the next intent of `tool` with `args` if the taxonomy's response to the run's
    earlier failures of that tool says so (the module's docstring): AttemptRefused, after its
    event is recorded and, when the run is looping, the run is handed to a person."""
    run = Run.objects.get(pk=run_pk)
    refusal = _refusal(tool, args, _failures(run, tool), budgets_for(run.task_type))
    if refusal is not None:
        _refused(run, tool, refusal, actor=actor)
        raise refusal


def _failures(run: Run, tool: str) -> list[_Failure]:
    """The run's failed calls of `tool` that count against its next intent, in order."""
    failures = [
        _Failure(f["id"], tool, f["args"], f["error_class"], f["settled_at"])
        for f in Intent.objects.filter(run=run, tool=tool, status=IntentStatus.FAILED)
        .order_by("intended_at", "id")
        .values("id", "args", "error_class", "settled_at")
    ]
    return _counted(run, failures)


def _counted(run: Run, failures: list[_Failure]) -> list[_Failure]:
    """The run's `failures` without those a person allowed: an allowance lifts its call's
    failures up to the allowed one, until that call (tool and arguments) is recorded again,
    which spends it."""
    if not failures:
        return failures
    allowed_ids = set(
        JournalEvent.objects.filter(
            run=run, kind=JournalEvent.Kind.ATTEMPT_ALLOWED, intent_id__in=[f.pk for f in failures]
        ).values_list("intent_id", flat=True)
    )
    lifted: set[int] = set()
    for allowed in (f for f in failures if f.pk in allowed_ids):
        spent = Intent.objects.filter(
            run=run, tool=allowed.tool, args=allowed.args, pk__gt=allowed.pk
        ).exists()
        if not spent:
            lifted.update(
                f.pk
                for f in failures
                if (f.tool, f.args) == (allowed.tool, allowed.args) and f.pk <= allowed.pk
            )
    return [f for f in failures if f.pk not in lifted]


def _refusal(
    tool: str, args: dict[str, Any], failures: list[_Failure], budgets: Budgets
) -> AttemptRefused | None:
    """The refusal of a call of `tool` with `args` after the tool's counted `failures`, if any."""
    same = [f for f in failures if f.args == args]
    if any(f.error_class == ErrorClass.PERMANENT for f in same):
        return AttemptRefused(
            f"{tool} failed for good with these arguments; change the call or the plan",
            code=AttemptCode.PERMANENT_REPEATED,
        )
    if any(f.error_class == ErrorClass.INVALID_INPUT for f in same):
        return AttemptRefused(
            f"{tool} refused these arguments; repair them", code=AttemptCode.INVALID_REPEATED
        )
    repairs = sum(1 for f in failures if f.error_class == ErrorClass.INVALID_INPUT)
    if not same and repairs > budgets.repairs:
        return AttemptRefused(
            f"{tool} was repaired {budgets.repairs} times already", code=AttemptCode.REPAIRS_SPENT
        )
    return _retry_refusal(tool, [f for f in same if f.error_class == ErrorClass.TRANSIENT], budgets)


def _retry_refusal(tool: str, transient: list[_Failure], budgets: Budgets) -> AttemptRefused | None:
    if not transient:
        return None
    if len(transient) > budgets.retries:
        return AttemptRefused(
            f"{tool} was retried {budgets.retries} times already", code=AttemptCode.RETRIES_SPENT
        )
    last = transient[-1].settled_at
    wait = budgets.retry_spacing_seconds - (timezone.now() - last).total_seconds() if last else 0.0
    if wait > 0:
        return AttemptRefused(
            f"{tool} failed {wait:.1f} s too recently to be retried",
            code=AttemptCode.RETRY_TOO_SOON,
            retry_after=round(wait, 3),
        )
    return None


# --- a person allows a refused call again --------------------------------------------------------


def allowable_steps(run: Run, failed: Iterable[Intent]) -> dict[str, AttemptCode]:
    """Of the run's failed intents (`failed`, every one of them, as a page has them loaded), the
    steps a person may allow again, each with the refusal it lifts: the newest counted failure of
    each call the taxonomy would refuse now with an ALLOWABLE_CODES refusal. Reads the run's
    allowances only when there is a failure."""
    intents = sorted(
        (i for i in failed if i.status == IntentStatus.FAILED), key=lambda i: (i.intended_at, i.pk)
    )
    counted = _counted(run, [_Failure(i.pk, i.tool, i.args, i.error_class, i.settled_at) for i in intents])
    steps = {i.pk: i.step_id for i in intents}
    budgets = budgets_for(run.task_type)
    newest: dict[tuple[str, str], _Failure] = {}
    for failure in counted:
        newest[(failure.tool, canonical_json(failure.args))] = failure
    allowable: dict[str, AttemptCode] = {}
    for failure in newest.values():
        of_tool = [f for f in counted if f.tool == failure.tool]
        refusal = _refusal(failure.tool, failure.args, of_tool, budgets)
        if refusal is not None and refusal.code in ALLOWABLE_CODES:
            allowable[steps[failure.pk]] = refusal.code
    return allowable


def attempt_allow(
    *, run: Run, intent: Intent, actor: Actor, at: datetime | None = None
) -> AttemptCode | None:
    """A person allows the failed `intent`'s call again: the refusal it lifts, recorded as an
    attempt_allowed event; or None, and nothing written, when the call is not one a person may
    allow now (allowable_steps). Written in the caller's transaction, which holds the run's row
    lock and writes the person's audit row beside it (console.actions)."""
    failed = Intent.objects.filter(run=run, tool=intent.tool, status=IntentStatus.FAILED)
    code = allowable_steps(run, failed).get(intent.step_id)
    if code is None:
        return None
    event_record(
        run=run,
        intent=intent,
        kind=JournalEvent.Kind.ATTEMPT_ALLOWED,
        actor=actor,
        at=at or timezone.now(),
        data={"tool": intent.tool, "intent": intent.pk, "code": str(code)},
    )
    return code


def _refused(run: Run, tool: str, refusal: AttemptRefused, *, actor: Actor) -> None:
    """Record the refusal; hand a run that keeps being refused to a person."""
    now = timezone.now()
    budgets = budgets_for(run.task_type)
    with durable():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        event_record(
            run=locked,
            kind=JournalEvent.Kind.ATTEMPT_REFUSED,
            actor=actor,
            at=now,
            data={"tool": tool, "code": str(refusal.code)},
        )
        since = now - timedelta(minutes=budgets.loop_minutes)
        # Only repeats against a permanent or invalid-input error make a loop (the reason says
        # so); a retry storm on a transient error is refused, and paced, but is no such loop.
        # A person's allowance starts the count afresh: the refusals it answered are not the loop.
        allowed = (
            locked.events.filter(kind=JournalEvent.Kind.ATTEMPT_ALLOWED)
            .order_by("-id")
            .values_list("id", flat=True)
            .first()
        )
        refusals = locked.events.filter(
            kind=JournalEvent.Kind.ATTEMPT_REFUSED,
            data__code__in=LOOPING_CODES,
            at__gte=since,
            id__gt=allowed or 0,
        ).count()
        if refusals >= budgets.loop_refusals and locked.status == RunStatus.RUNNING:
            run_hand_over(
                run=locked,
                reason=OutcomeReason.POLICY,
                why=_looping(locked, refusals, budgets),
                actor=actor,
                at=now,
            )


def _looping(run: Run, refusals: int, budgets: Budgets) -> Any:
    """The looping run's reason, with the calls that show it: each failing tool and class, and
    how many times it failed."""
    calls = (
        run.intents.filter(status=IntentStatus.FAILED)
        .values("tool", "error_class")
        .annotate(attempts=Count("id"))
        .order_by("-attempts", "tool")
    )
    return why(RunWhy.LOOPING, refusals=refusals, minutes=budgets.loop_minutes, calls=list(calls))


def stop_on_bug(*, intent: Intent, message: str, actor: Actor) -> None:
    """A call answered with a bug (the answer is not what the tool expects): the run stops and
    goes to a person with the evidence; nothing the agent sends next is admitted."""
    with durable():
        run = Run.objects.select_for_update().get(pk=intent.run_id)
        if run.status == RunStatus.RUNNING:
            stopped = why(RunWhy.BUG_ANSWER, tool=intent.tool, step_id=intent.step_id, message=message)
            run_hand_over(run=run, reason=OutcomeReason.RUN_DIED_MID_SEQUENCE, why=stopped, actor=actor)
