"""After a run killed at any point of T-40912 and T-41207 (a real child process, SIGKILL), one
reconciliation sweep in the parent leaves nothing in doubt, and the world still holds each
effect exactly once."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from journal.models import IntentStatus, JournalEvent
from journal.why import CallVerdict
from scenarios.invariants import check_run
from tests.scenarios.test_kill_points import KILL_POINTS, replay_in_child
from tests.support.in_flight import open_calls_past_in_flight

pytestmark = pytest.mark.django_db(transaction=True)

RECONCILED_TICKETS = ("T-40912", "T-41207")
POINTS = [p for p in KILL_POINTS if p.values[0] in RECONCILED_TICKETS]


@pytest.mark.parametrize(("ticket_id", "mode", "n"), POINTS)
def test_a_sweep_after_any_kill_point_settles_every_open_intent_against_the_world(
    sandbox_tools: str, ledger: Any, ticket_id: str, mode: str, n: int
) -> None:
    flag = "--kill-after" if mode == "after" else "--kill-between-accept-and-record"
    returncode, run = replay_in_child(ticket_id, sandbox_tools, flag, str(n))
    assert returncode == -9 and run is not None
    open_before = list(run.intents.filter(status=IntentStatus.INTENDED))

    out = io.StringIO()
    open_calls_past_in_flight(run=run)
    call_command("reconcile", older_than=0, stdout=out)

    assert not run.intents.filter(status=IntentStatus.INTENDED).exists()
    world = check_run(run)
    assert world.violations == ()
    assert (world.performed, world.open, world.effects) == (n, 0, n)
    if mode == "between":
        # The provider accepted the call and our outcome never landed: the lookup finds it.
        (was_open,) = open_before
        settled = run.intents.get(pk=was_open.pk)
        assert settled.status == IntentStatus.PERFORMED
        assert settled.verdict == {"code": CallVerdict.FOUND_PERFORMED}
        assert settled.receipt == ledger.get(idempotency_key=settled.idempotency_key).receipt
        assert (
            JournalEvent.objects.filter(intent=settled, kind=JournalEvent.Kind.INTENT_RECONCILED).count() == 1
        )
        assert f"intent {settled.pk}: performed" in out.getvalue()
    else:
        assert open_before == []
        assert "nothing to do" in out.getvalue()
