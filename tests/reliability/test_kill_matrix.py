"""The full kill matrix: every kill point of every flow through the REST client, kills
during compensation and during resumption — each a real child process SIGKILLed at the point —
and recovery always in a fresh process (`manage.py reconcile --older-than 0 --decide`, and the
compensation run again), never in the test process. Then, against the sandbox's ledger
(scenarios.invariants.check_recovered): no orphan writes, nothing settled twice, every intent
settled or `unknown`, each undo exactly once, and the handover's `completed` equal to the
effects that exist. The in-process path's kill points are recovered by
tests/reconciliation/test_decisions.py."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.db import connection

from compensations.models import Compensation, CompensationStatus
from devtools.processes import database_url
from devtools.warm_manage import warm_manage_py
from journal.models import AgentToken, IntentStatus, Run, RunStatus, Tenant
from journal.selectors import compensation_intent_ids
from sandbox.catalogue import catalogue_seed_defaults
from sandbox.seam import DEFAULT_CATALOGUE
from scenarios.flows import FLOWS
from scenarios.invariants import check_recovered, check_run
from scenarios.policies import policies_seed_defaults
from scenarios.seam import DEFAULT_POLICIES
from scenarios.tickets import TICKETS
from tests.reconciliation.test_decisions import expected_outcome
from tests.scenarios.test_kill_points import KILL_POINTS, replay_in_child
from tests.support import recovery_figure
from tests.support.in_flight import open_calls_past_in_flight

pytestmark = pytest.mark.django_db(transaction=True)

# The whole matrix takes several minutes on a 2-core machine, so `make test` runs a sample — one
# ticket of each kind — and `make chaos` (pytest -m chaos) runs every case.
IN_MAKE_TEST = {"rest": {"T-41518"}, "compensation": {"T-41207"}, "recovery": {"T-41518", "T-41402"}}
UNDOABLE = {
    e["tool"] for e in DEFAULT_CATALOGUE if e["reversibility"] != "none" and e.get("compensating_tool")
}
STRATEGY = {task_type: strategy for task_type, strategy, *_ in DEFAULT_POLICIES}


@pytest.fixture(autouse=True)
def _written_policies() -> None:
    # Transactional tests empty every table between cases, the migrations' seeds included.
    policies_seed_defaults()
    catalogue_seed_defaults()


def sampled(points: list[Any], part: str) -> list[Any]:
    """The points of `part`, those of tickets outside its sample marked `chaos`."""
    return [
        p if p.values[0] in IN_MAKE_TEST[part] else pytest.param(*p.values, id=p.id, marks=pytest.mark.chaos)
        for p in points
    ]


def manage(sandbox_url: str, *args: str, expect: int = 0) -> str:
    """`manage.py <args>` in a fresh process on the test database and the sandbox."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(connection.settings_dict),
        "SEAM_SANDBOX_URL": sandbox_url,
    }
    child = warm_manage_py(*args, env=env, timeout=180)
    assert child.returncode == expect, (
        f"manage.py {' '.join(args)} exited with {child.returncode}, not {expect}:\n"
        f"{child.stdout[-2000:]}\n{child.stderr[-3000:]}"
    )
    return child.stdout


def recover(sandbox_url: str) -> str:
    """What the beat's sweep does, once, in a process of its own, minutes after the kill."""
    open_calls_past_in_flight()
    return manage(sandbox_url, "reconcile", "--older-than", "0", "--decide")


def kill_flag(mode: str) -> str:
    return "--kill-after" if mode == "after" else "--kill-between-accept-and-record"


def assert_policy_outcome(run: Run, ticket_id: str, world_writes: int, *, matrix: str) -> None:
    """The run ended as its task type's policy prescribes for a run whose world holds its first
    `world_writes` planned writes, with each remaining write done once or each undo done once.
    The run is first recorded in `matrix` of the recovery figure (tests/support/recovery_figure)."""
    run.refresh_from_db()
    status, reason, undone = expected_outcome(ticket_id, "after", world_writes)
    writes = len(FLOWS[TICKETS[ticket_id].task_type].writes)
    expected = writes if status == RunStatus.COMPLETED else world_writes + undone
    recovery_figure.record(matrix, run, expected_effects=expected)
    assert (run.status, run.outcome_reason) == (status, reason), run.outcome_why
    assert check_recovered(run) == ()
    world = check_run(run)
    assert (world.performed, world.effects) == (expected, expected)


