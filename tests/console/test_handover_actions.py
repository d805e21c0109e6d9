"""The handover object of T-40912, and people's actions on it: each checked against the rows,
the audit trail and (for actions that reach the world) the sandbox's own ledger."""

from __future__ import annotations

import re
import threading
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.db import connection, connections
from django.utils import timezone

from audit.chain import audit_verify
from audit.models import AuditAction, AuditEntry
from compensations.models import Compensation, CompensationStatus
from compensations.services import compensation_execute
from console import actions, staff_actions
from handover import (
    CompletedStep,
    NextAction,
    NextActionCode,
    NotDoneStep,
    ReversibilityNow,
    StepCompensation,
    handover_build,
    handover_for,
    handover_rows,
    next_action,
    run_state_token,
)
from journal import services as journal
from journal.models import Intent, IntentStatus, JournalEvent, Run, RunStatus
from journal.services import Actor, Conflict, InvalidInput, NotFound
from reconciliation import decisions
from sandbox.catalogue import catalogue_seed_defaults
from scenarios.flows import FLOWS
from scenarios.policies import policies_seed_defaults
from tests import factories
from tools import services as tools

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = journal.Actor.system("test-sweeper")


def ctx(user: Any, run: Run) -> actions.StaffContext:
    return actions.StaffContext(user=user, tenant=run.tenant, request_id="req-1")


def test_the_handover_of_t40912_is_seed_000s(escalated_bench: Run) -> None:
    handover = handover_for(escalated_bench)

    assert (handover.ticket_id, handover.order_id) == ("T-40912", "SU-90317")
    assert handover.reason == "run_died_mid_sequence"
    completed = {c.tool: c for c in handover.completed}
    assert list(completed) == ["start_return", "offer_replacement"]
    assert completed["start_return"].detail.startswith("label RL-")
    # "label RL-7734, courier pickup booked 2026-03-20": the receipt's date, written as every
    # page writes a date.
    assert re.search(r"courier pickup booked \d{4}-\d{2}-\d{2}$", completed["start_return"].detail)
    assert completed["start_return"].reversibility == ReversibilityNow.until(condition="until collection")
    assert completed["start_return"].reversible == "until collection"
    assert completed["offer_replacement"].reversibility == ReversibilityNow.yes()
    assert completed["offer_replacement"].reversible is True
    assert "warehouse" in completed["offer_replacement"].detail
    not_done = [(n.tool, n.detail) for n in handover.not_done]
    assert not_done[0] == ("issue_refund", "$14.95 expedited delivery fee")
    assert handover.uncertain == []
    assert [m.body for m in handover.customer_told] == ["Return label sent."]
    assert handover.next_action.code == NextActionCode.RESUME
    text = handover.next_action.text
    assert "“Refund the buyer” ($14.95 expedited delivery fee)" in text and "“Cancel the pickup”" in text
    assert {a.undo_tool for a in handover.next_action.compensations_available} == {
        "cancel_pickup",
        "release_reservation",
    }


def test_compensating_the_pickup_undoes_it_in_the_world_with_one_audit_row(
    escalated_bench: Run, persona: Any, ledger: Any
) -> None:
    support = persona("support_staff", escalated_bench.tenant)
    step = next(i for i in escalated_bench.intents.all() if i.tool == "start_return")
    state = run_state_token(escalated_bench)

    compensation = actions.step_compensate(
        ctx(support, escalated_bench), run_id=escalated_bench.pk, step_id=step.step_id, state=state
    )
    compensation_execute(
        compensation=compensation, actor=Actor.system("test-worker")
    )  # what the queued task does

    compensation.refresh_from_db()
    assert compensation.status == "done"
    undo = ledger.get(undoes__idempotency_key=step.idempotency_key)
    assert (undo.provider, undo.operation) == ("returns", "cancel_pickup")
    # Besides its own row, the run nobody had became the person's (console.claiming).
    entry = AuditEntry.objects.exclude(action=AuditAction.ASSIGN).get(run=escalated_bench)
    assert (entry.action, entry.username, entry.step_id, entry.request_id) == (
        AuditAction.COMPENSATE_STEP,
        support.username,
        step.step_id,
        "req-1",
    )
    handover = handover_for(escalated_bench)
    pickup = next(c for c in handover.completed if c.tool == "start_return")
    assert pickup.compensation is not None and pickup.compensation.status == CompensationStatus.DONE
    # The undo is itself recorded, flagged as a compensation, and never offered for undoing.
    assert [c.tool for c in handover.completed] == ["start_return", "offer_replacement"]
    assert audit_verify().ok
    # Resuming would skip the undone pickup as if it stood: refused, and not suggested.
    assert any("“Start the return” was undone" in b for b in actions.resume_preview(escalated_bench).blockers)
    assert handover.next_action.code == NextActionCode.FINISH_BY_HAND
    assert "“Reserve a replacement”" in handover.next_action.text
    # The undo is never itself undone, even when asked for by hand.
    undo_step = escalated_bench.intents.get(tool="cancel_pickup").step_id
    with pytest.raises(actions.ActionRefused, match="itself a compensation"):
        actions.step_compensate(
            ctx(support, escalated_bench),
            run_id=escalated_bench.pk,
            step_id=undo_step,
            state=run_state_token(Run.objects.get(pk=escalated_bench.pk)),
        )
    assert Compensation.objects.count() == 1


