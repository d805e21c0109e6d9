"""What happens to a dead run once every call it made is settled: finished (resume), or handed
to a person (escalate) — by its task type's written policy, never by accident.

Resumption is allowed only when the policy allows it for the phase the run reached, the run's
wall-clock deadline and the policy's maximum age have not passed, and the versions the run was
recorded under match the running code (or a registered, tested upgrade exists). Resuming
re-derives each remaining planned step's idempotency key, so a step that was in fact performed
is found and never repeated. A run that must be compensated is
unwound by the compensations executor and handed to a person unless every write was undone."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string

from compensations.services import run_compensate
from compensations.tasks import compensate_step
from journal import services as journal
from journal import transitions
from journal.models import Intent, IntentStatus, JournalEvent, OutcomeReason, Run, RunStatus
from journal.selectors import plan_with_keys, stale_after, stuck_runs
from journal.tool_errors import ToolError
from journal.why import RunWhy, Why, why
from tools import services as tools
from tools.registry import UnknownTool

from .models import PHASES, Strategy, TaskPolicy
from .selectors import policy_for

# --- version upgrades -------------------------------------------------------------------------

Upgrade = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
UPGRADES: dict[tuple[str, str, str, str], Upgrade] = {}


def register_upgrade(task_type: str, field: str, recorded: str, running: str) -> Callable[[Upgrade], Upgrade]:
    """Declare a tested function that carries a run's plan from one recorded version of `field`
    (schema, flow, policy or capability) to the running one. Without one, a mismatch escalates."""

    def register(function: Upgrade) -> Upgrade:
        UPGRADES[(task_type, field, recorded, running)] = function
        return function

    return register


def running_versions(task_type: str) -> dict[str, str] | None:
    """The versions the running code declares for `task_type` (settings.SEAM_RUNNING_VERSIONS),
    or None: the task type is not declared, or nothing is (the setting is blank)."""
    if not settings.SEAM_RUNNING_VERSIONS:
        return None
    versions: dict[str, dict[str, str]] = import_string(settings.SEAM_RUNNING_VERSIONS)()
    return versions.get(task_type)


# --- outcomes ---------------------------------------------------------------------------------


class DecisionOutcome(models.TextChoices):
    """What a decision on a dead run came to."""

    COMPLETED = "completed", "Resumed to completion"
    ESCALATED = "escalated", "Handed to a person"
    COMPENSATED = "compensated", "Every write undone, and handed to a person"
    WAITING = "waiting", "Waiting: a call is still in doubt"
    CONTINUING = "continuing", "Resumed in part: the next steps are queued (SEAM_STEPS_PER_PASS)"
    SKIPPED = "skipped", "Skipped: alive, ended, or decided by another sweeper"


class DecisionNote(StrEnum):
    """Why a decision changed nothing, or what it left for later, for the reconcile command and
    the worker's log (a decision that hands the run over has the run's own Why)."""

    RUN_ENDED = "run_ended"  # facts: status
    ALIVE_OR_CLAIMED = "alive_or_claimed"
    # The run would go to a person, but its agent may still come back: the policy's agent_grace
    # has not passed since its last heartbeat. facts: until
    AGENT_GRACE = "agent_grace"
    CALL_IN_DOUBT = "call_in_doubt"  # facts: tool (when a resumed call is in doubt again)
    STEPS_QUEUED = "steps_queued"  # facts: sent


@dataclass(frozen=True)
class Decision:
    run_id: str
    outcome: DecisionOutcome
    reason: str = ""
    why: Why | None = None


def _escalate(
    *,
    run: Run,
    reason: str,
    why: Why,
    actor: journal.Actor,
    compensate: bool = False,
    always_escalate: bool = False,
) -> Decision:
    """Hand the run to a person. With `compensate`, first undo what the catalogue can undo (in
    reverse order, through the executor) and say what could not be undone. A run whose every
    write was undone ends `compensated` — the world is as before — and is still handed over
    (an open escalation), because the customer's request was not done; otherwise `escalated`."""
    if compensate:
        undone = run_compensate(run=run, actor=actor)
        for compensation_id in undone.queued:
            # Beyond this pass's share (SEAM_STEPS_PER_PASS), each undo is a task of its own.
            compensate_step.delay(compensation_id)
        why = why.with_facts(undo=undone.facts())
        if not always_escalate and undone.complete:
            return _end(run=run, status=RunStatus.COMPENSATED, reason=reason, why=why, actor=actor)
    return _end(run=run, status=RunStatus.ESCALATED, reason=reason, why=why, actor=actor)


