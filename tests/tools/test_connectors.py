"""tools: registered tools go through the journal to the real sandbox, and every failure is
classified at the boundary into one of the six error classes."""

from __future__ import annotations

import dataclasses
import socket
from datetime import datetime, timedelta
from typing import Any

import pytest
import requests
from django.utils import timezone

from journal import services as journal
from journal.models import Intent, IntentStatus
from journal.tool_errors import ToolError
from tools import services as tools
from tools.connectors import (
    AlreadySo,
    HttpConnector,
    LookupQuery,
    NotPerformed,
    Performed,
    Unknown,
    caused_by_intent,
)
from tools.registry import get_tool

pytestmark = pytest.mark.django_db(transaction=True)

ORDER = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}


def test_a_registered_write_goes_through_the_journal_to_the_provider(
    sandbox_tools: str, make_run: Any, agent_actor: journal.Actor, ledger: Any
) -> None:
    run = make_run()
    done = tools.tool_perform(run=run, tool="issue_refund", args=ORDER, turn=1, actor=agent_actor)
    assert done.intent.status == IntentStatus.PERFORMED
    assert done.intent.receipt["refund_id"].startswith("re_")
    effect = ledger.get(idempotency_key=done.intent.idempotency_key)
    assert effect.receipt["refund_id"] == done.intent.receipt["refund_id"]


def test_bad_arguments_are_refused_before_any_intent(
    sandbox_tools: str, make_run: Any, agent_actor: journal.Actor, ledger: Any
) -> None:
    run = make_run()
    with pytest.raises(journal.InvalidInput) as refused:
        tools.tool_perform(
            run=run, tool="issue_refund", args={**ORDER, "amount": "14.9"}, turn=1, actor=agent_actor
        )
    assert refused.value.field == "args.amount"
    assert not Intent.objects.filter(run=run).exists()
    assert ledger.count() == 0


def test_the_same_arguments_are_refused_over_rest_naming_the_field(
    sandbox_tools: str, agent_client: Any, make_run: Any
) -> None:
    run = make_run()
    response = agent_client.post(
        f"/api/v1/runs/{run.pk}/intents/",
        {"tool": "issue_refund", "args": {"order_id": "SU-90317"}, "turn": 1},
        format="json",
    )
    assert response.status_code == 400
    assert "args" in response.json()
    assert not Intent.objects.filter(run=run).exists()


@pytest.mark.parametrize(
    ("fault", "error_class", "world_changed"),
    [("fail_before", "transient", False), ("drop_after", "ambiguous", True)],
)
def test_failures_are_classified_by_what_happened_on_the_wire(
    sandbox_tools: str, ledger: Any, fault: str, error_class: str, world_changed: bool
) -> None:
    connector = HttpConnector(
        base_url=sandbox_tools + "/sandbox/api/",
        path="payments/refund",
        headers={"X-Sandbox-Fault": fault},
        receipt_fields=("refund_id",),
    )
    with pytest.raises(ToolError) as failed:
        connector.perform(ORDER, "key-" + fault)
    assert failed.value.error_class == error_class
    assert ledger.filter(idempotency_key="key-" + fault).exists() is world_changed


def test_a_read_timeout_after_sending_is_ambiguous(sandbox_tools: str, ledger: Any) -> None:
    connector = HttpConnector(
        base_url=sandbox_tools + "/sandbox/api/",
        path="payments/refund",
        timeout=0.3,
        headers={"X-Sandbox-Fault": "slow:1500"},
        receipt_fields=("refund_id",),
    )
    with pytest.raises(ToolError) as failed:
        connector.perform(ORDER, "key-slow")
    assert failed.value.error_class == "ambiguous"


def test_nothing_listening_is_transient() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: the connection is refused
        connector = HttpConnector(base_url=f"http://127.0.0.1:{port}/", path="x", receipt_fields=())
        with pytest.raises(ToolError) as failed:
            connector.perform({}, "k")
    assert failed.value.error_class == "transient"


@pytest.mark.parametrize(
    ("args", "error_class"),
    [({"refund_id": "re_missing"}, "invalid_input")],
)
def test_provider_refusals_keep_their_class(
    sandbox_tools: str, args: dict[str, Any], error_class: str
) -> None:
    with pytest.raises(ToolError) as failed:
        get_tool("reverse_refund").get_connector().perform(args, "k-reverse-unknown")
    assert failed.value.error_class == error_class


