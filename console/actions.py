"""What people do to a run from the dashboard. Every action here:

- checks the person's permission and tenant (another tenant's run is not found);
- locks the run row and compares the state the person saw (handover.run_state_token)
  with the state now: if anything changed since their page was drawn — another person, a worker,
  the agent — the action is refused with what changed, never applied blindly. Two people
  clicking the same button therefore produce one effect: the second finds the first's change;
- makes its change and writes its audit row (who, when, what, run and step, old and new state,
  note, request id) in one durable transaction;
- queues any slow work (a compensation, a resumption, a lookup) with transaction.on_commit, so a
  worker never sees a request the database does not hold.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from audit.chain import audit_record, audit_verification_queue
from audit.models import AuditAction, AuditEntry, AuditVerification
from audit.tasks import verify_audit_chain
from compensations.models import Compensation, CompensationStatus
from compensations.selectors import steps_to_undo
from compensations.tasks import compensate_run, compensation_schedule
from handover import (
    UNDONE,
    HandoverRows,
    handover_rows,
    run_is_stuck,
    run_state_token,
    words,
)
from journal import attempts, transitions
from journal import services as journal
from journal.models import (
    CustomerMessage,
    Intent,
    IntentStatus,
    JournalEvent,
    Run,
    RunStatus,
    Tenant,
)
from journal.selectors import compensation_intent_ids, plan_with_keys
from journal.step_edits import StepArgsEdited, step_args_edit
from journal.why import CallVerdict, RunWhy, why
from reconciliation.tasks import reconcile_intent, resume_run

from .claiming import run_claim_if_unassigned
from .selectors import VERIFICATION_WAIT

ACT = "handover.act_on_run"
VIEW_AUDIT = "handover.view_audit_trail"
MAX_NOTE_CHARS = 4000


@dataclass(frozen=True)
class StaffContext:
    """Who is acting, for which tenant, from which request."""

    user: Any
    tenant: Tenant
    request_id: str = ""

    @property
    def actor(self) -> journal.Actor:
        return journal.Actor.user(self.user)


class RunChanged(journal.Conflict):
    """The run changed after the page that asked for this action was drawn."""

    def __init__(self, run: Run, changes: list[str]) -> None:
        super().__init__("this run changed since you loaded it: " + "; ".join(changes or ["it was updated"]))
        self.run = run
        self.changes = changes


class ActionRefused(journal.Conflict):
    """The action does not apply to the run as it is (e.g. the agent is still working it)."""


def _require(ctx: StaffContext, permission: str) -> None:
    if not ctx.user.has_perm(permission):
        raise PermissionDenied(f"your role does not allow this ({permission})")


def _note(note: Any, *, required: bool) -> str:
    return journal.clean_text(note, field="note", limit=MAX_NOTE_CHARS, required=required)


def changes_since(run: Run, seen_state: str) -> list[str]:
    """In words, what happened to the run after the state token `seen_state` was taken."""
    try:
        _version, last_event, last_audit = (int(part) for part in seen_state.split("."))
    except ValueError:
        return ["the page did not say which state it showed; reload it"]
    # In the pages' words: a step by its tool, a moment in the one date format with its zone.
    changes = [
        f"{event.get_kind_display().lower()}"
        + (f" ({words.tool_words(event.intent.tool)})" if event.intent_id and event.intent else "")
        + f" by {words.who(event.actor_name)} at {timezone.localtime(event.at):%Y-%m-%d %H:%M %Z}"
        for event in run.events.filter(id__gt=last_event).select_related("intent").order_by("id")[:10]
    ]
    changes += [
        f"{entry.username} {entry.get_action_display().lower()}"
        + (f" ({words.step_words(entry.step_id)})" if entry.step_id else "")
        + f" at {timezone.localtime(entry.at):%Y-%m-%d %H:%M %Z}"
        for entry in AuditEntry.objects.filter(run=run, seq__gt=last_audit).order_by("seq")[:10]
    ]
    if not changes:
        changes.append(f"the run is now {run.get_status_display().lower()}")
    return changes


@contextlib.contextmanager
def _acting_on(ctx: StaffContext, run_id: Any, seen_state: str, permission: str = ACT) -> Iterator[Run]:
    """The run, locked for the rest of the transaction, after checking who acts and what they saw;
    once the action is done, a run nobody had is theirs (console.claiming)."""
    _require(ctx, permission)
    with journal.durable():
        run = (
            Run.objects.select_for_update(of=("self",))
            .select_related("tenant", "assignee")
            .filter(pk=run_id, tenant=ctx.tenant)
            .first()
        )
        if run is None:
            raise journal.NotFound("no such run", field="run_id")
        if not seen_state:
            raise journal.InvalidInput("state is required: the state of the run you saw", field="state")
        if seen_state != run_state_token(run):
            raise RunChanged(run, changes_since(run, seen_state))
        yield run
        run_claim_if_unassigned(run=run, user=ctx.user, tenant=ctx.tenant, request_id=ctx.request_id)


def _bump(run: Run, **changes: Any) -> None:
    """A person's change to the run beside its status, through its owner."""
    transitions.run_bump(run_id=run.pk, **changes)


