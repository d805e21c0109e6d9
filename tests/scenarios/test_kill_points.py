"""The kill-point matrix: every registered ticket, killed (SIGKILL, in a real child process) after
every write, between every write's intent commit and its call, and between every write's
acceptance by the provider and its outcome commit; then, from the parent, the world (the
sandbox ledger) is compared with the journal."""

from __future__ import annotations

import io
import os
import uuid
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from devtools.processes import database_url
from devtools.warm_manage import warm_manage_py
from journal.models import AgentToken, IntentStatus, Run, RunStatus, Tenant
from scenarios.invariants import check_run
from scenarios.registry import all_flows, all_tickets, get_flow, get_ticket

pytestmark = pytest.mark.django_db(transaction=True)


def kill_points() -> list[Any]:
    points = []
    for ticket in all_tickets().values():
        writes = len(get_flow(ticket.task_type).writes)
        for n in range(writes + 1):
            points.append(pytest.param(ticket.ticket_id, "after", n, id=f"{ticket.ticket_id}-after-{n}"))
        for n in range(1, writes + 1):
            points.append(pytest.param(ticket.ticket_id, "between", n, id=f"{ticket.ticket_id}-between-{n}"))
    return points


KILL_POINTS = kill_points()
# Between the Nth write's intent commit and its call: the provider never hears of it.
INTENT_KILL_POINTS = [
    pytest.param(ticket.ticket_id, n, id=f"{ticket.ticket_id}-intent-{n}")
    for ticket in all_tickets().values()
    for n in range(1, len(get_flow(ticket.task_type).writes) + 1)
]


def replay_in_child(ticket_id: str, sandbox_url: str, *flags: str) -> tuple[int, Run | None]:
    external_id = f"kill-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(connection.settings_dict),
        "SEAM_SANDBOX_URL": sandbox_url,
    }
    child = warm_manage_py(
        "replay_ticket", ticket_id, "--child", "--external-id", external_id, *flags, env=env, timeout=120
    )
    if child.returncode not in (0, -9):
        raise AssertionError(f"runner failed ({child.returncode}):\n{child.stderr[-3000:]}")
    return child.returncode, Run.objects.filter(external_id=external_id).first()


def test_the_matrix_covers_every_flow() -> None:
    assert {get_ticket(p.values[0]).task_type for p in KILL_POINTS} == set(all_flows())
    assert {get_ticket(p.values[0]).task_type for p in INTENT_KILL_POINTS} == {
        task_type for task_type, flow in all_flows().items() if flow.writes
    }
    assert len(KILL_POINTS) >= 31  # the design documents' team had 31 across 7 flows


@pytest.mark.parametrize(("ticket_id", "mode", "n"), KILL_POINTS)
def test_a_run_killed_at_any_point_leaves_exactly_the_evidence_reconciliation_needs(
    sandbox_tools: str, ticket_id: str, mode: str, n: int
) -> None:
    flag = "--kill-after" if mode == "after" else "--kill-between-accept-and-record"
    returncode, run = replay_in_child(ticket_id, sandbox_tools, flag, str(n))

    assert returncode == -9, "the runner was not killed"
    assert run is not None and run.status == RunStatus.RUNNING
    world = check_run(run)
    assert world.violations == ()
    if mode == "after":
        # Every write that happened is recorded as performed; nothing is in doubt.
        assert (world.performed, world.open, world.effects) == (n, 0, n)
    else:
        # The provider accepted the Nth call, our outcome never landed: the row is open, and the
        # ledger holds exactly one effect under its key, which a lookup will find.
        assert (world.performed, world.open, world.effects) == (n - 1, 1, n)
        open_row = run.intents.get(status=IntentStatus.INTENDED)
        assert open_row.tool == get_flow(get_ticket(ticket_id).task_type).writes[n - 1].tool


@pytest.mark.parametrize(("ticket_id", "n"), INTENT_KILL_POINTS)
def test_a_run_killed_between_an_intent_and_its_call_leaves_an_open_intent_and_no_effect(
    sandbox_tools: str, ticket_id: str, n: int
) -> None:
    returncode, run = replay_in_child(ticket_id, sandbox_tools, "--kill-between-intent-and-call", str(n))

    assert returncode == -9, "the runner was not killed"
    assert run is not None and run.status == RunStatus.RUNNING
    world = check_run(run)
    assert world.violations == ()
    # The Nth intent is committed and open; the provider never heard of it.
    assert (world.performed, world.open, world.effects) == (n - 1, 1, n - 1)
    open_row = run.intents.get(status=IntentStatus.INTENDED)
    assert open_row.tool == get_flow(get_ticket(ticket_id).task_type).writes[n - 1].tool


@pytest.mark.parametrize("ticket_id", sorted(all_tickets()))
def test_an_unkilled_run_completes_with_every_planned_write_once(sandbox_tools: str, ticket_id: str) -> None:
    returncode, run = replay_in_child(ticket_id, sandbox_tools)
    assert returncode == 0
    assert run is not None and run.status == RunStatus.COMPLETED
    writes = len(get_flow(get_ticket(ticket_id).task_type).writes)
    world = check_run(run)
    assert world.violations == ()
    assert (world.performed, world.open, world.effects) == (writes, 0, writes)
    assert len(run.plan) == writes


KILL_FLAGS = {
    "after": "--kill-after",
    "intent": "--kill-between-intent-and-call",
    "between": "--kill-between-accept-and-record",
}
REST_KILL_POINTS = [p for p in KILL_POINTS if p.values[0] in ("T-40912", "T-41207")] + [
    pytest.param(p.values[0], "intent", p.values[1], id=p.id)
    for p in INTENT_KILL_POINTS
    if p.values[0] == "T-40912"
]


@pytest.mark.parametrize(("ticket_id", "mode", "n"), REST_KILL_POINTS)
def test_a_rest_runtime_killed_at_any_point_leaves_the_same_evidence(
    sandbox_tools: str, live_server: Any, tenant: Tenant, ticket_id: str, mode: str, n: int
) -> None:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="rest-runtime", digest=AgentToken.digest_of(secret))
    flag = KILL_FLAGS[mode]

    returncode, run = replay_in_child(
        ticket_id,
        sandbox_tools,
        "--via",
        "rest",
        "--seam-url",
        live_server.url,
        "--token",
        secret,
        flag,
        str(n),
    )

    assert returncode == -9
    assert run is not None and run.tenant == tenant
    world = check_run(run)
    assert world.violations == ()
    expected = {"after": (n, 0, n), "intent": (n - 1, 1, n - 1), "between": (n - 1, 1, n)}[mode]
    assert (world.performed, world.open, world.effects) == expected


def test_replay_ticket_reports_the_journal_beside_the_world(
    sandbox_tools: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url(connection.settings_dict))
    monkeypatch.setenv("SEAM_SANDBOX_URL", sandbox_tools)
    out = io.StringIO()

    call_command("replay_ticket", "T-40912", kill_between_accept_and_record=3, stdout=out)

    report = out.getvalue()
    assert "T-40912: the runner was killed (SIGKILL)" in report
    assert "issue_refund" in report and "intended" in report
    assert "world: 3 effect(s); journal: 2 performed, 1 open" in report
    assert "VIOLATION" not in report
