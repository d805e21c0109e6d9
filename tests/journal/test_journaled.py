"""journal.journaled: a plain tool function, decorated, is journaled without being rewritten."""

from __future__ import annotations

from typing import Any

import pytest

from journal.journaled import NoRunScope, journaled_tool, run_scope
from journal.models import Intent, IntentStatus
from journal.services import Actor
from journal.tool_errors import ToolError

pytestmark = pytest.mark.django_db(transaction=True)

refunds_sent: list[tuple[str, str]] = []


@journaled_tool("issue_refund")
def issue_refund(
    order_id: str, amount: str, currency: str = "USD", *, idempotency_key: str
) -> dict[str, Any]:
    refunds_sent.append((order_id, idempotency_key))
    return {"refund_id": f"re_{len(refunds_sent)}", "amount": amount, "currency": currency}


@journaled_tool("notify_seller")
def notify_seller(order_id: str) -> str:
    if order_id == "bad":
        raise ToolError("invalid_input", "unknown order")
    return "queued"


@pytest.fixture(autouse=True)
def _reset() -> None:
    refunds_sent.clear()


def test_decorated_tool_records_intent_and_outcome_with_the_key_it_was_given(make_run: Any) -> None:
    run = make_run()
    with run_scope(run, actor=Actor.agent("returns-bot")):
        result = issue_refund("SU-90317", amount="14.95")
    row = Intent.objects.get(run=run)
    assert result == {"refund_id": "re_1", "amount": "14.95", "currency": "USD"}
    assert row.status == IntentStatus.PERFORMED
    assert row.args == {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
    assert refunds_sent == [("SU-90317", row.idempotency_key)]
    assert row.receipt["refund_id"] == "re_1"


def test_replaying_the_same_calls_after_a_restart_sends_nothing_twice(make_run: Any) -> None:
    run = make_run()
    with run_scope(run, actor=Actor.agent("returns-bot")):
        issue_refund("SU-90317", amount="14.95")
        notify_seller("SU-90317")
    # A new process takes the run over and replays the flow from the start.
    with run_scope(run, actor=Actor.agent("returns-bot-2")):
        again = issue_refund("SU-90317", amount="14.95")
        told = notify_seller("SU-90317")
    assert len(refunds_sent) == 1
    assert again["refund_id"] == "re_1"
    assert told == "queued"
    assert Intent.objects.filter(run=run).count() == 2


def test_classified_failure_is_recorded_and_raised(make_run: Any) -> None:
    run = make_run()
    with run_scope(run, actor=Actor.agent("returns-bot")), pytest.raises(ToolError):
        notify_seller("bad")
    row = Intent.objects.get(run=run)
    assert (row.status, row.error_class) == ("failed", "invalid_input")


def test_calling_outside_a_run_scope_is_refused_before_anything_happens(make_run: Any) -> None:
    with pytest.raises(NoRunScope):
        issue_refund("SU-90317", amount="14.95")
    assert refunds_sent == []
    assert not Intent.objects.exists()