def _moved(run: Run, moved: transitions.Moved, change: str = "its status changed meanwhile") -> None:
    """A transition under the run's row lock that found the row moved anyway (an intent settled
    by a worker in between) is the person's page gone stale: refused, not applied."""
    if not moved.moved:
        raise RunChanged(run, [change])


def _refuse_if_agent_active(run: Run) -> None:
    if run.status == RunStatus.RUNNING and not run_is_stuck(run):
        raise ActionRefused(
            "the agent is still working this run; act once it ends or goes quiet", field="run"
        )


def _step(run: Run, step_id: str) -> Intent:
    intent = run.intents.filter(step_id=step_id).first()
    if intent is None:
        raise journal.NotFound(f"the run has no step {step_id!r}", field="step_id")
    return intent


def _audit(ctx: StaffContext, action: str, run: Run, **fields: Any) -> AuditEntry:
    return audit_record(
        user=ctx.user, tenant=ctx.tenant, action=action, run=run, request_id=ctx.request_id, **fields
    )


# --- the actions ------------------------------------------------------------------------------


def staff_member(tenant: Tenant, user_id: Any, *, field: str) -> Any:
    """The active person of `tenant` with id `user_id` whose role may act on runs: whom a run or
    a dead letter may be handed to. Anyone else is refused, naming `field`."""
    people = get_user_model().objects.filter(membership__tenant=tenant, is_active=True)
    person = people.filter(pk=int(user_id)).first() if str(user_id).isdigit() else None
    if person is None or not person.has_perm(ACT):
        raise journal.InvalidInput(f"{field} must be an active staff member of your tenant", field=field)
    return person


def run_assign(ctx: StaffContext, *, run_id: Any, state: str, assignee_id: int | None = None) -> Run:
    """Hand the run to a person: the one acting ("assign to me"), or the colleague `assignee_id`
    names, who must be staff of the same tenant. The audit row says who assigned whom."""
    assignee = ctx.user if assignee_id is None else staff_member(ctx.tenant, assignee_id, field="assignee")
    with _acting_on(ctx, run_id, state) as run:
        if run.assignee_id == assignee.pk:
            raise ActionRefused(f"the run is already assigned to {assignee.get_username()}", field="assignee")
        previous = run.assignee.get_username() if run.assignee else None
        _bump(run, assignee=assignee)
        _audit(
            ctx,
            AuditAction.ASSIGN,
            run,
            old={"assignee": previous},
            new={"assignee": assignee.get_username()},
        )
    return run


def step_compensate(ctx: StaffContext, *, run_id: Any, step_id: str, state: str) -> Compensation:
    """Undo one performed step through the compensations executor (queued after commit)."""

    with _acting_on(ctx, run_id, state) as run:
        _refuse_if_agent_active(run)
        intent = _step(run, step_id)
        if intent.status != IntentStatus.PERFORMED:
            raise ActionRefused(
                f"{step_id} is {intent.status}; only a performed step is undone", field="step_id"
            )
        if intent.pk in compensation_intent_ids(run=run):
            raise ActionRefused(f"{step_id} is itself a compensation; it is not undone", field="step_id")
        compensation = compensation_schedule(original=intent, actor=ctx.actor)
        _bump(run)
        journal.event_record(
            run=run,
            intent=intent,
            kind=JournalEvent.Kind.COMPENSATION_REQUESTED,
            actor=ctx.actor,
            at=timezone.now(),
            data={"compensation": compensation.pk},
        )
        _audit(
            ctx,
            AuditAction.COMPENSATE_STEP,
            run,
            step_id=step_id,
            old={"status": intent.status, "compensation": None},
            new={"compensation": compensation.pk, "compensation_status": compensation.status},
        )
    return compensation


