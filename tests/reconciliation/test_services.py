"""reconciliation.services against the real sandbox: each answer a lookup can give settles an
open intent one way, failures to ask back off and are bounded, and nothing is settled twice."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from compensations.services import run_compensate
from console.selectors import queue_reason_counts
from handover import handover_for
from journal import services as journal
from journal.models import Escalation, Intent, IntentStatus, JournalEvent, Run, RunStatus
from journal.selectors import stale_intents
from journal.tool_errors import DispatchResult
from journal.why import CallVerdict, CleanupCode, RunWhy, why
from reconciliation.decisions import DecisionOutcome, run_resume
from reconciliation.services import ReconcileOutcome, intent_reconcile, reconcile_sweep
from sandbox.catalogue import catalogue_seed_defaults
from scenarios.invariants import check_recovered
from tools import services as tool_services
from tools.connectors import LookupQuery, LookupResult, Performed
from tools.registry import get_tool

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
SWEEPER = journal.Actor.system("test-sweeper")


def _record(
    run: Run, *, tool: str = "issue_refund", args: dict[str, Any] | None = None, occurrence: int = 0
) -> Intent:
    return journal.intent_record(
        run=run,
        tool=tool,
        args=args or REFUND,
        turn=1,
        occurrence=occurrence,
        actor=journal.Actor.agent("bot"),
    ).intent


def _go_stale(run: Run, *, ago: timedelta = timedelta(minutes=5)) -> None:
    """The run died `ago`: its rows and its last heartbeat are that old."""
    then = timezone.now() - ago
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    Intent.objects.filter(run=run).update(intended_at=then)


def _fault(sandbox: str, **rule: Any) -> None:
    response = requests.post(f"{sandbox}/sandbox/api/faults/", json=rule, timeout=5)
    assert response.status_code == 201, response.text


# Older than the sandbox's key lifetime (ToolSpec.key_lifetime, a day): the provider may have
# forgotten the key, so a call of this age is never sent again, only asked about.
PAST_KEY_LIFETIME = timedelta(days=2)


def test_a_call_the_provider_performed_is_settled_performed_with_its_receipt(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    run = make_run()
    intent = _record(run)
    get_tool("issue_refund").get_connector().perform(REFUND, intent.idempotency_key)

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert result.outcome == ReconcileOutcome.PERFORMED
    assert intent.status == IntentStatus.PERFORMED
    assert intent.receipt == ledger.get(idempotency_key=intent.idempotency_key).receipt
    assert intent.settled_at is not None and intent.next_lookup_at is None
    event = JournalEvent.objects.get(intent=intent, kind=JournalEvent.Kind.INTENT_RECONCILED)
    assert (event.actor_kind, event.actor_name) == ("system", "test-sweeper")
    assert event.data["receipt"] == intent.receipt


def test_a_call_that_never_reached_the_provider_is_settled_not_performed(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    run = make_run()
    intent = _record(run)

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert result.outcome == ReconcileOutcome.NOT_PERFORMED
    assert intent.status == IntentStatus.NOT_PERFORMED
    assert intent.receipt == {}
    assert ledger.count() == 0


def test_a_provider_that_cannot_say_leaves_the_row_unknown_with_its_reason(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    intent = _record(run)
    _go_stale(run, ago=PAST_KEY_LIFETIME)
    _fault(sandbox_tools, provider="payments", operation="lookup", fault="unknown_lookup")

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert result.outcome == ReconcileOutcome.UNKNOWN
    assert intent.status == IntentStatus.UNKNOWN
    assert intent.verdict["code"] == CallVerdict.DOWNSTREAM_CANNOT_SAY
    assert intent.verdict["answer"]  # the provider's own reason, kept as evidence
    event = JournalEvent.objects.get(intent=intent, kind=JournalEvent.Kind.INTENT_RECONCILED)
    assert event.data["verdict"] == intent.verdict


# An undeclared tool is refused where tools are declared, unless the deployment accepts them.
@override_settings(SEAM_UNDECLARED_TOOLS="accept")
def test_an_unregistered_tool_is_unknown_because_no_connector_can_be_asked(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    intent = _record(run, tool="fax_the_warehouse", args={"page": 1})

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert result.outcome == ReconcileOutcome.UNKNOWN
    assert intent.status == IntentStatus.UNKNOWN
    assert intent.verdict["code"] == CallVerdict.NO_LOOKUP
    assert intent.verdict["ambiguous"] is False


# An undeclared tool is refused where tools are declared, unless the deployment accepts them.
@override_settings(SEAM_UNDECLARED_TOOLS="accept")
def test_a_run_with_an_unknown_intent_cannot_be_completed(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    intent = _record(run, tool="fax_the_warehouse", args={"page": 1})
    intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    with pytest.raises(journal.Conflict, match="unknown outcome that a person must settle"):
        journal.run_complete(run=run, actor=journal.Actor.agent("bot"))


def test_settling_twice_is_harmless(sandbox_tools: str, make_run: Callable[..., Run]) -> None:
    run = make_run()
    intent = _record(run)

    first = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)
    second = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    assert first.outcome == ReconcileOutcome.NOT_PERFORMED
    assert second.outcome == ReconcileOutcome.SKIPPED
    assert JournalEvent.objects.filter(intent=intent, kind=JournalEvent.Kind.INTENT_RECONCILED).count() == 1


def test_an_outcome_recorded_by_the_runtime_is_not_overwritten(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    intent = _record(run)
    journal.outcome_record(
        intent=intent, ok=True, receipt={"refund_id": "re_x"}, actor=journal.Actor.agent("bot")
    )

    assert intent_reconcile(intent_id=intent.pk, actor=SWEEPER).outcome == ReconcileOutcome.SKIPPED
    intent.refresh_from_db()
    assert (intent.status, intent.receipt) == (IntentStatus.PERFORMED, {"refund_id": "re_x"})


def test_a_heartbeating_run_and_a_young_intent_are_left_alone(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    alive = make_run(external_id="alive")
    in_flight = _record(alive)
    Intent.objects.filter(pk=in_flight.pk).update(intended_at=timezone.now() - timedelta(minutes=5))
    journal.run_heartbeat(run=alive)
    quiet = make_run(external_id="quiet")
    young = _record(quiet)
    Run.objects.filter(pk=quiet.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))

    report = reconcile_sweep(older_than=timedelta(seconds=60), actor=SWEEPER)

    assert sum(report.counts.values()) == 0
    assert set(Intent.objects.values_list("status", flat=True)) == {IntentStatus.INTENDED}
    assert not JournalEvent.objects.filter(kind=JournalEvent.Kind.INTENT_RECONCILED).exists()
    assert young.pk not in {i.pk for i in stale_intents(older_than=timedelta(seconds=60))}


def test_the_default_threshold_comes_from_settings_with_a_per_tool_override(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    refund = _record(run)
    seller = _record(run, tool="notify_seller", args={"order_id": "SU-90317", "template": "return_started"})
    _go_stale(run, ago=timedelta(seconds=90))

    with override_settings(SEAM_STALE_AFTER_SECONDS=60, SEAM_STALE_AFTER_BY_TOOL={"notify_seller": 300}):
        stale = [i.pk for i in stale_intents()]

    assert stale == [refund.pk]
    assert seller.pk not in stale


@override_settings(SEAM_LOOKUP_MAX_ATTEMPTS=3)
def test_transient_lookup_failures_back_off_and_end_unknown_past_the_budget(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    intent = _record(run)
    _go_stale(run, ago=PAST_KEY_LIFETIME)
    _fault(sandbox_tools, provider="payments", operation="lookup", fault="fail_before", remaining=10)

    first = reconcile_sweep(older_than=timedelta(0), actor=SWEEPER)

    intent.refresh_from_db()
    assert first.counts["retry_later"] == 1
    assert intent.status == IntentStatus.INTENDED
    assert intent.lookup_attempts == 1
    assert intent.last_lookup_error.startswith("transient: HTTP 503")
    assert intent.next_lookup_at is not None and intent.next_lookup_at > timezone.now()
    # Backing off: the next sweep does not ask again yet.
    assert sum(reconcile_sweep(older_than=timedelta(0), actor=SWEEPER).counts.values()) == 0

    Intent.objects.filter(pk=intent.pk).update(next_lookup_at=None)  # the backoff has passed
    assert intent_reconcile(intent_id=intent.pk, actor=SWEEPER).outcome == ReconcileOutcome.RETRY_LATER
    Intent.objects.filter(pk=intent.pk).update(next_lookup_at=None)
    last = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert last.outcome == ReconcileOutcome.UNKNOWN
    assert intent.status == IntentStatus.UNKNOWN
    assert intent.lookup_attempts == 3
    assert intent.verdict["code"] == CallVerdict.LOOKUP_BUDGET_SPENT
    assert intent.verdict["attempts"] == 3 and "HTTP 503" in intent.verdict["last_error"]
    kinds = list(JournalEvent.objects.filter(intent=intent).values_list("kind", flat=True))
    assert kinds.count(JournalEvent.Kind.LOOKUP_FAILED) == 2
    assert kinds.count(JournalEvent.Kind.INTENT_RECONCILED) == 1


def test_two_sweepers_at_once_settle_each_row_exactly_once(
    sandbox_tools: str, make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run()
    intents = [_record(run, occurrence=i) for i in range(50)]
    connector = get_tool("issue_refund").get_connector()
    for intent in intents[::2]:
        connector.perform(REFUND, intent.idempotency_key)
    _go_stale(run)
    lookups: list[int] = []
    real_lookup = tool_services.intent_lookup

    def counting_lookup(*, intent: Intent) -> Any:
        lookups.append(intent.pk)
        return real_lookup(intent=intent)

    monkeypatch.setattr(tool_services, "intent_lookup", counting_lookup)
    start = threading.Barrier(2)
    reports: list[Any] = []
    errors: list[BaseException] = []

    def sweep() -> None:
        try:
            start.wait()
            reports.append(reconcile_sweep(older_than=timedelta(0), actor=SWEEPER))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert errors == []
    assert len(reports) == 2
    per_intent = {
        i.pk: JournalEvent.objects.filter(intent=i, kind=JournalEvent.Kind.INTENT_RECONCILED).count()
        for i in intents
    }
    assert set(per_intent.values()) == {1}
    assert sorted(lookups) == sorted(i.pk for i in intents)  # each downstream asked once
    settled = sum(r.counts["performed"] + r.counts["not_performed"] for r in reports)
    assert settled == 50
    assert Intent.objects.filter(status=IntentStatus.PERFORMED).count() == 25
    assert Intent.objects.filter(status=IntentStatus.NOT_PERFORMED).count() == 25


def test_the_reconcile_command_prints_what_it_settled(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    import io

    from django.core.management import call_command

    run = make_run()
    intent = _record(run)
    _go_stale(run)
    out = io.StringIO()

    call_command("reconcile", "--run", str(run.pk), stdout=out)

    assert f"intent {intent.pk}: not_performed" in out.getvalue()
    assert "1 not_performed" in out.getvalue()


def test_the_periodic_task_sweeps_under_its_stable_name(
    sandbox_tools: str, make_run: Callable[..., Run], settings: Any
) -> None:
    from config.celery import app
    from reconciliation.tasks import sweep_stale_intents

    run = make_run()
    intent = _record(run)
    _go_stale(run)

    counts = sweep_stale_intents.apply().get()

    assert counts["not_performed"] == 1
    assert Intent.objects.get(pk=intent.pk).status == IntentStatus.NOT_PERFORMED
    task = app.tasks["reconciliation.sweep_stale_intents"]
    assert task.acks_late and task.reject_on_worker_lost and task.time_limit
    schedule = settings.CELERY_BEAT_SCHEDULE["reconciliation-sweep-stale-intents"]
    assert schedule["task"] == "reconciliation.sweep_stale_intents"


@override_settings(SEAM_LOOKUP_MAX_ATTEMPTS=1)
def test_a_connector_that_crashes_does_not_stop_the_sweep_and_ends_unknown(
    sandbox_tools: str, make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run()
    broken = _record(run, occurrence=0)
    fine = _record(run, occurrence=1)
    _go_stale(run, ago=PAST_KEY_LIFETIME)
    real_lookup = tool_services.intent_lookup

    def lookup(*, intent: Intent) -> Any:
        if intent.pk == broken.pk:
            raise RuntimeError("connector bug")
        return real_lookup(intent=intent)

    monkeypatch.setattr(tool_services, "intent_lookup", lookup)

    report = reconcile_sweep(older_than=timedelta(0), actor=SWEEPER)

    assert (report.counts["unknown"], report.counts["not_performed"]) == (1, 1)
    broken.refresh_from_db()
    assert broken.status == IntentStatus.UNKNOWN
    assert broken.verdict["code"] == CallVerdict.LOOKUP_BUDGET_SPENT
    assert "connector bug" in broken.verdict["last_error"]
    assert Intent.objects.get(pk=fine.pk).status == IntentStatus.NOT_PERFORMED


# --- a cancelled run's call in doubt ----------------------------------------------------------


@override_settings(SEAM_STALE_AFTER_BY_TOOL={"issue_refund": 120.0})
def test_a_cancelled_runs_call_that_nobody_can_settle_goes_to_a_person_once(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    in_flight = _record(run)
    cancelled = journal.run_cancel(run=run, reason="buyer withdrew", actor=journal.Actor.agent("bot"))
    assert cancelled.cleanup_scheduled == [
        why(
            CleanupCode.RECONCILE_WHEN_QUIET,
            quiet_seconds=120,
            tool="issue_refund",
            step_id=in_flight.step_id,
            key=in_flight.idempotency_key,
        )
    ]
    assert not cancelled.run.awaiting_person
    _go_stale(run)
    # Nobody can settle it: the lookup cannot say, and the provider refuses the key when the
    # call is sent again under it.
    _fault(sandbox_tools, provider="payments", operation="lookup", fault="unknown_lookup", remaining=1)
    _fault(sandbox_tools, provider="payments", operation="refund", fault="key_conflict", remaining=1)

    report = reconcile_sweep(actor=SWEEPER)
    reconcile_sweep(actor=SWEEPER)  # a second sweep finds nothing open and hands over nothing more

    assert report.counts["unknown"] == 1
    run.refresh_from_db()
    assert (run.status, run.awaiting_person, run.outcome_reason) == (
        RunStatus.CANCELLED,
        True,
        "unknown_outcome",
    )
    escalation = Escalation.objects.get(run=run)
    assert escalation.resolved_at is None
    (call,) = escalation.why["calls"]
    assert (escalation.why["code"], call["tool"], call["key"]) == (
        RunWhy.CALLS_UNKNOWN,
        "issue_refund",
        in_flight.idempotency_key,
    )
    assert call["verdict"]["code"] == CallVerdict.KEY_REFUSED
    assert call["verdict"]["lookup"]["code"] == CallVerdict.DOWNSTREAM_CANNOT_SAY
    escalated = JournalEvent.objects.get(run=run, kind=JournalEvent.Kind.RUN_ESCALATED)
    assert (escalated.actor_name, escalated.data["reason"]) == ("test-sweeper", "unknown_outcome")
    assert queue_reason_counts(tenant=run.tenant, now=timezone.now()) == {"unknown_outcome": 1}


def test_a_cancelled_runs_call_found_performed_needs_nobody(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    run = make_run()
    in_flight = _record(run)
    journal.run_cancel(run=run, reason="buyer withdrew", actor=journal.Actor.agent("bot"))
    get_tool("issue_refund").get_connector().perform(REFUND, in_flight.idempotency_key)
    _go_stale(run)

    reconcile_sweep(actor=SWEEPER)

    in_flight.refresh_from_db()
    run.refresh_from_db()
    assert in_flight.status == IntentStatus.PERFORMED
    assert in_flight.receipt == ledger.get(idempotency_key=in_flight.idempotency_key).receipt
    assert (run.status, run.awaiting_person) == (RunStatus.CANCELLED, False)
    assert not Escalation.objects.filter(run=run).exists()


def test_cancelling_a_run_whose_call_is_already_unknown_hands_it_over_at_once(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    in_doubt = _record(run)
    _fault(sandbox_tools, provider="payments", operation="lookup", fault="unknown_lookup", remaining=1)
    _fault(sandbox_tools, provider="payments", operation="refund", fault="key_conflict", remaining=1)
    intent_reconcile(intent_id=in_doubt.pk, actor=SWEEPER)
    run.refresh_from_db()
    assert (run.status, run.awaiting_person) == (RunStatus.RUNNING, False)  # its agent may settle it

    cancelled = journal.run_cancel(run=run, reason="buyer withdrew", actor=journal.Actor.agent("bot"))
    again = journal.run_cancel(run=run, reason="twice", actor=journal.Actor.agent("bot"))

    assert (cancelled.run.status, cancelled.run.awaiting_person) == (RunStatus.CANCELLED, True)
    assert cancelled.cleanup_scheduled == [
        why(
            CleanupCode.PERSON_DECIDES,
            tool="issue_refund",
            step_id=in_doubt.step_id,
            key=in_doubt.idempotency_key,
        )
    ]
    assert again.cleanup_scheduled == cancelled.cleanup_scheduled
    assert Escalation.objects.filter(run=run, reason="unknown_outcome").count() == 1
    kinds = list(JournalEvent.objects.filter(run=run).order_by("id").values_list("kind", flat=True))
    assert kinds[-2:] == [JournalEvent.Kind.RUN_CANCELLED, JournalEvent.Kind.RUN_ESCALATED]


# --- causation: whose change the lookup saw ----------------------------------------------------

ADJUST = {"sku": "SKU-4471", "qty": 4, "reference": "T-41844"}


def test_a_change_the_customer_made_before_the_run_is_already_so_and_never_undone(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any, support_user: Any
) -> None:
    """Issue 18, failure 3: the customer booked the stock back themselves before the run; the
    runner died after its intent and before sending. The ERP's search by reference finds the
    customer's adjustment; it is not the run's, so it is settled already_so, the handover does not
    list it as done, and undoing the run leaves the customer's adjustment standing."""
    catalogue_seed_defaults()
    customers = requests.post(
        f"{sandbox_tools}/sandbox/api/erp/adjust_stock", json=ADJUST, timeout=5
    ).json()  # the customer, in the ERP's own screen, before the run
    run = make_run(plan=[{"tool": "adjust_stock", "args": ADJUST, "detail": "4 units back in stock"}])
    intent = _record(run, tool="adjust_stock", args=ADJUST)  # ... and the runner dies here

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert result.outcome == ReconcileOutcome.ALREADY_SO
    assert intent.status == IntentStatus.ALREADY_SO
    assert intent.receipt == {}  # the customer's record is evidence, not this call's receipt
    event = JournalEvent.objects.get(intent=intent, kind=JournalEvent.Kind.INTENT_RECONCILED)
    assert event.data["evidence"]["record"]["adjustment_id"] == customers["adjustment_id"]

    handover = handover_for(run)
    assert [c.step_id for c in handover.completed] == []
    assert [u.step_id for u in handover.uncertain] == []
    assert [a.step_id for a in handover.already_so] == [intent.step_id]
    assert handover.already_so[0].evidence_at is not None
    assert handover.already_so[0].evidence_at < intent.intended_at
    assert handover.next_action.compensations_available == []
    client = Client()
    client.force_login(support_user)
    page = client.get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert "Already so before the run" in page and "Nothing was done downstream." in page

    undone = run_compensate(run=run, actor=SWEEPER)

    assert undone.undone == [] and undone.failed == []
    erp = ledger.filter(provider="erp", operation="adjust_stock", business_ref=ADJUST["reference"])
    assert [e.request["qty"] for e in erp] == [4]  # the customer's adjustment stands, alone
    assert Intent.objects.get(pk=intent.pk).status == IntentStatus.ALREADY_SO
    assert check_recovered(run) == ()


