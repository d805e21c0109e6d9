"""handover.client: the REST client gives runtimes in other processes the same perform semantics."""

from __future__ import annotations

from typing import Any

import pytest

from handover.client import IntentInDoubt, SeamClient, SeamError
from journal.models import AgentToken, Intent, IntentStatus, Run, Tenant
from journal.tool_errors import DispatchResult, ToolError
from tests.factories import BENCH_PLAN, VERSIONS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def seam(live_server: Any, tenant: Tenant) -> SeamClient:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="returns-bot", digest=AgentToken.digest_of(secret))
    return SeamClient(live_server.url, secret, retries=1, backoff=0.01)


def test_perform_over_rest_commits_the_intent_before_dispatch_and_settles_it(seam: SeamClient) -> None:
    run = seam.create_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN, ticket_id="T-40912")
    seen: list[str] = []

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        seen.append(Intent.objects.get(idempotency_key=key).status)
        return DispatchResult(summary="label RL-7734", receipt={"label": "RL-7734"})

    done = seam.perform(run["id"], "start_return", {"order_id": "SU-90317"}, dispatch, turn=1)

    assert seen == ["intended"]
    assert done.replayed is False
    row = Intent.objects.get(run_id=run["id"])
    assert (row.status, row.receipt) == (IntentStatus.PERFORMED, {"label": "RL-7734"})


def test_perform_twice_replays_and_an_open_intent_is_not_resent(seam: SeamClient) -> None:
    run = seam.create_run(task_type="returns", versions=VERSIONS)
    calls: list[str] = []

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        calls.append(key)
        return DispatchResult(receipt={"refund_id": "re_1"})

    seam.perform(run["id"], "issue_refund", {"amount": "14.95"}, dispatch, turn=2)
    again = seam.perform(run["id"], "issue_refund", {"amount": "14.95"}, dispatch, turn=2)
    assert again.replayed and again.intent["receipt"] == {"refund_id": "re_1"}

    seam.record_intent(run["id"], "notify_seller", {"template": "x"}, turn=3)  # a runtime that died here
    with pytest.raises(IntentInDoubt):
        seam.perform(run["id"], "notify_seller", {"template": "x"}, dispatch, turn=3)
    assert len(calls) == 1


def test_a_tool_error_is_recorded_with_its_class(seam: SeamClient) -> None:
    run = seam.create_run(task_type="returns", versions=VERSIONS)

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        raise ToolError("conflict", "stale version", request_id="r-1")

    with pytest.raises(ToolError):
        seam.perform(run["id"], "issue_refund", {"amount": "14.95"}, dispatch, turn=1)
    row = Intent.objects.get(run_id=run["id"])
    assert (row.status, row.error_class, row.request_id) == ("failed", "conflict", "r-1")


def test_a_refused_request_raises_with_the_servers_reason(seam: SeamClient) -> None:
    with pytest.raises(SeamError) as refused:
        seam.create_run(task_type="returns", versions={"schema": "1"})
    assert refused.value.status == 400
    assert "versions" in refused.value.body
    assert not Run.objects.exists()