def _end(*, run: Run, status: str, reason: str, why: Why, actor: journal.Actor) -> Decision:
    with journal.durable():
        handed = journal.run_hand_over(run=run, status=status, reason=reason, why=why, actor=actor)
    if handed is None:
        return _skipped(run, DecisionNote.RUN_ENDED)
    outcome = DecisionOutcome.COMPENSATED if status == RunStatus.COMPENSATED else DecisionOutcome.ESCALATED
    return Decision(run_id=str(run.pk), outcome=outcome, reason=reason, why=why)


def _skipped(run: Run, note: str, **facts: Any) -> Decision:
    return Decision(run_id=str(run.pk), outcome=DecisionOutcome.SKIPPED, why=Why(note, facts))


def _phase_index(phase: str) -> int:
    return PHASES.index(phase) if phase in PHASES else len(PHASES)


def _version_problem(run: Run, *, actor: journal.Actor) -> Why | None:
    """None when the run may be resumed by the running code (applying registered upgrades to its
    plan, which bumps the run's version), else the mismatch."""
    running = running_versions(run.task_type)
    if running is None and not settings.SEAM_RUNNING_VERSIONS:
        # Nothing to compare the run's versions with: resuming could carry out a plan the
        # deployment's code no longer makes. A person decides; declaring the running versions
        # (SEAM_RUNNING_VERSIONS) lets reconciliation resume runs whose versions match.
        return why(RunWhy.VERSIONS_UNDECLARED)
    if running is None:
        return why(RunWhy.NO_FLOW, task_type=run.task_type)
    recorded = run.versions
    plan = list(run.plan)
    upgraded = []
    for field in ("schema", "flow", "policy", "capability"):
        if recorded[field] == running[field]:
            continue
        upgrade = UPGRADES.get((run.task_type, field, recorded[field], running[field]))
        if upgrade is None:
            return why(RunWhy.VERSION_CHANGED, field=field, recorded=recorded[field], running=running[field])
        plan = upgrade(plan)
        upgraded.append({"field": field, "recorded": recorded[field], "running": running[field]})
    if plan != run.plan:
        rewritten = transitions.run_plan_rewrite(run=run, plan=plan, actor=actor, data={"upgrades": upgraded})
        if not rewritten.moved:
            return why(RunWhy.UPGRADE_INTERRUPTED)
    return None


# --- the decision -----------------------------------------------------------------------------