def test_a_receipt_missing_its_fields_is_a_bug(sandbox_tools: str) -> None:
    connector = HttpConnector(
        base_url=sandbox_tools + "/sandbox/api/", path="payments/refund", receipt_fields=("no_such_field",)
    )
    with pytest.raises(ToolError) as failed:
        connector.perform(ORDER, "k-bug")
    assert failed.value.error_class == "bug"


def _query(key: str, args: dict[str, Any], *, intended_at: datetime | None = None) -> LookupQuery:
    return LookupQuery(tool="any", idempotency_key=key, args=args, intended_at=intended_at or timezone.now())


def test_lookup_says_performed_not_performed_or_unknown(
    sandbox_tools: str, make_run: Any, agent_actor: journal.Actor
) -> None:
    connector = get_tool("issue_refund").get_connector()
    asked_before = _query("k-lookup", ORDER)
    receipt = connector.perform(ORDER, "k-lookup").receipt
    # Found under our own key: Performed, with no time to hold against the intent's.
    assert connector.lookup(asked_before) == Performed(receipt=receipt)
    assert connector.lookup(_query("k-never-sent", ORDER)) == NotPerformed()
    requests.post(
        sandbox_tools + "/sandbox/api/faults/",
        json={"provider": "payments", "operation": "lookup", "fault": "unknown_lookup", "remaining": 1},
        timeout=5,
    )
    assert isinstance(connector.lookup(asked_before), Unknown)


def test_the_erp_is_reconciled_by_business_reference(sandbox_tools: str) -> None:
    connector = get_tool("adjust_stock").get_connector()
    args = {"sku": "SKU-4471", "qty": -4, "reference": "T-41844"}
    intended = _query("ignored", args)
    assert connector.lookup(intended) == NotPerformed()
    connector.perform(args, "ignored-by-the-erp")
    found = connector.lookup(intended)
    assert isinstance(found, Performed)
    assert found.evidence_at is not None and found.evidence_at >= intended.intended_at
    connector.perform(args, "ignored-by-the-erp")  # the ERP performs it again: it ignores keys
    assert isinstance(connector.lookup(intended), Unknown)


def test_an_erp_record_older_than_the_intent_is_already_so(sandbox_tools: str) -> None:
    connector = get_tool("adjust_stock").get_connector()
    args = {"sku": "SKU-4471", "qty": 2, "reference": "T-50001"}
    theirs = connector.perform(args, "someone-else").receipt
    later = _query("ours", args)

    found = connector.lookup(later)

    assert isinstance(found, AlreadySo)
    assert found.receipt["adjustment_id"] == theirs["adjustment_id"]
    assert found.evidence_at is not None and found.evidence_at < later.intended_at
    # One record before the intent and one after: the one after is this call's.
    connector.perform(args, "ours")
    assert isinstance(connector.lookup(later), Performed)


def test_an_erp_record_within_the_clock_skew_before_the_intent_cannot_be_told_apart(
    sandbox_tools: str,
) -> None:
    connector = dataclasses.replace(get_tool("adjust_stock").get_connector(), clock_skew=30.0)
    args = {"sku": "SKU-4471", "qty": 5, "reference": "T-50002"}
    connector.perform(args, "someone-else")

    assert isinstance(connector.lookup(_query("ours", args)), Unknown)
    later = _query("ours", args, intended_at=timezone.now() + timedelta(minutes=5))
    assert isinstance(connector.lookup(later), AlreadySo)


def test_the_engine_turns_a_performed_with_older_evidence_into_already_so() -> None:
    query = _query("k", ORDER)
    old = Performed(receipt={"refund_id": "re_1"}, evidence_at=query.intended_at - timedelta(seconds=1))
    new = Performed(receipt={"refund_id": "re_1"}, evidence_at=query.intended_at)
    undated = Performed(receipt={"refund_id": "re_1"})

    assert caused_by_intent(old, query) == AlreadySo(
        evidence_at=old.evidence_at, detail=caused_by_intent(old, query).detail, receipt=old.receipt
    )
    assert caused_by_intent(new, query) is new
    assert caused_by_intent(undated, query) is undated
    assert caused_by_intent(NotPerformed(), query) == NotPerformed()


def test_reads_record_no_intent(sandbox_tools: str, make_run: Any) -> None:
    make_run()
    status = tools.tool_read(tool="order_status", args={"order_id": "SU-90317"})
    assert status["order_id"] == "SU-90317"
    assert not Intent.objects.exists()