def run_compensate_request(ctx: StaffContext, *, run_id: Any, state: str) -> list[str]:
    """Undo every performed step of the run, newest first (queued after commit)."""

    with _acting_on(ctx, run_id, state) as run:
        _refuse_if_agent_active(run)
        rows = handover_rows(run)
        undone_by_this = steps_to_undo(
            rows.intents,
            compensation_intent_ids=rows.compensation_intent_ids,
            compensations=rows.compensations,
        )
        steps = [intent.step_id for intent in undone_by_this]
        if not steps:
            raise ActionRefused("nothing this run did is left to undo", field="run")
        _bump(run)
        journal.event_record(
            run=run,
            kind=JournalEvent.Kind.COMPENSATION_REQUESTED,
            actor=ctx.actor,
            at=timezone.now(),
            data={"steps": steps},
        )
        _audit(ctx, AuditAction.COMPENSATE_RUN, run, old={"performed": steps}, new={"requested": steps})
        user_id = ctx.user.pk
        transaction.on_commit(lambda: compensate_run.delay(str(run.pk), user_id))
    return steps


@dataclass(frozen=True)
class ResumePreview:
    """What resuming would do, step by step, with the keys it would use."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.blockers


RESUME_VERBS: dict[str | None, tuple[str, str]] = {
    IntentStatus.PERFORMED: ("skip", "already performed; not sent again"),
    IntentStatus.ALREADY_SO: ("skip", "already so before the run (not its work); not sent"),
    IntentStatus.NOT_PERFORMED: ("send", "never happened; sent now with its original key"),
    None: ("send", "never attempted; sent now"),
}


def resume_preview(run: Run, rows: HandoverRows | None = None) -> ResumePreview:
    """What resuming would send and skip, and what stops it now. Read from the run's handover
    rows, so the run page (which has them loaded) can tell whether Resume can work without a
    query of its own, by the same rules the action applies."""
    rows = rows or handover_rows(run)
    by_key = {i.idempotency_key: i for i in rows.intents}
    steps = [_step_preview(step, by_key.get(step["key"]), rows.tail_keys) for step in plan_with_keys(run)]
    blockers = [f"{words.tool_words(s['tool'])}: {s['why']}" for s in steps if s["action"] == "blocked"]
    blockers.extend(_run_blockers(run, rows))
    if not any(s["action"] == "send" for s in steps) and not blockers:
        blockers.append("every planned step is already performed")
    warnings: list[str] = []
    if run.deadline and run.deadline <= timezone.now():
        warnings.append(f"the run's deadline passed at {timezone.localtime(run.deadline):%Y-%m-%d %H:%M}")
    return ResumePreview(steps=steps, blockers=blockers, warnings=warnings)


def _step_preview(step: dict[str, Any], intent: Intent | None, performed_tail: set[str]) -> dict[str, Any]:
    """What resuming does with one planned step: skip it, send it, or stop (and why)."""
    status = IntentStatus.PERFORMED if step["key"] in performed_tail else intent.status if intent else None
    verb, why = RESUME_VERBS.get(status, ("blocked", ""))
    if verb == "blocked":
        blocked_why: dict[str, str] = {
            IntentStatus.FAILED: f"failed ({intent.error_class if intent else ''}); a person must decide",
            IntentStatus.UNKNOWN: "outcome unknown; settle it first",
            IntentStatus.INTENDED: "still being looked up; wait for reconciliation",
        }
        why = blocked_why.get(status or "", str(status))
    return {
        "tool": step["tool"],
        "detail": step.get("detail", ""),
        "key": step["key"],
        "action": verb,
        "why": why,
        "args": step.get("args", {}),
    }


def _run_blockers(run: Run, rows: HandoverRows) -> list[str]:
    """What in the run as a whole stops a resume: an undone step, a live agent, a closed run."""
    blockers: list[str] = []
    undone = [
        i.tool
        for i in rows.intents
        if i.status == IntentStatus.PERFORMED
        and (compensation := rows.compensations.get(i.pk)) is not None
        and compensation.status in (*UNDONE, CompensationStatus.PENDING)
    ]
    if undone:
        # Resuming skips performed steps; one that was undone would be skipped as if it stood.
        blockers.append(
            f"{words.tools_words(sorted(set(undone)))} was undone (or is being undone); resuming would build on it"
        )
    if run.status == RunStatus.RUNNING and not rows.stuck:
        blockers.append("the agent is still working this run")
    if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        blockers.append(f"the run is {run.status}")
    return blockers


def run_resume_request(ctx: StaffContext, *, run_id: Any, state: str) -> ResumePreview:
    """Reopen the run and finish its remaining planned steps with their original keys (queued
    after commit; reconciliation.decisions.run_resume does the sending)."""

    with _acting_on(ctx, run_id, state) as run:
        preview = resume_preview(run)
        if not preview.allowed:
            raise ActionRefused("cannot resume: " + "; ".join(preview.blockers), field="run")
        now = timezone.now()
        before = {"status": run.status, "reason": run.outcome_reason}
        # A fresh heartbeat: reconciliation's claim on a dead run compares the old one, so it
        # cannot decide this run while the person's resumption runs.
        _moved(
            run,
            transitions.run_transition(
                run=run,
                source=run.status,
                target=RunStatus.RUNNING,
                actor=ctx.actor,
                event=JournalEvent.Kind.RESUME_REQUESTED,
                data={"steps": [{k: s[k] for k in ("tool", "key", "action")} for s in preview.steps]},
                changes={
                    "outcome_reason": "",
                    "ended_at": None,
                    "last_heartbeat_at": now,
                    "awaiting_person": False,
                },
                at=now,
            ),
        )
        journal.escalations_resolve(
            run=run, by=ctx.user, note=f"resumed by {ctx.user.get_username()}", at=now
        )
        _audit(
            ctx,
            AuditAction.RESUME,
            run,
            old=before,
            new={"status": RunStatus.RUNNING, "steps": preview.steps},
        )
        user_id = ctx.user.pk
        transaction.on_commit(lambda: resume_run.delay(str(run.pk), user_id))
    return preview


def step_args_edit_request(
    ctx: StaffContext, *, run_id: Any, step_key: str, args: Any, state: str
) -> StepArgsEdited:
    """Correct the arguments of a step that was not done, before resuming: the journal rewrites
    the planned step (journal.step_edits: schema-checked, a new key derived from the new
    arguments), and the audit row holds the old and new arguments and keys."""

    with _acting_on(ctx, run_id, state) as run:
        edited = step_args_edit(run=run, step_key=step_key, args=args, actor=ctx.actor)
        step_id = edited.event.intent.step_id if edited.event.intent else ""
        _audit(
            ctx,
            AuditAction.EDIT_STEP,
            run,
            step_id=step_id,
            old={"tool": edited.tool, "args": edited.old_args, "key": edited.old_key},
            new={"tool": edited.tool, "args": edited.new_args, "key": edited.new_key},
        )
    return edited


def step_lookup_retry(ctx: StaffContext, *, run_id: Any, step_id: str, state: str) -> Intent:
    """Ask the downstream again about an uncertain step (queued after commit)."""

    with _acting_on(ctx, run_id, state) as run:
        intent = _step(run, step_id)
        if intent.status not in (IntentStatus.UNKNOWN, IntentStatus.INTENDED):
            raise ActionRefused(
                f"{step_id} is {intent.status}; only an uncertain step is looked up", field="step_id"
            )
        before = {"status": intent.status, "unknown_reason": intent.unknown_reason, "verdict": intent.verdict}
        _moved(
            run,
            transitions.intent_transition(
                intent=intent,
                source=intent.status,
                target=IntentStatus.INTENDED,
                actor=ctx.actor,
                event=JournalEvent.Kind.LOOKUP_REQUESTED,
                data={"idempotency_key": intent.idempotency_key, "was": intent.status},
                changes={
                    "settled_at": None,
                    "lookup_attempts": 0,
                    "next_lookup_at": None,
                    "last_lookup_error": "",
                    "unknown_reason": "",
                    "verdict": {},
                },
            ),
            f"{step_id} was settled meanwhile",
        )
        _bump(run)
        _audit(
            ctx,
            AuditAction.RETRY_LOOKUP,
            run,
            step_id=step_id,
            old=before,
            new={"status": IntentStatus.INTENDED},
        )
        transaction.on_commit(lambda: reconcile_intent.delay(intent.pk))
    return intent


def step_attempt_allow(ctx: StaffContext, *, run_id: Any, step_id: str, state: str) -> Intent:
    """A person allows a failed step's call again, which the taxonomy refuses after its
    `permanent` or `invalid_input` failure (journal.attempts): the agent's next such call is
    admitted once. The run's status is left as it is: a run handed over as looping is resumed
    by a person as any other."""

    with _acting_on(ctx, run_id, state) as run:
        intent = _step(run, step_id)
        if intent.status != IntentStatus.FAILED:
            raise ActionRefused(
                words.say(words.ALLOW_ONLY_FAILED, step=step_id, status=intent.status), field="step_id"
            )
        if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
            raise ActionRefused(words.say(words.ALLOW_RUN_CLOSED, status=run.status), field="run")
        code = attempts.attempt_allow(run=run, intent=intent, actor=ctx.actor)
        if code is None:
            raise ActionRefused(words.say(words.ALLOW_NOT_REFUSED, step=step_id), field="step_id")
        _bump(run)
        _audit(
            ctx,
            AuditAction.ALLOW_ATTEMPT,
            run,
            step_id=step_id,
            old={"status": intent.status, "error_class": intent.error_class, "refused": str(code)},
            new={"allowed": intent.tool},
        )
    return intent


def step_mark(
    ctx: StaffContext, *, run_id: Any, step_id: str, performed: bool, note: str, state: str
) -> Intent:
    """A person's judgement on an uncertain step: it happened, or it did not. A note is required."""
    _require(ctx, ACT)  # the role first: a person who may not act learns that, not a form error
    note = _note(note, required=True)
    status = IntentStatus.PERFORMED if performed else IntentStatus.NOT_PERFORMED
    with _acting_on(ctx, run_id, state) as run:
        intent = _step(run, step_id)
        if intent.status not in (IntentStatus.UNKNOWN, IntentStatus.INTENDED):
            raise ActionRefused(f"{step_id} is already {intent.status}", field="step_id")
        if (
            intent.status == IntentStatus.INTENDED
            and run.status == RunStatus.RUNNING
            and not run_is_stuck(run)
        ):
            raise ActionRefused("the agent is still working this step", field="step_id")
        now = timezone.now()
        who = ctx.user.get_username()
        was = intent.status
        _moved(
            run,
            transitions.intent_transition(
                intent=intent,
                source=was,
                target=status,
                actor=ctx.actor,
                event=JournalEvent.Kind.OUTCOME_RECORDED,
                data={"status": status, "judged_by": who, "note": note},
                changes={
                    "settled_at": now,
                    "error_class": "",
                    "outcome_summary": "",
                    "verdict": why(CallVerdict.MARKED_BY_PERSON, status=status, by=who, note=note).as_json(),
                },
                at=now,
            ),
            f"{step_id} was settled meanwhile",
        )
        _bump(run)
        _audit(
            ctx,
            AuditAction.MARK_PERFORMED if performed else AuditAction.MARK_NOT_PERFORMED,
            run,
            step_id=step_id,
            old={"status": was},
            new={"status": status},
            note=note,
        )
    return intent


