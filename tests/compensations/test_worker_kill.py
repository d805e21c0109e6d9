"""A real Celery worker whose pool process is SIGKILLed in the middle of a compensation: the
provider has acted, our record has not. The task is redelivered (acks_late with
reject_on_worker_lost), finds its own intent by key instead of sending again, waits for
reconciliation to settle it, and finishes — with exactly one undo in the world."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import requests
from celery import Celery

from compensations.models import Compensation, CompensationStatus
from compensations.services import compensation_request
from devtools.processes import Fleet
from journal.models import Run
from journal.services import Actor
from reconciliation.services import reconcile_sweep
from sandbox.catalogue import catalogue_seed_defaults
from tests.reconciliation.test_workers import broker, fleet, fleet_env  # noqa: F401 (fixtures)
from tools import services as tools

# Real workers killed mid-compensation: in `make chaos`, which CI runs after `make test`.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chaos]

REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
ACTOR = Actor.system("test")


def _pool_children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout
    return [int(line) for line in found.split()]


def test_a_worker_killed_mid_compensation_undoes_the_refund_once(
    sandbox_tools: str,
    fleet: Fleet,  # noqa: F811
    fleet_env: dict[str, str],  # noqa: F811
    broker: str,  # noqa: F811
    make_run: Callable[..., Run],
    ledger: Any,
) -> None:
    catalogue_seed_defaults()
    original = tools.tool_perform(
        run=make_run(), tool="issue_refund", args=REFUND, turn=1, actor=ACTOR
    ).intent
    # The provider reverses at once but answers only after 4 s: the window to kill the worker in.
    rule = {"provider": "payments", "operation": "reverse", "fault": "slow:4000", "remaining": 1}
    requests.post(f"{sandbox_tools}/sandbox/api/faults/", json=rule, timeout=5).raise_for_status()
    fleet_env["SEAM_COMPENSATION_PENDING_RETRY_SECONDS"] = "1"
    fleet.start(
        "worker", "worker", "--pool=prefork", "--concurrency=1", "--without-gossip", "--without-mingle"
    )
    compensation = compensation_request(original=original, actor=ACTOR)
    Celery(broker=broker, set_as_current=False).send_task(
        "compensations.compensate_step", args=[compensation.pk]
    )

    undos = ledger.filter(undoes__idempotency_key=original.idempotency_key)
    fleet.wait_for(undos.exists, timeout=60, what="the provider reversing the refund")
    children = _pool_children(fleet.processes["worker"].pid)
    assert children, "the worker has no pool process to kill"
    for child in children:
        os.kill(child, signal.SIGKILL)

    def settled() -> bool:
        # Reconciliation settles the compensation's own intent (its key names the reversal).
        reconcile_sweep(older_than=timedelta(0), actor=ACTOR)
        return Compensation.objects.get(pk=compensation.pk).status == CompensationStatus.DONE

    fleet.wait_for(settled, timeout=90, what="the redelivered compensation finishing")

    assert undos.count() == 1, "the refund was reversed more than once"
    done = Compensation.objects.get(pk=compensation.pk)
    assert done.intent is not None and done.intent.receipt["refund_id"] == original.receipt["refund_id"]
    assert "WorkerLostError" in fleet.log("worker") or "lost" in fleet.log("worker").lower(), fleet.logs()
