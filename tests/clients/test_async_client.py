"""seam_client.AsyncSeamClient against the same live Seam: the same paths as the sync client's
tests, as coroutines (each test drives one event loop with asyncio.run and reads the database
outside it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from django.utils import timezone
from seam_client import (
    AsyncRun,
    AsyncSeamClient,
    ErrorClass,
    IntentInDoubt,
    Outcome,
    SeamRefused,
    SeamUnavailable,
    ToolError,
)

from journal.models import CustomerMessage, Intent, IntentStatus, JournalEvent, RunStatus
from journal.models import Run as RunRow
from tests.factories import BENCH_PLAN, VERSIONS

from .transports import AsyncBreakingTransport, Breaks, posts_to

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
T = TypeVar("T")


@pytest.fixture
def run_async(seam_server: str, agent_token: str) -> Callable[..., Any]:
    """run_async(scenario, plan=None): asyncio.run(scenario(client)) with a fresh AsyncSeamClient,
    its transport breaking what `plan` says."""

    def run(scenario: Callable[[AsyncSeamClient], Awaitable[T]], plan: Breaks | None = None) -> T:
        async def main() -> T:
            transport = AsyncBreakingTransport(plan) if plan else None
            async with AsyncSeamClient(
                seam_server, agent_token, retries=3, backoff=0.01, transport=transport
            ) as client:
                return await scenario(client)

        return asyncio.run(main())

    return run


async def start(client: AsyncSeamClient, **fields: Any) -> AsyncRun:
    return await client.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN, **fields)


class AsyncTool:
    """An async downstream call that counts its calls and reads, through the API, the status of
    its own intent at the moment it is called."""

    def __init__(self, run: AsyncRun, fails: ToolError | None = None) -> None:
        self.run = run
        self.fails = fails
        self.keys: list[str] = []
        self.statuses_seen: list[str] = []

    async def __call__(self, args: dict[str, Any], key: str) -> Outcome:
        self.keys.append(key)
        intents = (await self.run.fetch())["intents"]
        self.statuses_seen += [i["status"] for i in intents if i["idempotency_key"] == key]
        if self.fails:
            raise self.fails
        await asyncio.sleep(0)
        return Outcome(summary="refunded", receipt={"refund_id": "re_1"}, request_id="req-1")


def test_async_start_run_and_intents_keep_the_key_rules(run_async: Callable[..., Any]) -> None:
    async def scenario(client: AsyncSeamClient) -> tuple[AsyncRun, AsyncRun, Any, Any, SeamRefused]:
        first = await start(client, external_id="ext-async")
        again = await start(client, external_id="ext-async")
        intent = await first.record_intent("issue_refund", REFUND, turn=3)
        same = await first.record_intent("issue_refund", REFUND, turn=3)
        with pytest.raises(SeamRefused) as refused:
            await first.record_intent("issue_refund", {**REFUND, "amount": "1.00"}, turn=3)
        return first, again, intent, same, refused.value

    first, again, intent, same, refused = run_async(scenario)

    assert (first.created, again.created, first.id) == (True, False, again.id)
    assert (intent.replayed, same.replayed, same.step_id) == (False, True, intent.step_id)
    assert refused.status == 409 and refused.error_class is ErrorClass.CONFLICT
    assert RunRow.objects.count() == 1 and Intent.objects.count() == 1


def test_async_perform_commits_first_replays_settled_and_never_resends_open(
    run_async: Callable[..., Any],
) -> None:
    async def scenario(client: AsyncSeamClient) -> tuple[AsyncTool, Any, Any, IntentInDoubt]:
        run = await start(client)
        tool = AsyncTool(run)
        done = await run.perform("issue_refund", REFUND, tool, turn=3)
        again = await run.perform("issue_refund", REFUND, tool, turn=3)
        await run.record_intent("notify_seller", {"template": "x"}, turn=4)  # a runtime died here
        with pytest.raises(IntentInDoubt) as doubt:
            await run.perform("notify_seller", {"template": "x"}, tool, turn=4)
        return tool, done, again, doubt.value

    tool, done, again, doubt = run_async(scenario)

    assert tool.statuses_seen == ["intended"] and len(tool.keys) == 1
    assert (done.status, done.replayed, again.replayed) == ("performed", False, True)
    assert doubt.own_retry is False and doubt.intent.tool == "notify_seller"
    performed, open_one = Intent.objects.order_by("turn")
    assert (performed.status, performed.receipt) == (IntentStatus.PERFORMED, {"refund_id": "re_1"})
    assert open_one.status == IntentStatus.INTENDED


def test_async_call_id_is_recorded_and_kept_out_of_the_receipt(run_async: Callable[..., Any]) -> None:
    async def scenario(client: AsyncSeamClient) -> tuple[Any, Any]:
        run = await start(client)
        done = await run.perform("issue_refund", REFUND, AsyncTool(run), turn=3, call_id="call_7Qx")
        again = await client.run(run.id).perform("issue_refund", REFUND, AsyncTool(run), turn=3)
        return done, again

    done, again = run_async(scenario)

    assert Intent.objects.get().receipt == {"refund_id": "re_1", "_call_id": "call_7Qx"}
    assert (done.receipt, done.call_id) == ({"refund_id": "re_1"}, "call_7Qx")
    assert (again.replayed, again.receipt, again.call_id) == (True, {"refund_id": "re_1"}, "call_7Qx")


def test_async_tool_errors_are_recorded_with_their_class(run_async: Callable[..., Any]) -> None:
    def refuse(args: dict[str, Any], key: str) -> Outcome:  # a plain function is accepted too
        raise ToolError("invalid_input", "amount above the order total")

    async def scenario(client: AsyncSeamClient) -> None:
        run = await start(client)
        with pytest.raises(ToolError):
            await run.perform("issue_refund", REFUND, refuse, turn=3)

    run_async(scenario)
    row = Intent.objects.get()
    assert (row.status, row.error_class) == (IntentStatus.FAILED, "invalid_input")


def test_async_an_ambiguous_error_is_kept_as_evidence(run_async: Callable[..., Any]) -> None:
    async def timed_out(args: dict[str, Any], key: str) -> Outcome:
        raise TimeoutError("the provider did not answer in 30 s")

    async def scenario(client: AsyncSeamClient) -> None:
        run = await start(client)
        with pytest.raises(TimeoutError):
            await run.perform("issue_refund", REFUND, timed_out, turn=3)

    run_async(scenario)
    row = Intent.objects.get()
    assert (row.status, row.error_class, row.outcome_summary) == (
        IntentStatus.INTENDED,
        "ambiguous",
        "TimeoutError: the provider did not answer in 30 s",
    )


def test_async_lost_answers_never_become_a_second_effect(run_async: Callable[..., Any]) -> None:
    intents_lost = Breaks(when=posts_to("/intents/"), times=1)
    outcomes_lost = Breaks(when=posts_to("/outcome/"), times=1)
    calls: list[str] = []

    async def refund(args: dict[str, Any], key: str) -> Outcome:
        calls.append(key)
        return Outcome(receipt={"refund_id": "re_1"})

    async def lost_intent(client: AsyncSeamClient) -> IntentInDoubt:
        run = await start(client, external_id="lost-intent")
        with pytest.raises(IntentInDoubt) as doubt:
            await run.perform("issue_refund", REFUND, refund, turn=3)
        return doubt.value

    async def lost_outcome(client: AsyncSeamClient) -> tuple[Any, Any]:
        run = await start(client, external_id="lost-outcome")
        done = await run.perform("issue_refund", REFUND, refund, turn=3)
        return done, await run.perform("issue_refund", REFUND, refund, turn=3)

    doubt = run_async(lost_intent, intents_lost)
    done, again = run_async(lost_outcome, outcomes_lost)

    assert doubt.own_retry is True and len(intents_lost.broken) == 1
    assert len(outcomes_lost.broken) == 1 and done.status == "performed" and again.replayed
    assert len(calls) == 1  # the lost intent was never called; the lost outcome's call once
    by_run = {i.run.external_id: i for i in Intent.objects.select_related("run")}
    assert by_run["lost-intent"].status == IntentStatus.INTENDED
    assert by_run["lost-outcome"].status == IntentStatus.PERFORMED
    assert JournalEvent.objects.filter(intent=by_run["lost-outcome"], kind="outcome_recorded").count() == 1


def test_async_customer_messages_and_a_lost_answer_is_not_resent(run_async: Callable[..., Any]) -> None:
    lost = Breaks(when=posts_to("/customer-messages/"), times=1)

    async def scenario(client: AsyncSeamClient) -> tuple[dict[str, Any], SeamUnavailable]:
        run = await start(client)
        with pytest.raises(SeamUnavailable) as unavailable:
            await run.tell_customer("sms", "Refund started.")
        label = await run.record_intent("start_return", {"order_id": "SU-90317"}, turn=1)
        await run.record_outcome(label.step_id, ok=True, receipt={"label": "RL-1"})
        told = await run.tell_customer("email", "Label attached.", about_steps=[label.step_id])
        return told, unavailable.value

    told, unavailable = run_async(scenario, lost)

    assert unavailable.maybe_applied is True
    assert list(CustomerMessage.objects.order_by("id").values_list("channel", "body")) == [
        ("sms", "Refund started."),
        ("email", "Label attached."),
    ]
    assert told["about_steps"] == [Intent.objects.get().step_id]


def test_async_heartbeat_task_is_seen_by_the_server(run_async: Callable[..., Any]) -> None:
    long_ago = timezone.now() - timedelta(hours=1)
    seen: list[Any] = []

    async def scenario(client: AsyncSeamClient) -> int:
        run = await start(client)
        await asyncio.to_thread(lambda: RunRow.objects.filter(pk=run.id).update(last_heartbeat_at=long_ago))
        async with run.heartbeat(every=0.2) as beating:
            deadline = time.monotonic() + 10
            while beating.beats < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # the agent's own work, yielding to the heartbeat task
            seen.append((await run.fetch())["last_heartbeat_at"])
        return beating.beats

    beats = run_async(scenario)

    assert beats >= 3
    row = RunRow.objects.get()
    assert row.last_heartbeat_at > long_ago + timedelta(minutes=59)
    assert seen and seen[0] is not None


def test_async_counters_complete_cancel_and_handover(run_async: Callable[..., Any]) -> None:
    async def scenario(client: AsyncSeamClient) -> dict[str, Any]:
        done = await start(client, ticket_id="T-1")
        await done.count("repair")
        counted = await done.count("replan")
        label = await done.perform(
            "start_return", {"order_id": "SU-90317"}, lambda a, k: Outcome(receipt={"label": "RL-1"}), turn=1
        )
        completed = await done.complete()

        stopped = await start(client, ticket_id="T-2")
        refund = await stopped.record_intent("issue_refund", REFUND, turn=3)
        with pytest.raises(SeamRefused) as refused:
            await stopped.complete()
        cancelled = await stopped.cancel("the customer withdrew")
        handover = await stopped.handover()
        return {
            "counted": counted,
            "completed": completed,
            "label": label,
            "refused": refused.value,
            "cancelled": cancelled,
            "handover": handover,
            "refund": refund,
        }

    got = run_async(scenario)

    assert (got["counted"]["repairs"], got["counted"]["replans"]) == (1, 1)
    assert got["completed"]["status"] == "completed" and got["refused"].status == 409
    assert got["cancelled"]["run"]["status"] == "cancelled"
    assert [i["step_id"] for i in got["cancelled"]["uncertain"]] == [got["refund"].step_id]
    handover = got["handover"]
    assert handover.status == "cancelled"
    assert [s["idempotency_key"] for s in handover.uncertain] == [got["refund"].idempotency_key]
    assert handover.next_action_code == "settle_uncertain"
    statuses = dict(RunRow.objects.values_list("ticket_id", "status"))
    assert statuses == {"T-1": RunStatus.COMPLETED, "T-2": RunStatus.CANCELLED}