def test_a_stale_page_is_refused_with_what_changed_and_nothing_applied(
    escalated_bench: Run, persona: Any
) -> None:
    first = persona("support_staff", escalated_bench.tenant, "first")
    second = persona("support_staff", escalated_bench.tenant, "second")
    seen = run_state_token(escalated_bench)
    actions.run_assign(ctx(first, escalated_bench), run_id=escalated_bench.pk, state=seen)

    with pytest.raises(actions.RunChanged) as refused:
        actions.run_assign(ctx(second, escalated_bench), run_id=escalated_bench.pk, state=seen)

    assert any("first assigned the run" in change for change in refused.value.changes)
    assert Run.objects.get(pk=escalated_bench.pk).assignee == first
    assert AuditEntry.objects.filter(run=escalated_bench).count() == 1


def test_two_people_compensating_the_same_step_at_once_make_one_compensation(
    escalated_bench: Run, persona: Any
) -> None:
    people = [persona("support_staff", escalated_bench.tenant, f"p{i}") for i in range(2)]
    step = next(i for i in escalated_bench.intents.all() if i.tool == "start_return")
    seen = run_state_token(escalated_bench)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def click(user: Any) -> None:
        try:
            barrier.wait()
            actions.step_compensate(
                ctx(user, escalated_bench), run_id=escalated_bench.pk, step_id=step.step_id, state=seen
            )
            outcomes.append("done")
        except Conflict as exc:
            outcomes.append(type(exc).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=click, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(outcomes) == ["RunChanged", "done"]
    assert Compensation.objects.filter(original=step).count() == 1
    assert AuditEntry.objects.filter(action=AuditAction.COMPENSATE_STEP).count() == 1


def test_marking_an_uncertain_step_needs_a_note_and_records_the_judgement(
    sandbox_tools: str, persona: Any
) -> None:
    # T-41518: the refund accepted downstream, the runner killed before recording it; the
    # sandbox is told to answer its lookup "unknown", so reconciliation leaves it to a person.
    from tests.support.stuck_runs import escalate_ticket, refund_key_refused

    faults = f"{sandbox_tools}/sandbox/api/faults/"
    rule = {"provider": "payments", "operation": "lookup", "fault": "unknown_lookup", "remaining": 10}
    requests.post(faults, json=rule, timeout=5).raise_for_status()
    try:
        run = escalate_ticket(
            sandbox_tools, "T-41518", "--kill-between-accept-and-record", "1", afterwards=refund_key_refused
        )
    finally:
        requests.delete(faults, timeout=5)
    handover = handover_for(run)
    assert [u.tool for u in handover.uncertain] == ["issue_refund"]
    assert handover.next_action.code == NextActionCode.SETTLE_UNCERTAIN
    assert handover.next_action.text.startswith("find out whether “Refund the buyer” happened")
    lead = persona("team_lead", run.tenant)
    step_id = handover.uncertain[0].step_id

    with pytest.raises(InvalidInput) as missing:
        actions.step_mark(
            ctx(lead, run), run_id=run.pk, step_id=step_id, performed=True, note="", state=handover.state
        )
    assert missing.value.field == "note"

    actions.step_mark(
        ctx(lead, run),
        run_id=run.pk,
        step_id=step_id,
        performed=True,
        note="payments portal shows R-1",
        state=handover.state,
    )
    intent = run.intents.get(step_id=step_id)
    assert intent.status == IntentStatus.PERFORMED
    assert intent.verdict["note"] == "payments portal shows R-1"
    entry = AuditEntry.objects.exclude(action=AuditAction.ASSIGN).get(run=run)
    assert (entry.action, entry.old_state, entry.new_state) == (
        AuditAction.MARK_PERFORMED,
        {"status": "unknown"},
        {"status": "performed"},
    )


def test_resume_preview_names_each_step_and_its_key(escalated_bench: Run) -> None:
    preview = actions.resume_preview(escalated_bench)
    assert [(s["tool"], s["action"]) for s in preview.steps] == [
        ("start_return", "skip"),
        ("offer_replacement", "skip"),
        ("issue_refund", "send"),
        ("notify_seller", "send"),
    ]
    assert all(len(s["key"]) == 64 for s in preview.steps)
    assert preview.allowed


def test_resume_reopens_the_run_and_finishes_it_with_the_original_keys(
    escalated_bench: Run, persona: Any, ledger: Any
) -> None:
    from reconciliation.decisions import run_resume

    support = persona("support_staff", escalated_bench.tenant)
    preview = actions.run_resume_request(
        ctx(support, escalated_bench), run_id=escalated_bench.pk, state=run_state_token(escalated_bench)
    )
    run = Run.objects.select_related("tenant").get(pk=escalated_bench.pk)
    assert run.status == RunStatus.RUNNING and not run.awaiting_person
    run_resume(run=run, actor=Actor.user(support))  # what the queued task does

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    sent = {s["tool"]: s["key"] for s in preview.steps if s["action"] == "send"}
    for tool, key in sent.items():
        assert ledger.filter(idempotency_key=key).count() == 1, tool
    assert ledger.filter(idempotency_key__in=run.intents.values("idempotency_key")).count() == 4


def test_resolve_needs_a_note_closes_the_escalation_and_leaves_the_queue(
    escalated_bench: Run, persona: Any
) -> None:
    from console.selectors import QueueFilters, queue_runs

    support = persona("support_staff", escalated_bench.tenant)
    state = run_state_token(escalated_bench)
    with pytest.raises(InvalidInput):
        actions.run_resolve(ctx(support, escalated_bench), run_id=escalated_bench.pk, note="  ", state=state)
    actions.run_resolve(
        ctx(support, escalated_bench), run_id=escalated_bench.pk, note="refunded by hand", state=state
    )

    assert not escalated_bench.escalation_records.filter(resolved_at__isnull=True).exists()

    assert not queue_runs(
        tenant=escalated_bench.tenant, user=support, filters=QueueFilters(), now=timezone.now()
    ).exists()


def test_roles_and_tenants_are_enforced_by_the_services(escalated_bench: Run, persona: Any) -> None:
    nobody = factories.StaffUserFactory(username="no-role", membership__tenant=escalated_bench.tenant)
    with pytest.raises(PermissionDenied):
        actions.run_assign(
            ctx(nobody, escalated_bench), run_id=escalated_bench.pk, state=run_state_token(escalated_bench)
        )
    outsider_tenant = factories.TenantFactory(slug="acme")
    outsider = persona("support_staff", outsider_tenant)
    with pytest.raises(NotFound):
        actions.run_assign(
            actions.StaffContext(user=outsider, tenant=outsider_tenant),
            run_id=escalated_bench.pk,
            state=run_state_token(escalated_bench),
        )
    assert not AuditEntry.objects.exists()


def test_the_audit_trail_refuses_changes_and_verify_audit_finds_a_forged_row(
    escalated_bench: Run, persona: Any
) -> None:
    from django.db import DatabaseError, transaction

    support = persona("support_staff", escalated_bench.tenant)
    actions.run_assign(
        ctx(support, escalated_bench), run_id=escalated_bench.pk, state=run_state_token(escalated_bench)
    )
    escalated_bench.refresh_from_db()
    actions.run_resolve(
        ctx(support, escalated_bench),
        run_id=escalated_bench.pk,
        note="done",
        state=run_state_token(escalated_bench),
    )
    call_command("verify_audit")

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(seq=1).update(note="nothing happened")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(seq=1).delete()

    # Someone with the table owner's powers rewrites a row behind the trigger's back.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_auditentry_append_only")
        cursor.execute("UPDATE audit_auditentry SET note = 'forged' WHERE seq = 2")
        cursor.execute("ALTER TABLE audit_auditentry ENABLE TRIGGER audit_auditentry_append_only")
    report = audit_verify()
    assert (report.ok, report.broken_at) == (False, 2)
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="broken at row #2"):
        call_command("verify_audit")


