"""compensations.services: every catalogue entry executed against the sandbox, with the world
checked afterwards (a cancel that answers success without cancelling fails here)."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from django.contrib.auth.models import Group
from django.test import override_settings

from compensations.models import Compensation, CompensationStatus, DeadLetter
from compensations.services import CompensationRetry, compensation_execute, compensation_request
from compensations.tasks import compensate_step
from journal import services as journal
from journal.models import Intent, Run, RunStatus
from sandbox.catalogue import catalogue_seed_defaults
from tests import factories
from tools import services as tools

pytestmark = pytest.mark.django_db(transaction=True)

EXECUTOR = journal.Actor.system("test-executor")
ORDER = "SU-90317"


@pytest.fixture(autouse=True)
def _catalogue() -> None:
    catalogue_seed_defaults()


@pytest.fixture
def team_lead(tenant: Any) -> Any:
    lead = factories.StaffUserFactory(username="lead", membership__tenant=tenant)
    lead.groups.add(Group.objects.get_or_create(name="team_lead")[0])
    return lead


def _perform(run: Run, tool: str, args: dict[str, Any], turn: int) -> Intent:
    return tools.tool_perform(run=run, tool=tool, args=args, turn=turn, actor=EXECUTOR).intent


def _undo(original: Intent) -> Compensation:
    return compensation_execute(
        compensation=compensation_request(original=original, actor=EXECUTOR), actor=EXECUTOR
    )


def _undo_effects(ledger: Any, original: Intent) -> list[Any]:
    return list(ledger.filter(undoes__idempotency_key=original.idempotency_key))


@pytest.mark.parametrize(
    ("tool", "args", "state_check"),
    [
        ("start_return", {"order_id": ORDER}, ("Return", "label", "label", "cancelled_at")),
        (
            "offer_replacement",
            {"order_id": ORDER, "sku": "OAK-BENCH", "qty": 1},
            ("Reservation", "reservation_id", "reservation_id", "released_at"),
        ),
        (
            "issue_refund",
            {"order_id": ORDER, "amount": "14.95", "currency": "USD"},
            ("Refund", "refund_id", "refund_id", "reversed_at"),
        ),
        (
            "issue_credit",
            {"order_id": ORDER, "amount": "412.00"},
            ("CreditMemo", "credit_memo_id", "credit_memo_id", "reversed_at"),
        ),
        (
            "reship",
            {"order_id": ORDER, "sku": "SKU-4471", "qty": 4},
            ("Shipment", "shipment_id", "shipment_id", "cancelled_at"),
        ),
    ],
)
def test_each_reversible_entry_really_undoes_its_effect(
    sandbox_tools: str,
    make_run: Any,
    ledger: Any,
    tool: str,
    args: dict[str, Any],
    state_check: tuple[str, str, str, str],
) -> None:
    import sandbox.models as world

    run = make_run()
    original = _perform(run, tool, args, 1)

    done = _undo(original)

    assert done.status == CompensationStatus.DONE, done.last_error
    assert done.intent is not None and done.intent.idempotency_key != original.idempotency_key
    assert len(_undo_effects(ledger, original)) == 1
    model, field, receipt_field, undone_at = state_check
    row = getattr(world, model).objects.get(**{field: original.receipt[receipt_field]})
    assert getattr(row, undone_at) is not None, f"{model} was not actually undone"


def test_the_erp_adjustment_is_undone_by_the_opposite_adjustment(sandbox_tools: str, make_run: Any) -> None:
    from sandbox.models import Effect

    run = make_run()
    original = _perform(run, "adjust_stock", {"sku": "SKU-4471", "qty": -4, "reference": "T-41844"}, 1)
    done = _undo(original)
    quantities = sorted(
        e.request["qty"] for e in Effect.objects.filter(provider="erp", operation="adjust_stock")
    )
    assert done.status == CompensationStatus.DONE, done.last_error
    assert quantities == [-4, 4]


def test_a_pickup_is_cancellable_until_collection_and_after_it_goes_to_a_person(
    sandbox_tools: str, make_run: Any, ledger: Any, team_lead: Any
) -> None:
    run = make_run()
    before = _perform(run, "start_return", {"order_id": ORDER}, 1)
    assert _undo(before).status == CompensationStatus.DONE

    after = _perform(run, "start_return", {"order_id": "SU-88410"}, 2)
    requests.post(
        f"{sandbox_tools}/sandbox/api/returns/collect", json={"label": after.receipt["label"]}, timeout=5
    )
    failed = _undo(after)

    assert failed.status == CompensationStatus.DEAD_LETTERED
    letter = DeadLetter.objects.get(compensation=failed)
    assert (letter.error_class, letter.owner) == ("conflict", team_lead)
    assert _undo_effects(ledger, after) == []
    run.refresh_from_db()
    assert (run.status, run.outcome_reason) == (RunStatus.ESCALATED, "compensation_failed")


def test_a_shipment_past_its_cutoff_is_recalled_at_a_cost_and_recorded_as_partial(
    sandbox_tools: str, make_run: Any, ledger: Any
) -> None:
    run = make_run()
    shipped = _perform(run, "reship", {"order_id": ORDER, "sku": "SKU-4471", "qty": 4}, 1)
    requests.post(
        f"{sandbox_tools}/sandbox/api/shipping/advance",
        json={"shipment_id": shipped.receipt["shipment_id"]},
        timeout=5,
    )

    done = _undo(shipped)

    # The catalogue's loss, then the fee in the carrier's receipt as the tool declares it
    # (sandbox/seam.py: cancel_shipment's loss_detail).
    assert (done.status, done.not_undone) == (
        CompensationStatus.PARTIAL,
        "recall fee after the cutoff: recalled at a fee of 7.50 GBP",
    )
    assert len(_undo_effects(ledger, shipped)) == 1


def test_email_cannot_be_undone_and_says_so(sandbox_tools: str, make_run: Any, ledger: Any) -> None:
    run = make_run()
    sent = _perform(run, "notify_seller", {"order_id": ORDER, "template": "return_started"}, 1)
    compensation = compensation_request(original=sent, actor=EXECUTOR)
    assert compensation.status == CompensationStatus.NOT_POSSIBLE
    assert compensation.not_undone
    assert compensation_request(original=sent, actor=EXECUTOR).pk == compensation.pk


def test_two_requests_and_two_executions_make_one_undo(
    sandbox_tools: str, make_run: Any, ledger: Any
) -> None:
    run = make_run()
    original = _perform(run, "issue_refund", {"order_id": ORDER, "amount": "14.95", "currency": "USD"}, 1)
    first = compensation_request(original=original, actor=EXECUTOR)
    second = compensation_request(original=original, actor=EXECUTOR)
    assert first.pk == second.pk
    compensation_execute(compensation=first, actor=EXECUTOR)
    Compensation.objects.filter(pk=first.pk).update(status=CompensationStatus.PENDING)  # a redelivery
    again = compensation_execute(compensation=first, actor=EXECUTOR)
    assert again.status == CompensationStatus.DONE
    assert len(_undo_effects(ledger, original)) == 1


@override_settings(SEAM_COMPENSATION_MAX_ATTEMPTS=2)
def test_transient_failures_are_retried_within_a_budget_then_dead_lettered(
    sandbox_tools: str, make_run: Any, ledger: Any, team_lead: Any
) -> None:
    run = make_run()
    original = _perform(run, "issue_credit", {"order_id": ORDER, "amount": "412.00"}, 1)
    rule = {"provider": "accounting", "operation": "reverse_credit", "fault": "fail_before", "remaining": 10}
    requests.post(f"{sandbox_tools}/sandbox/api/faults/", json=rule, timeout=5).raise_for_status()
    compensation = compensation_request(original=original, actor=EXECUTOR)

    with pytest.raises(CompensationRetry):
        compensation_execute(compensation=compensation, actor=EXECUTOR)
    final = compensation_execute(compensation=compensation, actor=EXECUTOR)

    assert final.status == CompensationStatus.DEAD_LETTERED
    assert DeadLetter.objects.get(compensation=final).attempts == 2
    assert _undo_effects(ledger, original) == []


def test_an_undo_that_cannot_be_built_is_dead_lettered_by_the_worker_without_sending(
    sandbox_tools: str, make_run: Any, ledger: Any, team_lead: Any
) -> None:
    run = make_run()
    original = _perform(run, "issue_refund", {"order_id": ORDER, "amount": "14.95", "currency": "USD"}, 1)
    # As a step a person marked performed: no receipt, so reverse_refund has no refund_id.
    Intent.objects.filter(pk=original.pk).update(receipt={})
    compensation = compensation_request(original=Intent.objects.get(pk=original.pk), actor=EXECUTOR)

    result = compensate_step.apply(args=(compensation.pk,))  # as the worker runs it

    assert result.successful(), result.traceback
    done = Compensation.objects.get(pk=compensation.pk)
    assert (done.status, done.attempts, done.intent_id) == (CompensationStatus.DEAD_LETTERED, 0, None)
    letter = DeadLetter.objects.get(compensation=done)
    assert letter.owner == team_lead and letter.error_class == "invalid_input"
    assert "refund_id" in letter.error
    run = Run.objects.get(pk=run.pk)
    assert run.awaiting_person and run.outcome_reason == "compensation_failed"
    assert _undo_effects(ledger, original) == []
    assert not ledger.filter(provider="payments", operation="reverse").exists()


def test_a_redelivered_compensation_whose_call_never_left_is_sent_with_its_own_key(
    make_run: Any, sandbox_tools: str, ledger: Any
) -> None:
    # The worker recorded the undo's intent and died before the call left; reconciliation then
    # proved it never happened. The redelivered task sends it (once), instead of dead-lettering.
    from compensations.mapping import compensation_args
    from compensations.models import CatalogueEntry
    from reconciliation.services import intent_reconcile

    run = make_run()
    refund = _perform(run, "issue_refund", {"order_id": ORDER, "amount": "14.95", "currency": "USD"}, 1)
    compensation = compensation_request(original=refund, actor=EXECUTOR)
    args = compensation_args(CatalogueEntry.objects.get(tool="issue_refund"), refund.args, refund.receipt)
    orphan = journal.intent_record(
        run=run, tool="reverse_refund", args=args, turn=2, actor=EXECUTOR, compensation=True
    ).intent
    assert intent_reconcile(intent_id=orphan.pk, actor=EXECUTOR).outcome == "not_performed"

    done = compensation_execute(compensation=compensation, actor=EXECUTOR)

    assert done.status == CompensationStatus.DONE
    assert [e.idempotency_key for e in _undo_effects(ledger, refund)] == [orphan.idempotency_key]
    assert not DeadLetter.objects.exists()


def test_a_compensation_that_loses_its_turn_to_another_takes_the_next(
    make_run: Any, sandbox_tools: str, ledger: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from compensations import services

    run = make_run()
    first = _perform(run, "issue_refund", {"order_id": ORDER, "amount": "14.95", "currency": "USD"}, 1)
    second = _perform(run, "issue_refund", {"order_id": ORDER, "amount": "2.50", "currency": "USD"}, 2)
    _undo(second)  # takes turn 3 with reverse_refund
    # The second compensation read "next turn: 3" before the first recorded its intent there.
    turns = iter([3, 4])
    monkeypatch.setattr(services, "_next_turn", lambda run: next(turns))

    done = _undo(first)

    assert done.status == CompensationStatus.DONE
    assert len(_undo_effects(ledger, first)) == 1 and len(_undo_effects(ledger, second)) == 1
    assert sorted(run.intents.filter(tool="reverse_refund").values_list("turn", flat=True)) == [3, 4]