# --- 1. the REST runtime, killed at every kill point of every flow ---------------------------


@pytest.fixture
def agent_token(tenant: Tenant) -> str:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="rest-runtime", digest=AgentToken.digest_of(secret))
    return secret


def test_the_rest_matrix_is_every_kill_point_of_every_flow() -> None:
    assert {TICKETS[p.values[0]].task_type for p in KILL_POINTS} == set(FLOWS)
    assert len(KILL_POINTS) == sum(2 * len(f.writes) + 1 for f in FLOWS.values())


@pytest.mark.parametrize(("ticket_id", "mode", "n"), sampled(KILL_POINTS, "rest"))
def test_a_rest_runtime_killed_anywhere_is_recovered_by_a_fresh_process(
    sandbox_tools: str, live_server: Any, agent_token: str, ticket_id: str, mode: str, n: int
) -> None:
    returncode, run = replay_in_child(
        ticket_id,
        sandbox_tools,
        *("--via", "rest", "--seam-url", live_server.url, "--token", agent_token),
        *(kill_flag(mode), str(n)),
    )
    assert returncode == -9 and run is not None
    left = check_run(run)
    assert left.violations == ()
    assert (left.performed, left.open, left.effects) == ((n, 0, n) if mode == "after" else (n - 1, 1, n))

    recover(sandbox_tools)

    assert_policy_outcome(run, ticket_id, n, matrix="built-in flows")


# --- 2. kills during a compensation ----------------------------------------------------------


def compensation_points() -> list[Any]:
    """Each completed ticket's run undone by a person's "compensate the run", killed after and
    inside each of its undos (in reverse order of the writes)."""
    points = []
    for ticket in TICKETS.values():
        undos = sum(step.tool in UNDOABLE for step in FLOWS[ticket.task_type].writes)
        for m in range(1, undos + 1):
            for mode in ("after", "between"):
                points.append(
                    pytest.param(ticket.ticket_id, mode, m, id=f"{ticket.ticket_id}-undo-{mode}-{m}")
                )
    return points


COMPENSATION_POINTS = compensation_points()


@pytest.mark.parametrize(("ticket_id", "mode", "m"), sampled(COMPENSATION_POINTS, "compensation"))
def test_a_compensation_killed_mid_way_undoes_each_step_once_after_recovery(
    sandbox_tools: str, ticket_id: str, mode: str, m: int
) -> None:
    returncode, run = replay_in_child(ticket_id, sandbox_tools)
    assert returncode == 0 and run is not None and run.status == RunStatus.COMPLETED
    undos = sum(step.tool in UNDOABLE for step in FLOWS[TICKETS[ticket_id].task_type].writes)

    manage(
        sandbox_tools, "with_kill_point", kill_flag(mode), str(m), "compensate_run", str(run.pk), expect=-9
    )

    left = check_run(run)
    assert left.violations == ()
    assert left.open == (1 if mode == "between" else 0)
    # A fresh process settles the undo left in doubt, then the compensation is run again.
    recover(sandbox_tools)
    manage(sandbox_tools, "compensate_run", str(run.pk))
    writes = len(FLOWS[TICKETS[ticket_id].task_type].writes)
    recovery_figure.record(
        "built-in flows: compensation killed", run, expected_effects=writes + undos, person_asked=True
    )

    assert check_recovered(run) == ()
    live = Compensation.objects.filter(original__run=run).exclude(status=CompensationStatus.NOT_POSSIBLE)
    assert sorted(live.values_list("status", flat=True)) == [CompensationStatus.DONE] * undos
    undo_ids = compensation_intent_ids(run=run)
    assert run.intents.filter(pk__in=undo_ids, status=IntentStatus.PERFORMED).count() == undos
    assert check_run(run).effects == writes + undos


# --- 3. kills during recovery itself: a resumption, or the policy's compensation --------------


