"""reconciliation.decisions: after every kill point of every flow, one sweep settles the calls
and the run ends in its task type's policy outcome — resumed to completion with the same keys,
or escalated with a reason — while the sandbox ledger shows every effect exactly once."""

from __future__ import annotations

import io
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from compensations.models import CatalogueEntry, Compensation, CompensationStatus, Reversibility
from handover import NextActionCode, handover_for
from journal import services as journal
from journal.models import Escalation, IntentStatus, JournalEvent, OutcomeReason, Run, RunStatus
from journal.why import RunWhy
from reconciliation import decisions
from reconciliation.models import Strategy, TaskPolicy
from sandbox.catalogue import catalogue_seed_defaults
from scenarios.flows import FLOWS
from scenarios.invariants import check_run
from scenarios.policies import policies_seed_defaults
from scenarios.tickets import TICKETS
from tests.scenarios.test_kill_points import KILL_POINTS, replay_in_child
from tests.support.in_flight import open_calls_past_in_flight
from tools import services as tools

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = journal.Actor.system("test-sweeper")


@pytest.fixture(autouse=True)
def _written_policies() -> None:
    # Transactional tests empty every table between cases, the migrations' seeds included.
    policies_seed_defaults()
    catalogue_seed_defaults()


def expected_outcome(ticket_id: str, mode: str, n: int) -> tuple[str, str, int]:
    """(run status, reason, writes undone) that the written policies (scenarios.policies)
    and the catalogue (sandbox.catalogue) prescribe."""
    flow = FLOWS[TICKETS[ticket_id].task_type]
    policy = TaskPolicy.objects.get(task_type=flow.task_type)
    done = flow.writes[:n]  # what the world has after the kill (a between-kill's nth was accepted)
    undoable = [
        s for s in done if CatalogueEntry.objects.get(tool=s.tool).reversibility != Reversibility.NONE
    ]
    everything_undone = len(undoable) == len(done)
    if policy.strategy == Strategy.COMPENSATE_AND_ESCALATE:
        return RunStatus.ESCALATED, OutcomeReason.POLICY, len(undoable)
    if policy.strategy == Strategy.RESUME_UNTIL_PHASE and any(
        decisions._phase_index(step.phase) >= decisions._phase_index(policy.phase) for step in done
    ):
        if not policy.undo_before_escalating:
            return RunStatus.ESCALATED, OutcomeReason.RUN_DIED_MID_SEQUENCE, 0
        status = RunStatus.COMPENSATED if everything_undone else RunStatus.ESCALATED
        return status, OutcomeReason.RUN_DIED_MID_SEQUENCE, len(undoable)
    return RunStatus.COMPLETED, "", 0


def ledger_undos(run: Run) -> int:
    """Effects in the world that undo one of this run's own effects."""
    from sandbox.models import Effect

    keys = list(run.intents.values_list("idempotency_key", flat=True))
    return Effect.objects.filter(undoes__idempotency_key__in=keys).count()


def sweep_and_decide() -> str:
    out = io.StringIO()
    open_calls_past_in_flight()
    call_command("reconcile", older_than=0, decide=True, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(("ticket_id", "mode", "n"), KILL_POINTS)
def test_every_kill_point_ends_in_its_policys_outcome_with_each_effect_once(
    sandbox_tools: str, ticket_id: str, mode: str, n: int
) -> None:
    flag = "--kill-after" if mode == "after" else "--kill-between-accept-and-record"
    returncode, run = replay_in_child(ticket_id, sandbox_tools, flag, str(n))
    assert returncode == -9 and run is not None
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))

    sweep_and_decide()

    run.refresh_from_db()
    status, reason, undone = expected_outcome(ticket_id, mode, n)
    assert (run.status, run.outcome_reason) == (status, reason), run.outcome_why
    assert not run.intents.filter(status=IntentStatus.INTENDED).exists()
    world = check_run(run)
    assert world.violations == ()
    writes = len(FLOWS[TICKETS[ticket_id].task_type].writes)
    if status == RunStatus.COMPLETED:
        assert (world.performed, world.effects) == (writes, writes)
    else:
        # No remaining step was sent; each undoable write was undone once, by its own action.
        assert (world.performed, world.effects) == (n + undone, n + undone)
        assert ledger_undos(run) == undone
        assert Escalation.objects.filter(run=run, reason=reason, resolved_at__isnull=True).count() == 1
        if undone:
            assert len(run.outcome_why["undo"]["undone"]) == undone


