"""The shortage flow's fan-out, run by the scripted runner in process: three warehouses
(best-effort) and the entitlement (required) before any write."""

from __future__ import annotations

import pytest

from fanout.models import FanOut
from fanout.selectors import run_coverage
from journal.models import IntentStatus, Run, RunStatus, Tenant
from scenarios.runner import InProcessJournal, run_ticket
from tests.fanout.conftest import Sandbox

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_shortage_flow_checks_stock_and_entitlement_before_it_writes(
    sandbox: Sandbox, tenant: Tenant
) -> None:
    sandbox.warehouse("BRS-3", latency_ms=300)

    report = run_ticket("T-41207", journal_writer=InProcessJournal(tenant))

    assert report.handed_over is None
    assert report.reads == ["order_status", "shortage.stock_and_entitlement"]
    assert report.writes_performed == ["issue_credit", "reship", "notify_customer"]
    run = Run.objects.get(pk=report.run_id)
    assert run.status == RunStatus.COMPLETED
    fanout = FanOut.objects.get(run=run)
    assert (fanout.turn, fanout.outcome, fanout.coverage) == (2, "all_good", "4/4")
    # The fan-out settled before the first write's intent was recorded.
    first_intent = run.intents.order_by("intended_at").first()
    assert first_intent is not None and fanout.settled_at is not None
    assert fanout.settled_at <= first_intent.intended_at
    assert run.intents.filter(status=IntentStatus.PERFORMED).count() == 3


def test_a_shortage_run_without_its_entitlement_goes_to_a_person_before_any_write(
    sandbox: Sandbox, tenant: Tenant
) -> None:
    sandbox.fault("orders", "entitlement", "fail_before", remaining=2)
    sandbox.warehouse("MAN-1", fail_every=1)

    report = run_ticket("T-41207", journal_writer=InProcessJournal(tenant))

    assert report.handed_over is not None and report.writes_performed == []
    run = Run.objects.get(pk=report.run_id)
    assert run.status == RunStatus.ESCALATED and not run.intents.exists()
    coverage = run_coverage(run)
    assert coverage is not None
    assert (coverage["outcome"], coverage["coverage"]) == ("required_missing", "2/4")
    assert {m["branch"] for m in coverage["missing"]} == {"warehouse MAN-1", "entitlement SU-88410"}
    assert [c["status"] for c in sandbox.calls("entitlement", "SU-88410")] == [503, 503]
    assert [c["status"] for c in sandbox.calls("stock", "MAN-1")] == [503, 503]
    from sandbox.models import Effect

    assert Effect.objects.count() == 0