def run_decide(*, run: Run, actor: journal.Actor, quiet_for: timedelta | None = None) -> Decision:
    """Decide a dead run whose calls are all settled. Waits (changes nothing) while a call is
    still `intended`; escalates on an unknown outcome, a version mismatch, a passed deadline or
    age, or when the policy says compensate; otherwise resumes it to completion."""
    run = Run.objects.select_related("tenant").get(pk=run.pk)
    if run.status != RunStatus.RUNNING:
        return _skipped(run, DecisionNote.RUN_ENDED, status=run.status)
    last_seen = run.last_heartbeat_at
    if not _claim(run, quiet_for=quiet_for):
        return _skipped(run, DecisionNote.ALIVE_OR_CLAIMED)
    intents = list(run.intents.all())
    if any(i.status == IntentStatus.INTENDED for i in intents):
        return Decision(
            run_id=str(run.pk), outcome=DecisionOutcome.WAITING, why=why(DecisionNote.CALL_IN_DOUBT)
        )
    handover = _why_not_resume(run, intents, actor=actor)
    if handover is not None and (grace_until := _agent_grace_until(run, last_seen)) is not None:
        # Not yet for a person: the agent may come back and finish the run itself. The claim is
        # handed back, so the run looks as dead as it did and the next sweep decides it again.
        journal.run_heartbeat_restore(run=run, claimed_at=run.last_heartbeat_at, last_seen=last_seen)
        return Decision(
            run_id=str(run.pk),
            outcome=DecisionOutcome.WAITING,
            why=why(DecisionNote.AGENT_GRACE, until=grace_until.isoformat()),
        )
    if handover is not None:
        return _escalate(
            run=run,
            reason=handover.reason,
            why=handover.why,
            actor=actor,
            compensate=handover.compensate,
            always_escalate=handover.always_escalate,
        )
    return run_resume(run=run, actor=actor)


@dataclass(frozen=True)
class _Handover:
    """Why a dead run goes to a person rather than being resumed, and whether what it wrote is
    undone first (the arguments of _escalate)."""

    reason: str
    why: Why
    compensate: bool = False
    always_escalate: bool = False


def _agent_grace_until(run: Run, last_seen: datetime | None) -> datetime | None:
    """When the policy's agent_grace for the run ends, if it has not yet: counted from the
    moment the run went stale (its last heartbeat, else its creation, plus the stale threshold)."""
    policy = policy_for(tenant_id=run.tenant_id, task_type=run.task_type)
    if policy is None or not policy.agent_grace:
        return None
    until = (last_seen or run.created_at) + stale_after(None) + policy.agent_grace
    return until if timezone.now() < until else None


def _claim(run: Run, *, quiet_for: timedelta | None) -> bool:
    """Claim the decision: a compare-and-swap on the heartbeat we saw. It also marks the run
    alive while we work on it, so a second sweeper (two beats, two workers) leaves it alone.
    Only a run that still looks dead is claimed: the first claimant's heartbeat makes it look
    alive to everyone else."""
    quiet = stale_after(None) if quiet_for is None else quiet_for
    return _heartbeat(run, expected=run.last_heartbeat_at, dead_since=timezone.now() - quiet)


def _why_not_resume(run: Run, intents: list[Intent], *, actor: journal.Actor) -> _Handover | None:
    """The first reason, in order, that the run may not be resumed unattended: an unknown
    outcome, a plan past the limit, no policy, versions the running code cannot carry (checking
    them applies any registered upgrade to the plan), then the policy's own rules; None: resume."""
    unknown = [i for i in intents if i.status == IntentStatus.UNKNOWN]
    if unknown:
        return _Handover(OutcomeReason.UNKNOWN_OUTCOME, journal.unknown_calls_why(unknown))
    if len(run.plan) > settings.SEAM_MAX_PLAN_STEPS:
        # Recorded before the limit was lowered, or rewritten by an upgrade: too much for the
        # sweep to carry out unattended.
        return _Handover(
            OutcomeReason.POLICY,
            why(RunWhy.PLAN_TOO_LONG, steps=len(run.plan), limit=settings.SEAM_MAX_PLAN_STEPS),
        )
    policy = policy_for(tenant_id=run.tenant_id, task_type=run.task_type)
    if policy is None:
        return _Handover(OutcomeReason.POLICY, why(RunWhy.NO_POLICY, task_type=run.task_type))
    problem = _version_problem(run, actor=actor)
    if problem is not None:
        return _Handover(OutcomeReason.VERSION_MISMATCH, problem)
    return _policy_refusal(run, policy, intents)