def _dead_run(make_run: Any, **fields: Any) -> Run:
    run = make_run(**fields)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    run.refresh_from_db()
    return run


def test_a_passed_deadline_escalates_instead_of_resuming(make_run: Any) -> None:
    run = _dead_run(
        make_run,
        task_type="expedited_fee_refund",
        deadline=timezone.now() - timedelta(minutes=1),
        versions=FLOWS["expedited_fee_refund"].run_versions(),
        plan=[],
    )
    decision = decisions.run_decide(run=run, actor=SYSTEM)
    run.refresh_from_db()
    # Nothing was done, so nothing needed undoing: compensated, and handed to a person.
    assert (decision.outcome, run.status, run.outcome_reason) == (
        "compensated",
        "compensated",
        "deadline_passed",
    )
    assert Escalation.objects.filter(run=run, resolved_at__isnull=True).exists()


def test_a_version_mismatch_is_escalated_naming_it(make_run: Any) -> None:
    versions = {**FLOWS["expedited_fee_refund"].run_versions(), "flow": "expedited_fee_refund-0"}
    run = _dead_run(make_run, task_type="expedited_fee_refund", versions=versions, plan=[])
    decisions.run_decide(run=run, actor=SYSTEM)
    run.refresh_from_db()
    assert run.outcome_reason == OutcomeReason.VERSION_MISMATCH
    assert run.outcome_why == {
        "code": RunWhy.VERSION_CHANGED,
        "field": "flow",
        "recorded": "expedited_fee_refund-0",
        "running": FLOWS["expedited_fee_refund"].run_versions()["flow"],
    }
    assert "the flow version changed: expedited_fee_refund-0 was recorded" in handover_for(run).reason_detail


def test_with_no_running_versions_declared_a_dead_run_goes_to_a_person(make_run: Any) -> None:
    # Production's default (SEAM_RUNNING_VERSIONS blank): the run's versions match nothing the
    # deployment declares, so resuming could carry out a plan its code no longer makes. Not
    # resumed: escalated as a version mismatch, saying why, with nothing sent.
    run = _dead_run(
        make_run,
        task_type="expedited_fee_refund",
        versions=FLOWS["expedited_fee_refund"].run_versions(),
        plan=[{"tool": "issue_refund", "args": {"order_id": "SO-1001", "amount": "9.99", "currency": "USD"}}],
    )
    with override_settings(SEAM_RUNNING_VERSIONS=""):
        decision = decisions.run_decide(run=run, actor=SYSTEM)
    run.refresh_from_db()
    assert (decision.outcome, run.status, run.outcome_reason) == (
        "escalated",
        RunStatus.ESCALATED,
        OutcomeReason.VERSION_MISMATCH,
    )
    assert run.outcome_why == {"code": RunWhy.VERSIONS_UNDECLARED}
    assert not run.intents.exists()
    assert Escalation.objects.filter(run=run, resolved_at__isnull=True).count() == 1