def test_concurrent_actions_on_different_runs_extend_one_unbroken_chain(make_run: Any, persona: Any) -> None:
    runs = [make_run(ticket_id=f"T-{i}", external_id=f"chain-{i}") for i in range(8)]
    people = [persona("support_staff", runs[0].tenant, f"p{i}") for i in range(8)]
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def act(run: Run, user: Any) -> None:
        try:
            barrier.wait()
            actions.run_assign(ctx(user, run), run_id=run.pk, state=run_state_token(run))
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=act, args=pair) for pair in zip(runs, people, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert sorted(AuditEntry.objects.values_list("seq", flat=True)) == list(range(1, 9))
    report = audit_verify()
    assert (report.ok, report.checked) == (True, 8)


def _performed_step(tool: str, undo_tool: str, compensation: StepCompensation | None = None) -> CompletedStep:
    return CompletedStep(
        step_id=f"r:1:{tool}",
        tool=tool,
        at="10:00:00",
        settled_at=timezone.now(),
        detail="",
        reversibility=ReversibilityNow.yes(),
        receipt={},
        undo_tool=undo_tool,
        compensation=compensation,
        warnings=[],
    )


def _not_done(tool: str, detail: str = "") -> NotDoneStep:
    return NotDoneStep(step_id="", tool=tool, args={}, detail=detail, idempotency_key="k" * 64, why="")


def _undo(status: CompensationStatus, dead_letter: int | None = None) -> StepCompensation:
    return StepCompensation(id=1, status=status, not_undone="", dead_letter=dead_letter)


def test_a_run_whose_every_write_was_undone_is_not_offered_a_resume() -> None:
    completed = [
        _performed_step("issue_credit", "reverse_credit", _undo(CompensationStatus.DONE)),
        _performed_step("reship", "cancel_shipment", _undo(CompensationStatus.DONE)),
    ]
    not_done = [_not_done("notify_customer", "email the buyer the shipment")]
    run = Run(status=RunStatus.COMPENSATED, awaiting_person=True)  # as reconciliation hands it over

    advice = next_action(run=run, completed=completed, not_done=not_done, uncertain=[])

    assert advice.code == NextActionCode.TELL_CUSTOMER_UNDONE
    assert advice.text.startswith("everything the run did was undone")
    assert "resume" not in advice.text
    assert advice.compensations_available == []


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (RunStatus.COMPLETED, "the run completed"),
        (RunStatus.ESCALATED, "its escalation was resolved"),
        (RunStatus.CANCELLED, "the run was cancelled"),
    ],
)
def test_a_run_that_ended_with_nobody_waiting_is_not_sent_back_to_a_person(status: str, says: str) -> None:
    run = Run(status=status, awaiting_person=False)
    completed = [_performed_step("adjust_stock", "reverse_adjustment")]
    not_done = [_not_done("notify_seller")]

    advice = next_action(run=run, completed=completed, not_done=not_done, uncertain=[])

    assert advice.code == NextActionCode.NOTHING_WAITING
    assert advice.text == (
        f"nothing waits on a person: {says}; a step it did can still be undone below if the customer asks"
    )
    assert advice.waiting is False
    assert [a.undo_tool for a in advice.compensations_available] == ["reverse_adjustment"]