def _policy_refusal(run: Run, policy: TaskPolicy, intents: list[Intent]) -> _Handover | None:
    """What the policy says against resuming, in order: the run's deadline passed, the policy
    always compensates, the run is older than the policy resumes, or it entered the phase the
    policy resumes until; None: the policy lets it resume."""
    now = timezone.now()
    undo_first = policy.undo_before_escalating
    if run.deadline is not None and run.deadline < now:
        return _Handover(
            OutcomeReason.DEADLINE_PASSED,
            why(RunWhy.DEADLINE_PASSED, deadline=run.deadline.isoformat()),
            compensate=undo_first,
        )
    if policy.strategy == Strategy.COMPENSATE_AND_ESCALATE:
        return _Handover(
            OutcomeReason.POLICY,
            why(RunWhy.POLICY_ALWAYS_COMPENSATES, policy_version=policy.version),
            compensate=True,
            always_escalate=True,
        )
    if now - run.created_at > policy.max_resume_age:
        return _Handover(
            OutcomeReason.POLICY,
            why(RunWhy.TOO_OLD_TO_RESUME, max_age_seconds=int(policy.max_resume_age.total_seconds())),
            compensate=undo_first,
        )
    if policy.strategy == Strategy.RESUME_UNTIL_PHASE:
        acted = _acted_in_phase(run, intents, phase=policy.phase)
        if acted:
            return _Handover(
                OutcomeReason.RUN_DIED_MID_SEQUENCE,
                why(RunWhy.ENTERED_PHASE, phase=policy.phase, tools=[s["tool"] for s in acted]),
                compensate=undo_first,
            )
    return None


def _acted_in_phase(run: Run, intents: list[Intent], *, phase: str) -> list[dict[str, Any]]:
    """The planned steps the run performed in `phase` or a later one."""
    limit = _phase_index(phase)
    performed = {i.idempotency_key for i in intents if i.status == IntentStatus.PERFORMED}
    return [
        s for s in plan_with_keys(run) if s["key"] in performed and _phase_index(s.get("phase", "")) >= limit
    ]


def _heartbeat(run: Run, *, expected: Any, dead_since: Any = None) -> bool:
    now = timezone.now()
    runs = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, last_heartbeat_at=expected)
    if dead_since is not None:
        runs = runs.filter(Q(last_heartbeat_at__isnull=True) | Q(last_heartbeat_at__lt=dead_since))
    claimed = runs.update(last_heartbeat_at=now)
    if claimed:
        run.last_heartbeat_at = now
    return bool(claimed)


def _perform_step(*, run: Run, step: dict[str, Any], turn: int, actor: journal.Actor) -> journal.Performed:
    return tools.tool_perform(
        run=run,
        tool=step["tool"],
        args=step.get("args", {}),
        turn=turn,
        occurrence=step.get("occurrence", 0),
        actor=actor,
    )


def _send_readmitted(*, intent: Intent, tool: str, actor: journal.Actor) -> None:
    """Send, with its own key, a call reconciliation proved never happened."""
    tools.tool_resend(intent=intent, actor=actor, send=_send_with_retries)


def _send_with_retries(call: Callable[[], Any]) -> Any:
    """Only a transient failure is retried, boundedly and with jitter; every other error class
    decides its own response."""
    attempts = settings.SEAM_RESUME_TRANSIENT_RETRIES
    for attempt in range(attempts + 1):
        try:
            return call()
        except ToolError as exc:
            if exc.error_class != "transient" or attempt == attempts:
                raise
            time.sleep(random.uniform(0.5, 1.0) * 0.2 * 2**attempt)
    raise AssertionError("unreachable")