def recovery_points() -> list[Any]:
    """Each ticket's runner killed where recovery has the most to send — before any write for a
    flow its policy resumes, after every write for one it compensates — then the recovering
    process killed after and inside each of the writes it sends."""
    points = []
    for ticket in TICKETS.values():
        writes = FLOWS[ticket.task_type].writes
        if STRATEGY[ticket.task_type] == "compensate_and_escalate":
            first, sends = len(writes), sum(step.tool in UNDOABLE for step in writes)
        else:
            first, sends = 0, len(writes)
        for m in range(1, sends + 1):
            for mode in ("after", "between"):
                points.append(
                    pytest.param(
                        ticket.ticket_id, first, mode, m, id=f"{ticket.ticket_id}-recovery-{mode}-{m}"
                    )
                )
    return points


RECOVERY_POINTS = recovery_points()


@pytest.mark.parametrize(("ticket_id", "first", "mode", "m"), sampled(RECOVERY_POINTS, "recovery"))
def test_a_recovery_killed_mid_way_is_finished_by_the_next_with_each_write_once(
    sandbox_tools: str, ticket_id: str, first: int, mode: str, m: int
) -> None:
    returncode, run = replay_in_child(ticket_id, sandbox_tools, "--kill-after", str(first))
    assert returncode == -9 and run is not None

    open_calls_past_in_flight()
    manage(
        sandbox_tools,
        *("with_kill_point", kill_flag(mode), str(m)),
        *("reconcile", "--older-than", "0", "--decide"),
        expect=-9,
    )

    left = check_run(run)
    assert left.violations == ()
    assert left.open == (1 if mode == "between" else 0)
    recover(sandbox_tools)

    # The second decision sees what the first recovery left, as if the runner had died there: a
    # resumption's writes are the run's own planned writes; a compensation's are undos.
    resumed = STRATEGY[TICKETS[ticket_id].task_type] != "compensate_and_escalate"
    assert_policy_outcome(
        run, ticket_id, first + m if resumed else first, matrix="built-in flows: recovery killed"
    )


# --- the invariants are not vacuous ------------------------------------------------------------


def test_the_recovery_invariants_name_each_kind_of_violation(sandbox_tools: str, tenant: Tenant) -> None:
    from journal.models import Intent, JournalEvent
    from sandbox.models import Effect
    from scenarios.runner import InProcessJournal, run_ticket

    run = Run.objects.get(pk=run_ticket("T-41844", journal_writer=InProcessJournal(tenant)).run_id)
    assert check_recovered(run) == ()
    adjust = run.intents.get(tool="adjust_stock")
    # The ERP's undo shares the reference and negates the quantity: a second effect, not a double.
    undo = Effect.objects.create(
        provider="erp",
        operation="adjust_stock",
        business_ref="T-41844",
        request={**adjust.args, "qty": -adjust.args["qty"]},
        receipt={},
    )
    assert any("orphan write" in v for v in check_recovered(run))
    undo.delete()

    Effect.objects.create(
        provider="erp", operation="adjust_stock", business_ref="T-41844", request=adjust.args, receipt={}
    )
    assert any("performed twice" in v for v in check_recovered(run))
    Effect.objects.filter(business_ref="T-41844").latest("id").delete()

    event = JournalEvent.objects.filter(intent=adjust, kind=JournalEvent.Kind.OUTCOME_RECORDED).get()
    JournalEvent.objects.create(
        run=run, intent=adjust, kind=event.kind, actor_kind=event.actor_kind, actor_name="again", at=event.at
    )
    assert f"{adjust.step_id} was settled 2 times (admitted 1)" in check_recovered(run)

    # Events refer to their intent without a database constraint: a stray reference is caught here.
    JournalEvent.objects.create(
        run=run,
        intent_id=adjust.pk + 10_000,
        kind=event.kind,
        actor_kind=event.actor_kind,
        actor_name="x",
        at=event.at,
    )
    stray = (
        f"the outcome_recorded event of intent {adjust.pk + 10_000} names an intent this run does not have"
    )
    assert stray in check_recovered(run)

    Intent.objects.filter(pk=adjust.pk).update(status=IntentStatus.NOT_PERFORMED)
    violations = check_recovered(run)
    assert (
        f"{adjust.step_id} happened in the world but the handover does not list it as completed" in violations
    )

    Intent.objects.filter(pk=adjust.pk).update(status=IntentStatus.INTENDED)
    assert f"{adjust.step_id} is still intended after recovery" in check_recovered(run)