def _advice_on_a_completed_run(compensation: StepCompensation) -> NextAction:
    run = Run(status=RunStatus.COMPLETED, awaiting_person=False)
    step = _performed_step("adjust_stock", "reverse_adjustment", compensation)
    return next_action(run=run, completed=[step], not_done=[], uncertain=[])


def test_an_ended_run_says_which_steps_were_undone_since() -> None:
    advice = _advice_on_a_completed_run(_undo(CompensationStatus.DONE))

    assert advice.code == NextActionCode.NOTHING_WAITING
    assert advice.text == "nothing waits on a person: the run completed; undone since: “Adjust stock”"
    assert advice.compensations_available == []
    assert advice.waiting is False


def test_an_ended_run_with_a_failed_undo_still_sends_a_person_to_the_dead_letter() -> None:
    advice = _advice_on_a_completed_run(_undo(CompensationStatus.DEAD_LETTERED, dead_letter=7))

    assert advice.code == NextActionCode.FINISH_FAILED_UNDO
    assert advice.text.startswith("undoing “Adjust stock” failed: take its dead letter")
    assert advice.waiting is True


def test_a_lookup_retry_refuses_a_step_settled_after_it_was_read(
    make_run: Any, persona: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step is read open, then a worker settles it before the retry writes: the retry's
    compare-and-swap (journal.transitions) finds it moved and refuses, instead of reopening a
    settled call as the hand-written update did."""
    run = make_run(plan=[])
    intent = journal.intent_record(
        run=run, tool="note_call", args={}, turn=1, actor=Actor.agent("returns-bot")
    ).intent
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))
    lead = persona("team_lead", run.tenant)
    read_step = actions._step

    def step_settled_by_a_worker_meanwhile(run: Run, step_id: str) -> Any:
        step = read_step(run, step_id)
        Intent.objects.filter(pk=step.pk).update(status=IntentStatus.PERFORMED)
        return step

    monkeypatch.setattr(actions, "_step", step_settled_by_a_worker_meanwhile)
    with pytest.raises(actions.RunChanged, match="settled meanwhile"):
        actions.step_lookup_retry(
            ctx(lead, run),
            run_id=run.pk,
            step_id=intent.step_id,
            state=run_state_token(Run.objects.get(pk=run.pk)),
        )
    assert not AuditEntry.objects.filter(run=run).exists()
    assert not JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.LOOKUP_REQUESTED).exists()


def test_an_email_nothing_undoes_is_never_suggested_or_offered_for_undoing(
    sandbox_tools: str, make_run: Any, persona: Any
) -> None:
    # An address_change run (resume until the act phase, then undo before escalating) reserved
    # stock and emailed the customer, then died: the reservation is released, the email stands.
    policies_seed_defaults()
    catalogue_seed_defaults()
    steps = [
        ("offer_replacement", {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 1}),
        ("notify_customer", {"order_id": "SU-90317", "template": "address_changed"}),
    ]
    run = make_run(
        task_type="address_change",
        versions=FLOWS["address_change"].run_versions(),
        plan=[{"tool": tool, "phase": "act", "args": args} for tool, args in steps],
    )
    for turn, (tool, args) in enumerate(steps, start=1):
        tools.tool_perform(run=run, tool=tool, args=args, turn=turn, actor=SYSTEM)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    decisions.run_decide(run=run, actor=SYSTEM)
    run = Run.objects.select_related("tenant").get(pk=run.pk)
    assert run.status == RunStatus.ESCALATED, run.outcome_detail
    assert sorted(Compensation.objects.values_list("original__tool", "status")) == [
        ("notify_customer", CompensationStatus.NOT_POSSIBLE),
        ("offer_replacement", CompensationStatus.DONE),
    ]

    rows = handover_rows(run)
    handover = handover_build(rows)
    action = handover.next_action

    assert action.code == NextActionCode.FINISH_BY_HAND
    assert action.text == (
        "“Reserve a replacement” was undone, so resuming is not possible; "
        "what remains: “Email the customer” cannot be undone: finish by hand"
    )
    assert action.compensations_available == []
    page = staff_actions.RunPage(
        run=run,
        rows=rows,
        handover=handover,
        resume=actions.resume_preview(run, rows),
        user=persona("team_lead", run.tenant),
    )
    offers = staff_actions.run_offers(page)
    offered = [o.action.name for o in offers["next"]] + [
        o.action.name for step in offers["completed"].values() for o in step
    ]
    assert "compensate-run" not in offered and "compensate-step" not in offered