def run_resume(*, run: Run, actor: journal.Actor) -> Decision:
    """Finish the run's remaining planned writes, in order, with the keys the runtime would have
    used. A performed step is skipped, and so is one found `already_so` (the world was already as
    it would leave it, before the run: sending it would do it twice); a `not_performed` one is re-admitted and sent with its
    own key; a missing one is recorded and sent. Any failure other than a transient one stops
    and escalates (ambiguous: waits for reconciliation).

    One pass sends at most settings.SEAM_STEPS_PER_PASS steps, then answers CONTINUING: the
    caller queues the next pass (reconciliation.resume_run), which finds the steps sent so far
    by their keys. The run's heartbeat is kept fresh meanwhile, so no sweep decides it again."""
    with journal.durable():
        journal.event_record(
            run=run, kind=JournalEvent.Kind.RUN_RESUMED, actor=actor, at=timezone.now(), data={}
        )
    by_key = {i.idempotency_key: i for i in run.intents.all()}
    next_turn = max((i.turn for i in by_key.values()), default=0) + 1
    sent = 0
    for step in plan_with_keys(run):
        intent = by_key.get(step["key"])
        if intent is not None and intent.status in (IntentStatus.PERFORMED, IntentStatus.ALREADY_SO):
            continue
        if sent >= settings.SEAM_STEPS_PER_PASS:
            _heartbeat(run, expected=run.last_heartbeat_at)
            return Decision(
                run_id=str(run.pk),
                outcome=DecisionOutcome.CONTINUING,
                why=why(DecisionNote.STEPS_QUEUED, sent=sent),
            )
        sent += 1
        _heartbeat(run, expected=run.last_heartbeat_at)
        try:
            if intent is not None and intent.status == IntentStatus.FAILED:
                return _escalate(
                    run=run,
                    reason=OutcomeReason.RUN_DIED_MID_SEQUENCE,
                    why=why(
                        RunWhy.STEP_FAILED,
                        tool=step["tool"],
                        error_class=intent.error_class,
                        message=intent.outcome_summary,
                    ),
                    actor=actor,
                )
            if intent is not None and intent.status == IntentStatus.NOT_PERFORMED:
                _send_readmitted(intent=intent, tool=step["tool"], actor=actor)
                continue
            _send_with_retries(partial(_perform_step, run=run, step=step, turn=next_turn, actor=actor))
            next_turn += 1
        except (ToolError, UnknownTool, journal.JournalError) as exc:
            return _resume_stopped(run=run, tool=step["tool"], error=exc, actor=actor)
    journal.run_complete(run=run, actor=actor)
    return Decision(run_id=str(run.pk), outcome=DecisionOutcome.COMPLETED)


def _resume_stopped(
    *, run: Run, tool: str, error: ToolError | UnknownTool | journal.JournalError, actor: journal.Actor
) -> Decision:
    """What a resumption comes to when sending `tool` raised: an ambiguous answer waits for
    reconciliation to settle the call; any other error hands the run to a person."""
    if isinstance(error, ToolError) and error.error_class == "ambiguous":
        return Decision(
            run_id=str(run.pk),
            outcome=DecisionOutcome.WAITING,
            why=why(DecisionNote.CALL_IN_DOUBT, tool=tool),
        )
    if isinstance(error, ToolError):
        stopped = why(RunWhy.RESUME_FAILED, tool=tool, error_class=error.error_class, message=error.message)
    else:
        stopped = why(RunWhy.RESUME_IMPOSSIBLE, tool=tool, error=str(error))
    return _escalate(run=run, reason=OutcomeReason.RUN_DIED_MID_SEQUENCE, why=stopped, actor=actor)


def dead_runs(*, quiet_for: timedelta | None = None) -> QuerySet[Run]:
    """Stuck runs (journal.selectors.stuck_runs; `quiet_for` replaces its thresholds) with no
    call still in doubt: reconciliation settles those calls first."""
    open_calls = Intent.objects.filter(run=OuterRef("pk"), status=IntentStatus.INTENDED)
    return (
        stuck_runs(now=timezone.now(), quiet_for=quiet_for).exclude(Exists(open_calls)).order_by("created_at")
    )


def decide_dead_runs(
    *, actor: journal.Actor, quiet_for: timedelta | None = None, limit: int = 200
) -> list[Decision]:
    return [
        run_decide(run=run, actor=actor, quiet_for=quiet_for)
        for run in dead_runs(quiet_for=quiet_for)[:limit]
    ]
