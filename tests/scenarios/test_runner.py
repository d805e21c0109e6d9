"""scenarios.runner's REST journal: the kill harness's runtime in another process goes through
seam_client, and a connector's results and errors reach the journal as they do in process."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import seam_client
from django.utils import timezone

from journal.keys import step_id_of
from journal.models import AgentToken, CustomerMessage, Intent, IntentStatus, Run, RunStatus, Tenant
from journal.tool_errors import DispatchResult, ToolError
from scenarios.registry import get_flow, get_ticket
from scenarios.runner import RestJournal

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = "stub_refund"  # no connector: the journal records an unregistered tool as it is asked
REFUND = {"amount": "14.95"}


@pytest.fixture
def rest(live_server: Any, tenant: Tenant) -> RestJournal:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="rest-runtime", digest=AgentToken.digest_of(secret))
    return RestJournal(live_server.url, secret)


@pytest.fixture
def run_id(rest: RestJournal) -> str:
    ticket = get_ticket("T-40912")
    flow = get_flow(ticket.task_type)
    return rest.start(flow=flow, ticket=ticket, facts=dict(ticket.facts), external_id="rest-journal-1")


def test_a_connectors_result_is_the_outcome_of_the_step_the_in_process_journal_names(
    rest: RestJournal, run_id: str
) -> None:
    statuses_seen: list[str] = []

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        statuses_seen.append(Intent.objects.get(idempotency_key=key).status)
        return DispatchResult(summary="refund re_1", receipt={"refund_id": "re_1"}, request_id="req-1")

    done = rest.perform(run_id, TOOL, REFUND, dispatch, 3)
    again = rest.perform(run_id, TOOL, REFUND, dispatch, 3)
    rest.tell(run_id, "Your $14.95 fee is refunded.", [done["step_id"]])
    rest.complete(run_id)

    assert statuses_seen == ["intended"]  # committed before the call; the replay made no call
    expected = {
        "status": "performed",
        "receipt": {"refund_id": "re_1"},
        "step_id": step_id_of(run_id, 3, TOOL, 0),
    }
    assert done == again == expected
    row = Intent.objects.get(run_id=run_id)
    assert (row.status, row.receipt, row.request_id, row.outcome_summary) == (
        IntentStatus.PERFORMED,
        {"refund_id": "re_1"},
        "req-1",
        "refund re_1",
    )
    message = CustomerMessage.objects.get(run_id=run_id)
    assert (message.channel, message.about_steps) == ("chat", [done["step_id"]])
    assert Run.objects.get(pk=run_id).status == RunStatus.COMPLETED


def test_a_connectors_tool_error_is_recorded_with_its_class(rest: RestJournal, run_id: str) -> None:
    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        raise ToolError("conflict", "stale version", request_id="r-1")

    with pytest.raises(seam_client.ToolError) as raised:
        rest.perform(run_id, TOOL, REFUND, dispatch, 3)

    assert isinstance(raised.value.__cause__, ToolError)
    row = Intent.objects.get(run_id=run_id)
    assert (row.status, row.error_class, row.request_id) == (IntentStatus.FAILED, "conflict", "r-1")


def test_evidence_older_than_the_intent_settles_it_already_so(rest: RestJournal, run_id: str) -> None:
    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        return DispatchResult(summary="was so", evidence_at=timezone.now() - timedelta(days=1))

    done = rest.perform(run_id, TOOL, REFUND, dispatch, 3)

    assert done["status"] == IntentStatus.ALREADY_SO
    assert Intent.objects.get(run_id=run_id).status == IntentStatus.ALREADY_SO