def customer_told_add(
    ctx: StaffContext, *, run_id: Any, channel: str, body: str, state: str
) -> CustomerMessage:
    """Record what a person told the customer, so the next message stays consistent with it."""
    _require(ctx, ACT)
    message = journal.customer_message_validate(channel=channel, body=body)
    with _acting_on(ctx, run_id, state) as run:
        created = journal.customer_message_insert(
            run=run, channel=message.channel, body=message.body, actor=ctx.actor
        )
        _bump(run)
        _audit(ctx, AuditAction.CUSTOMER_TOLD, run, new={"channel": created.channel, "body": created.body})
    return created


def run_resolve(ctx: StaffContext, *, run_id: Any, note: str, state: str) -> Run:
    """Close the run's open escalations: a person finished the job (the note says how). A stuck
    run that was never escalated is ended as cancelled."""
    _require(ctx, ACT)
    note = _note(note, required=True)
    with _acting_on(ctx, run_id, state) as run:
        now = timezone.now()
        resolved = journal.escalations_resolve(run=run, by=ctx.user, note=note, at=now)
        before = {"status": run.status, "open_escalations": resolved}
        after: dict[str, Any] = {"status": run.status, "open_escalations": 0}
        if run.status == RunStatus.RUNNING:
            _refuse_if_agent_active(run)
            _moved(
                run,
                transitions.run_transition(
                    run=run,
                    source=RunStatus.RUNNING,
                    target=RunStatus.CANCELLED,
                    actor=ctx.actor,
                    event=JournalEvent.Kind.ESCALATION_RESOLVED,
                    data={"note": note},
                    changes={
                        "outcome_why": why(
                            RunWhy.RESOLVED_BY_PERSON, by=ctx.user.get_username(), note=note
                        ).as_json(),
                        "outcome_detail": "",
                        "ended_at": now,
                        "awaiting_person": False,
                    },
                    at=now,
                ),
            )
            after["status"] = RunStatus.CANCELLED
        elif not resolved:
            raise ActionRefused("this run has no open escalation to resolve", field="run")
        else:
            _bump(run, awaiting_person=False)
            journal.event_record(
                run=run,
                kind=JournalEvent.Kind.ESCALATION_RESOLVED,
                actor=ctx.actor,
                at=now,
                data={"note": note},
            )
        _audit(ctx, AuditAction.RESOLVE, run, old=before, new=after, note=note)
    return run


