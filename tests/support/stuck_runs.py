"""Stuck runs for the tests of the console and the agent API: a ticket escalated after its run
died mid-sequence (T-40912 by default), the demo's tickets as seed_demo leaves them, and a run
escalated by reconciliation without a sandbox."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import requests
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from journal.models import Run, RunStatus
from journal.services import Actor
from reconciliation.decisions import run_decide
from sandbox.catalogue import catalogue_seed_defaults
from scenarios.management.commands.seed_demo import DEMO_REPLAYS
from scenarios.policies import policies_seed_defaults
from tests.support.in_flight import open_calls_past_in_flight
from tools.registry import reset_registry


def escalate_ticket(
    sandbox_url: str,
    ticket_id: str = "T-40912",
    *flags: str,
    afterwards: Callable[[Run, str], str] | None = None,
) -> Run:
    """Replay a ticket in a child process killed after its second write (the return started,
    the bench reserved, the refund never sent), then let reconciliation decide it. `afterwards`
    changes the world between the kill and the sweep, as the demo's seed does."""
    from tests.scenarios.test_kill_points import replay_in_child

    policies_seed_defaults()
    catalogue_seed_defaults()
    returncode, run = replay_in_child(ticket_id, sandbox_url, *(flags or ("--kill-after", "2")))
    assert returncode == -9 and run is not None
    if afterwards is not None:
        afterwards(run, sandbox_url + "/sandbox/api")
    # Five minutes on: the run silent, and its calls past any chance of still being in flight.
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    open_calls_past_in_flight(run=run)
    call_command("reconcile", older_than=0, decide=True, stdout=io.StringIO())
    run = Run.objects.select_related("tenant").get(pk=run.pk)
    assert run.status == RunStatus.ESCALATED, run.outcome_why
    return run


def refund_key_refused(run: Run, sandbox_api: str) -> str:
    """After the kill, before the sweep (escalate_ticket's `afterwards`): payments refuses the
    key of the refund sent again under it, so a refund its lookup cannot settle stays unknown."""
    rule = {"provider": "payments", "operation": "refund", "fault": "key_conflict", "remaining": 10}
    requests.post(sandbox_api + "/faults/", json=rule, timeout=5).raise_for_status()
    return "armed key_conflict on payments/refund"


def demo_ticket(sandbox_url: str, ticket_id: str) -> Run:
    """A ticket as `seed_demo` leaves it (scenarios' DEMO_REPLAYS: where its runner is killed and
    what happens to the world afterwards), once reconciliation has decided it."""
    replay = next(r for r in DEMO_REPLAYS if r.ticket == ticket_id)
    flags = [
        part
        for option, value in replay.kill.items()
        for part in (f"--{option.replace('_', '-')}", str(value))
    ]
    return escalate_ticket(sandbox_url, ticket_id, *flags, afterwards=replay.afterwards)


def escalated_run(make_run: Callable[..., Run], **fields: Any) -> Run:
    """A run made by `make_run`, gone quiet and escalated by reconciliation's decision (a task
    type without a policy, or a passed deadline, with nothing left in doubt): no sandbox needed."""
    run = make_run(**fields)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    decision = run_decide(run=run, actor=Actor.system("test-reconciler"), quiet_for=timedelta(0))
    assert decision.outcome == "escalated", decision
    return Run.objects.select_related("tenant").get(pk=run.pk)


@contextlib.contextmanager
def sandbox_tools_declared() -> Iterator[None]:
    """The sandbox's tools declared (their schemas draw and check arguments) at an address
    nothing answers, so that nothing is called."""
    with override_settings(SEAM_SANDBOX_URL="http://127.0.0.1:9"):
        reset_registry()
        yield
    reset_registry()