def test_resuming_does_not_send_a_step_that_was_already_so(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    requests.post(f"{sandbox_tools}/sandbox/api/erp/adjust_stock", json=ADJUST, timeout=5)
    run = make_run(plan=[{"tool": "adjust_stock", "args": ADJUST}])
    intent = _record(run, tool="adjust_stock", args=ADJUST)
    assert intent_reconcile(intent_id=intent.pk, actor=SWEEPER).outcome == ReconcileOutcome.ALREADY_SO

    decision = run_resume(run=run, actor=SWEEPER)

    assert decision.outcome == DecisionOutcome.COMPLETED
    erp = ledger.filter(provider="erp", operation="adjust_stock", business_ref=ADJUST["reference"])
    assert erp.count() == 1  # the customer's, and no second one from the run
    assert Intent.objects.get(pk=intent.pk).status == IntentStatus.ALREADY_SO


def test_an_adjustment_the_run_made_after_its_intent_is_still_performed(
    sandbox_tools: str, make_run: Callable[..., Run]
) -> None:
    run = make_run()
    intent = _record(run, tool="adjust_stock", args=ADJUST)
    get_tool("adjust_stock").get_connector().perform(ADJUST, intent.idempotency_key)

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert result.outcome == ReconcileOutcome.PERFORMED
    assert intent.status == IntentStatus.PERFORMED
    assert intent.receipt["reference"] == ADJUST["reference"]


@dataclass(frozen=True)
class CarelessConnector:
    """Says Performed for anything, with evidence from an hour before the question."""

    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult:
        raise AssertionError("never sent in this test")

    def lookup(self, query: LookupQuery) -> LookupResult:
        return Performed(receipt={"refund_id": "re_old"}, evidence_at=query.intended_at - timedelta(hours=1))


def test_a_performed_answer_with_evidence_older_than_the_intent_is_settled_already_so(
    sandbox_tools: str, make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run()
    intent = _record(run)
    spec = get_tool("issue_refund")
    monkeypatch.setattr(type(spec), "get_connector", lambda self: CarelessConnector())

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert result.outcome == ReconcileOutcome.ALREADY_SO
    assert intent.status == IntentStatus.ALREADY_SO
    assert intent.receipt == {}
    assert intent.verdict["code"] == CallVerdict.FOUND_ALREADY_SO


def test_forced_staleness_leaves_a_slow_call_still_in_flight_alone_and_says_so(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    # Issue 18, failure 6: `reconcile --older-than 0` while a slow provider is still acting on a
    # call must not ask about it (a lookup could find nothing yet, and a resumption send it again).
    run = make_run()
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    _fault(sandbox_tools, provider="payments", operation="refund", fault="slow:3000", remaining=1)
    performed: list[Any] = []

    def agent_calls() -> None:
        try:
            performed.append(
                tool_services.tool_perform(
                    run=run, tool="issue_refund", args=REFUND, turn=1, actor=journal.Actor.agent("bot")
                )
            )
        finally:
            connection.close()

    call = threading.Thread(target=agent_calls)
    call.start()
    deadline = time.monotonic() + 10
    while not ledger.filter(request=REFUND).exists():  # the provider has it and is still busy
        assert time.monotonic() < deadline, "the sandbox never received the refund"
        time.sleep(0.05)
    intent = Intent.objects.get(run=run)

    out = io.StringIO()
    call_command("reconcile", older_than=0, stdout=out)

    intent.refresh_from_db()
    assert intent.status == IntentStatus.INTENDED
    assert not JournalEvent.objects.filter(intent=intent, kind=JournalEvent.Kind.INTENT_RECONCILED).exists()
    assert "held back 1 intent(s) whose call may still be in flight" in out.getvalue()
    assert "not asked about before" in out.getvalue()
    call.join(timeout=15)
    assert not call.is_alive() and len(performed) == 1
    intent.refresh_from_db()
    assert intent.status == IntentStatus.PERFORMED
    assert not JournalEvent.objects.filter(intent=intent, kind=JournalEvent.Kind.INTENT_RECONCILED).exists()
    # Sent once, recorded once: the sandbox's ledger holds one refund for the key.
    assert ledger.filter(idempotency_key=intent.idempotency_key).count() == 1
    assert ledger.filter(provider="payments", operation="refund").count() == 1