def test_a_registered_upgrade_lets_an_old_run_resume(make_run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {**FLOWS["expedited_fee_refund"].run_versions(), "flow": "expedited_fee_refund-0"}
    run = _dead_run(
        make_run,
        task_type="expedited_fee_refund",
        versions=versions,
        plan=[{"tool": "obsolete_step", "args": {}}],
    )
    monkeypatch.setattr(decisions, "UPGRADES", {})
    decisions.register_upgrade(
        "expedited_fee_refund", "flow", "expedited_fee_refund-0", "expedited_fee_refund-1"
    )(lambda plan: [step for step in plan if step["tool"] != "obsolete_step"])
    decision = decisions.run_decide(run=run, actor=SYSTEM)
    run.refresh_from_db()
    assert (decision.outcome, run.status, run.plan) == ("completed", "completed", [])


def test_upgrading_a_plan_bumps_the_run_version_and_says_so(
    make_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    versions = {**FLOWS["expedited_fee_refund"].run_versions(), "flow": "expedited_fee_refund-0"}
    run = _dead_run(
        make_run,
        task_type="expedited_fee_refund",
        versions=versions,
        plan=[{"tool": "obsolete_step", "args": {}}],
        # Past its deadline: after the upgrade the run is handed over, a single change of its own.
        deadline=timezone.now() - timedelta(minutes=1),
    )
    created_at_version = run.version
    monkeypatch.setattr(decisions, "UPGRADES", {})
    decisions.register_upgrade(
        "expedited_fee_refund", "flow", "expedited_fee_refund-0", "expedited_fee_refund-1"
    )(lambda plan: [step for step in plan if step["tool"] != "obsolete_step"])

    decisions.run_decide(run=run, actor=SYSTEM)

    run.refresh_from_db()
    assert run.plan == []
    # One bump for the rewritten plan, one for the hand-over: a writer holding the old plan is refused.
    assert run.version == created_at_version + 2
    kinds = list(JournalEvent.objects.filter(run=run).order_by("id").values_list("kind", flat=True))
    assert kinds[:2] == ["run_created", "run_plan_upgraded"]
    assert kinds[-1] in ("run_escalated", "run_compensated")
    upgraded = run.events.get(kind="run_plan_upgraded")
    assert upgraded.data == {
        "plan_steps": 0,
        "upgrades": [
            {"field": "flow", "recorded": "expedited_fee_refund-0", "running": "expedited_fee_refund-1"}
        ],
    }


def test_an_unknown_outcome_is_escalated_for_a_person(make_run: Any, agent_actor: journal.Actor) -> None:
    run = _dead_run(
        make_run, task_type="expedited_fee_refund", versions=FLOWS["expedited_fee_refund"].run_versions()
    )
    intent = journal.intent_record(
        run=run, tool="issue_refund", args={"amount": "9.99"}, turn=1, actor=agent_actor
    ).intent
    from journal.models import Intent

    Intent.objects.filter(pk=intent.pk).update(
        status=IntentStatus.UNKNOWN, unknown_reason="the provider cannot say"
    )
    decisions.run_decide(run=run, actor=SYSTEM)
    run.refresh_from_db()
    assert run.outcome_reason == OutcomeReason.UNKNOWN_OUTCOME
    assert [(c["key"], c["reason"]) for c in run.outcome_why["calls"]] == [
        (intent.idempotency_key, "the provider cannot say")
    ]
    # A row settled before verdicts existed is said in the words it kept.
    assert handover_for(run).reason_detail.endswith("“Issue refund” (the provider cannot say)")


def test_a_task_type_without_a_policy_is_escalated(make_run: Any) -> None:
    run = _dead_run(make_run, task_type="mystery", plan=[])
    decisions.run_decide(run=run, actor=SYSTEM)
    run.refresh_from_db()
    assert (run.status, run.outcome_reason) == ("escalated", "policy")


def test_a_live_or_undecided_run_is_left_alone(make_run: Any, agent_actor: journal.Actor) -> None:
    alive = make_run(task_type="expedited_fee_refund", versions=FLOWS["expedited_fee_refund"].run_versions())
    assert alive not in decisions.dead_runs(quiet_for=timedelta(seconds=60))
    in_doubt = _dead_run(
        make_run, task_type="expedited_fee_refund", versions=FLOWS["expedited_fee_refund"].run_versions()
    )
    journal.intent_record(
        run=in_doubt, tool="issue_refund", args={"amount": "9.99"}, turn=1, actor=agent_actor
    )
    assert decisions.run_decide(run=in_doubt, actor=SYSTEM).outcome == "waiting"
    assert Run.objects.get(pk=in_doubt.pk).status == RunStatus.RUNNING


def test_two_deciders_at_once_resume_a_run_once(sandbox_tools: str) -> None:
    returncode, run = replay_in_child("T-41518", sandbox_tools, "--kill-after", "1")
    assert returncode == -9 and run is not None
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    results: list[str] = []
    barrier = threading.Barrier(2)

    def decide() -> None:
        try:
            barrier.wait()
            results.append(decisions.run_decide(run=Run.objects.get(pk=run.pk), actor=SYSTEM).outcome)
        finally:
            connection.close()

    threads = [threading.Thread(target=decide) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["completed", "skipped"]
    assert JournalEvent.objects.filter(run=run, kind="run_resumed").count() == 1
    world = check_run(run)
    assert world.violations == () and world.effects == 2


def _dead_after_acting(make_run: Any, steps: list[tuple[str, dict[str, Any]]]) -> Run:
    """A dead address_change run (resume until the act phase, undo before escalating) that
    performed `steps`, each an act-phase step of its plan."""
    plan = [{"tool": tool, "phase": "act", "args": args} for tool, args in steps]
    run = make_run(task_type="address_change", versions=FLOWS["address_change"].run_versions(), plan=plan)
    for turn, (tool, args) in enumerate(steps, start=1):
        tools.tool_perform(run=run, tool=tool, args=args, turn=turn, actor=SYSTEM)
    return _dead_run_of(run)


def _dead_run_of(run: Run) -> Run:
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    run.refresh_from_db()
    return run


def test_an_undo_the_catalogue_grades_partial_ends_partial_and_the_run_is_not_compensated(
    sandbox_tools: str, make_run: Any
) -> None:
    loss = "the warehouse already emailed the picking list"
    CatalogueEntry.objects.filter(tool="offer_replacement").update(
        reversibility=Reversibility.PARTIAL, loss=loss
    )
    run = _dead_after_acting(
        make_run,
        [
            ("offer_replacement", {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 1}),
            ("issue_refund", {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}),
        ],
    )

    decision = decisions.run_decide(run=run, actor=SYSTEM)

    run.refresh_from_db()
    undo = {c.original.tool: c for c in Compensation.objects.select_related("original")}
    assert (undo["offer_replacement"].status, undo["offer_replacement"].not_undone) == (
        CompensationStatus.PARTIAL,
        loss,
    )
    assert (undo["issue_refund"].status, undo["issue_refund"].not_undone) == (CompensationStatus.DONE, "")
    # Not the world as before: handed over escalated, saying what remains.
    assert (decision.outcome, run.status) == ("escalated", RunStatus.ESCALATED)
    assert {"tool": "offer_replacement", "loss": loss} in run.outcome_why["undo"]["partial"]
    assert f"partly undone: “Reserve a replacement” ({loss})" in handover_for(run).reason_detail
    action = handover_for(run).next_action
    assert action.code == NextActionCode.FINISH_BY_HAND
    assert "everything the run did was undone" not in action.text
    assert f"“Reserve a replacement” was only partly undone ({loss})" in action.text


# --- the deployment's default policy, and the agent's grace -------------------------------------


def _policyless_dead_run(make_run: Any) -> Run:
    TaskPolicy.objects.filter(task_type="expedited_fee_refund").delete()
    return _dead_run(
        make_run,
        task_type="expedited_fee_refund",
        versions=FLOWS["expedited_fee_refund"].run_versions(),
        plan=[],
    )


def test_without_a_default_policy_the_escalation_says_none_is_declared(make_run: Any) -> None:
    run = _policyless_dead_run(make_run)
    with override_settings(SEAM_DEFAULT_RECOVERY_POLICY=""):
        decisions.run_decide(run=run, actor=SYSTEM)
    run.refresh_from_db()
    assert run.outcome_why == {"code": RunWhy.NO_POLICY, "task_type": "expedited_fee_refund"}
    assert "SEAM_DEFAULT_RECOVERY_POLICY" in handover_for(run).reason_detail


def test_the_deployments_default_policy_governs_a_task_type_that_has_none(make_run: Any) -> None:
    run = _policyless_dead_run(make_run)
    with override_settings(SEAM_DEFAULT_RECOVERY_POLICY="resume"):
        decision = decisions.run_decide(run=run, actor=SYSTEM)
    run.refresh_from_db()
    assert (decision.outcome, run.status, run.awaiting_person) == ("completed", RunStatus.COMPLETED, False)
    assert not Escalation.objects.filter(run=run).exists()


@pytest.mark.parametrize("declared", ["resume_until_phase", "resume:act", "sometimes"])
def test_a_malformed_default_policy_is_refused_naming_the_setting(make_run: Any, declared: str) -> None:
    run = _policyless_dead_run(make_run)
    with (
        override_settings(SEAM_DEFAULT_RECOVERY_POLICY=declared),
        pytest.raises(ImproperlyConfigured) as refused,
    ):
        decisions.run_decide(run=run, actor=SYSTEM)
    assert "SEAM_DEFAULT_RECOVERY_POLICY" in str(refused.value)


def _past_its_deadline(make_run: Any, *, silent_for: timedelta) -> Run:
    """A dead run the policy would hand to a person (its deadline passed), silent for so long."""
    run = make_run(
        task_type="expedited_fee_refund",
        versions=FLOWS["expedited_fee_refund"].run_versions(),
        plan=[],
        deadline=timezone.now() - timedelta(minutes=1),
    )
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - silent_for)
    run.refresh_from_db()
    return run


@override_settings(SEAM_STALE_AFTER_SECONDS=60)
def test_inside_the_policys_grace_a_run_is_not_handed_over_and_its_agent_may_come_back(make_run: Any) -> None:
    TaskPolicy.objects.filter(task_type="expedited_fee_refund").update(agent_grace=timedelta(minutes=10))
    run = _past_its_deadline(make_run, silent_for=timedelta(minutes=5))
    seen = run.last_heartbeat_at

    waiting = decisions.run_decide(run=run, actor=SYSTEM)

    fresh = Run.objects.get(pk=run.pk)
    assert (waiting.outcome, waiting.why.code if waiting.why else "") == ("waiting", "agent_grace")
    assert (fresh.status, fresh.awaiting_person, fresh.last_heartbeat_at) == (RunStatus.RUNNING, False, seen)
    assert not Escalation.objects.filter(run=run).exists()
    # The agent comes back: its heartbeat makes the run alive, and no sweep decides it.
    journal.run_heartbeat(run=fresh)
    assert run not in decisions.dead_runs()


@override_settings(SEAM_STALE_AFTER_SECONDS=60)
def test_past_the_policys_grace_the_run_goes_to_a_person(make_run: Any) -> None:
    TaskPolicy.objects.filter(task_type="expedited_fee_refund").update(agent_grace=timedelta(minutes=10))
    run = _past_its_deadline(make_run, silent_for=timedelta(minutes=12))

    decision = decisions.run_decide(run=run, actor=SYSTEM)

    run.refresh_from_db()
    # Nothing to undo (an empty plan): compensated, and a person still has it.
    assert (decision.outcome, run.status, run.awaiting_person, run.outcome_why["code"]) == (
        "compensated",
        RunStatus.COMPENSATED,
        True,
        RunWhy.DEADLINE_PASSED,
    )