# --- many runs at once, from the queue ---------------------------------------------------------

MAX_BULK_RUNS = 100


@dataclass(frozen=True)
class BulkOutcome:
    """What became of one run of a bulk action: done, or refused with the reason in words."""

    run_id: Any
    ticket_id: str
    done: bool
    message: str


def runs_bulk(
    ctx: StaffContext,
    *,
    runs: list[tuple[Any, str]],
    act: Callable[[Any, str], object],
    done: str,
    check: Callable[[], object] = lambda: None,
) -> list[BulkOutcome]:
    """Do one action to each of `runs` (run id, state the page showed) as if each were done on
    its own: `act(run_id, state)` calls the action's own service, so each run is done in its own
    transaction with its own audit row, by its own rules (a run that changed since the page was
    drawn, or that the action cannot apply to, is refused and reported, the others done, and
    said `done`). `check` refuses the whole request before any run (a bad colleague, a missing
    note). A submit sent twice finds every run changed by the first: one effect."""
    _require(ctx, ACT)
    if not runs:
        raise journal.InvalidInput("run: choose at least one run", field="run")
    if len(runs) > MAX_BULK_RUNS:
        raise journal.InvalidInput(f"run: at most {MAX_BULK_RUNS} runs at once", field="run")
    check()
    tickets = dict(
        Run.objects.filter(tenant=ctx.tenant, pk__in=[run_id for run_id, _ in runs]).values_list(
            "pk", "ticket_id"
        )
    )
    outcomes = []
    for run_id, state in runs:
        ticket = tickets.get(run_id, "") or str(run_id)
        try:
            act(run_id, state)
        except journal.JournalError as refused:
            outcomes.append(BulkOutcome(run_id, ticket, False, refused.message))
        else:
            outcomes.append(BulkOutcome(run_id, ticket, True, done))
    return outcomes


def note_clean(note: Any, *, required: bool) -> str:
    """A person's note as the services keep it (checked once for a bulk action's every run)."""
    return _note(note, required=required)


def audit_verification_request(ctx: StaffContext) -> AuditVerification:
    """A team lead asks for the audit chain to be checked again, for their tenant: the request
    is kept and audited together, and the worker walks the chain once they are committed. While
    a check of the tenant is still waiting for the worker, asking again returns that one: twenty
    clicks queue one check."""
    _require(ctx, VIEW_AUDIT)
    with journal.durable():
        verification, queued = audit_verification_queue(
            tenant=ctx.tenant, user=ctx.user, wait=VERIFICATION_WAIT
        )
        if not queued:
            return verification
        audit_record(
            user=ctx.user,
            tenant=ctx.tenant,
            action=AuditAction.AUDIT_VERIFY,
            new={"verification": verification.pk},
            request_id=ctx.request_id,
        )
        verification_id = verification.pk
        # robust: the request is kept either way; a check the broker never got stops being
        # waited for on the page after a while (selectors.VERIFICATION_WAIT).
        transaction.on_commit(lambda: verify_audit_chain.delay(verification_id), robust=True)
    return verification
