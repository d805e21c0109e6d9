"""A resumption is bounded per pass (SEAM_STEPS_PER_PASS), so one long run never holds a worker,
and a plan longer than SEAM_MAX_PLAN_STEPS is handed to a person instead of being carried out
(issue 20, "Bounded work")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from journal import services as journal
from journal.models import Escalation, IntentStatus, OutcomeReason, Run, RunStatus
from journal.why import RunWhy
from reconciliation import decisions, tasks
from scenarios.policies import policies_seed_defaults
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = journal.Actor.system("test-sweeper")
CREDITS = [
    {"tool": "issue_credit", "args": {"order_id": "SU-90317", "amount": f"{i}.00"}} for i in range(1, 8)
]


def _dead(run: Run) -> Run:
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    return Run.objects.select_related("tenant").get(pk=run.pk)


@override_settings(SEAM_STEPS_PER_PASS=3)
def test_a_resumption_sends_at_most_its_share_per_pass_and_queues_the_rest(
    sandbox_tools: str, tenant: Any, agent_actor: journal.Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = factories.run_via_service(tenant=tenant, actor=agent_actor, plan=CREDITS)
    queued: list[tuple[str, Any]] = []
    monkeypatch.setattr(tasks.resume_run, "delay", lambda *args: queued.append(args))

    first = decisions.run_resume(run=run, actor=SYSTEM)
    assert first.outcome == decisions.DecisionOutcome.CONTINUING
    assert run.intents.filter(status=IntentStatus.PERFORMED).count() == 3
    # The task of the next pass: three more, and it queues the one after.
    assert tasks.resume_run(str(run.pk), None) == decisions.DecisionOutcome.CONTINUING
    assert run.intents.filter(status=IntentStatus.PERFORMED).count() == 6
    assert queued == [(str(run.pk), None)]
    assert tasks.resume_run(str(run.pk), None) == decisions.DecisionOutcome.COMPLETED
    assert run.intents.filter(status=IntentStatus.PERFORMED).count() == 7
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert len(queued) == 1


def test_a_plan_beyond_the_limit_goes_to_a_person_with_nothing_sent(
    tenant: Any, agent_actor: journal.Actor
) -> None:
    policies_seed_defaults()
    run = factories.run_via_service(tenant=tenant, actor=agent_actor, plan=CREDITS)
    with override_settings(SEAM_MAX_PLAN_STEPS=5):
        decision = decisions.run_decide(run=_dead(run), actor=SYSTEM)
    assert decision.outcome == decisions.DecisionOutcome.ESCALATED
    run.refresh_from_db()
    assert (run.status, run.outcome_reason) == (RunStatus.ESCALATED, OutcomeReason.POLICY)
    assert run.outcome_why == {"code": RunWhy.PLAN_TOO_LONG, "steps": len(CREDITS), "limit": 5}
    assert not run.intents.exists()
    assert Escalation.objects.filter(run=run, resolved_at__isnull=True).count() == 1


def test_undoing_a_run_sends_at_most_its_share_and_leaves_the_rest_to_their_own_tasks(
    sandbox_tools: str, tenant: Any, agent_actor: journal.Actor
) -> None:
    from compensations.models import Compensation, CompensationStatus
    from compensations.services import run_compensate
    from sandbox.catalogue import catalogue_seed_defaults

    catalogue_seed_defaults()
    run = factories.run_via_service(tenant=tenant, actor=agent_actor, plan=CREDITS)
    assert decisions.run_resume(run=run, actor=SYSTEM).outcome == decisions.DecisionOutcome.COMPLETED
    with override_settings(SEAM_STEPS_PER_PASS=3):
        result = run_compensate(run=run, actor=SYSTEM)
    assert len(result.undone) == 3
    assert len(result.queued) == 4 and len(result.pending) == 4
    queued = Compensation.objects.filter(pk__in=result.queued)
    assert {c.status for c in queued} == {CompensationStatus.PENDING}
    assert Compensation.objects.filter(status=CompensationStatus.DONE).count() == 3
