"""The taxonomy's refusals (journal.attempts) as seam-client raises them: a SeamRefused with the
refusal's typed `code` (and `retry_after` for a retry that came too soon), which the runtime acts
on, and the tool never called; a retry that came too soon waited out (with jitter, bounded) and
sent again; and each adapter (LangGraph, the OpenAI Agents SDK, Pydantic AI, the MCP proxy)
handing the code to the agent's runtime as a value, never only as a sentence."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from agents import Agent as OpenAIAgent
from agents import Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel as OpenAIScriptedModel
from agents.testing import assistant_message, function_call
from langchain.agents import create_agent
from langchain_core.tools import ToolException, tool
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import FunctionToolset, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from seam_client import AsyncSeamClient, ErrorClass, Outcome, Run, SeamClient, SeamRefused, ToolError
from seam_client._common import TooSoon
from seam_client.adapters.langchain import journaled_tools as langchain_tools
from seam_client.adapters.openai_agents import journaled_tools as openai_tools
from seam_client.adapters.pydantic_ai import journaled_toolset
from seam_client.mcp_proxy.journal import REFUSAL_META

from journal.models import Intent, IntentStatus, JournalEvent, Tenant
from journal.models import Run as RunRow
from tests.clients.langgraph_agent import ScriptedModel as LangGraphScriptedModel
from tests.clients.langgraph_agent import script
from tests.clients.mcp_support import Desk, desk_registered, mcp_client, proxy_parameters
from tests.clients.mcp_support import agent_token as new_token
from tests.factories import BENCH_PLAN, VERSIONS

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"order_id": "SO-1", "amount": "9.99"}
# The server runs with the default budgets (config/settings/base.py SEAM_ERROR_BUDGETS): two
# repairs per tool, three retries per call, a second between retries.
SPACING = 1.05


class Refunds:
    """A tool that fails as told, counting its calls."""

    def __init__(self, *failures: ErrorClass) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self, args: dict[str, Any], key: str) -> Outcome:
        self.calls += 1
        if self.failures:
            raise ToolError(self.failures.pop(0), "refused")
        return Outcome(summary="refunded", receipt={"refund_id": "re_1"})


def _attempt(run: Run, tool: Refunds, turn: int, args: dict[str, Any] = REFUND) -> None:
    with pytest.raises(ToolError):
        run.perform("issue_refund", args, tool, turn=turn)
    time.sleep(SPACING)  # past the retry spacing, so only the budget can refuse the next


@pytest.mark.parametrize(
    ("failures", "repeat", "code"),
    [
        ([ErrorClass.PERMANENT], [REFUND], "permanent_repeated"),
        ([ErrorClass.INVALID_INPUT], [REFUND], "invalid_input_repeated"),
        # the call and two repairs fail; a third repair is refused
        (
            [ErrorClass.INVALID_INPUT] * 3,
            [{**REFUND, "amount": f"{n}.00"} for n in (1, 2, 3)],
            "repairs_spent",
        ),
        # the call and three retries fail; a fourth retry is refused
        ([ErrorClass.TRANSIENT] * 4, [REFUND] * 4, "retries_spent"),
    ],
    ids=["permanent", "invalid-input", "repairs", "retries"],
)
def test_each_refusal_reaches_the_client_as_its_code(
    seam: SeamClient, failures: list[ErrorClass], repeat: list[dict[str, Any]], code: str
) -> None:
    # One handle, as an agent's: the same call at a new turn is its next occurrence, a new intent.
    run = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN)
    tool = Refunds(*failures)
    _attempt(run, tool, 1)
    for turn, args in enumerate(repeat[:-1], start=2):
        _attempt(run, tool, turn, args)

    with pytest.raises(SeamRefused) as refused:
        run.perform("issue_refund", repeat[-1], tool, turn=len(repeat) + 1)

    assert (refused.value.status, refused.value.code) == (409, code)
    assert tool.calls == len(failures)  # the refused call never reached the tool
    assert Intent.objects.filter(run_id=run.id).count() == len(failures)


def test_a_retry_too_soon_says_when_to_come_back(seam_server: str, agent_token: str) -> None:
    # A runtime that paces its retries itself: the client waits out no refusal.
    with SeamClient(seam_server, agent_token, too_soon_wait=0) as seam:
        run = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN)
        tool = Refunds(ErrorClass.TRANSIENT)
        with pytest.raises(ToolError):
            run.perform("issue_refund", REFUND, tool, turn=1)
        with pytest.raises(SeamRefused) as refused:
            run.perform("issue_refund", REFUND, tool, turn=2)

    assert refused.value.code == "retry_too_soon"
    assert refused.value.retry_after is not None and 0 < refused.value.retry_after <= 1.0
    assert tool.calls == 1


def test_the_client_waits_out_a_retry_too_soon_and_then_sends_the_retry(seam: SeamClient) -> None:
    run = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN)
    tool = Refunds(ErrorClass.TRANSIENT)
    with pytest.raises(ToolError):
        run.perform("issue_refund", REFUND, tool, turn=1)
    failed_at = time.monotonic()

    retried = run.perform("issue_refund", REFUND, tool, turn=2)

    waited = time.monotonic() - failed_at
    assert retried.status == "performed" and tool.calls == 2
    assert 0.9 <= waited < 5.0  # the default spacing (1 s), and jitter, not the whole bound
    # One refusal waited out, then the same request admitted: no second refusal, no other intent.
    refusals = JournalEvent.objects.filter(run_id=run.id, kind=JournalEvent.Kind.ATTEMPT_REFUSED)
    assert [e.data["code"] for e in refusals] == ["retry_too_soon"]
    assert Intent.objects.filter(run_id=run.id).count() == 2


def _too_soon(retry_after: float) -> SeamRefused:
    body = {"tool": ["retried too soon"], "code": "retry_too_soon", "retry_after": retry_after}
    return SeamRefused("409", status=409, body=body)


def test_the_wait_is_jittered_and_bounded_in_tries_and_seconds() -> None:
    firsts = [TooSoon(30.0).delay(_too_soon(1.0)) for _ in range(20)]
    assert all(d is not None and 1.0 <= d <= 1.3 for d in firsts)
    assert len(set(firsts)) > 1  # jittered: agents refused together come back apart

    by_tries = TooSoon(30.0)
    assert [by_tries.delay(_too_soon(0.1)) is not None for _ in range(4)] == [True, True, True, False]
    by_seconds = TooSoon(1.9)
    assert [by_seconds.delay(_too_soon(1.0)) is not None for _ in range(2)] == [True, False]
    # Any other refusal is the runtime's to act on, at once.
    other = SeamRefused("409", status=409, body={"tool": ["no"], "code": "permanent_repeated"})
    assert TooSoon(30.0).delay(other) is None


# --- each adapter hands the refusal's code to the agent's runtime --------------------------------

FORBIDDEN = "403: refunds of this order are not allowed"
PERMANENT_REPEATED = "permanent_repeated"


def _refusal_of(run_id: str) -> list[tuple[int, str, str]]:
    """The run's calls: the first failed for good, and nothing recorded of the repeat."""
    return [(i.turn, i.status, i.error_class) for i in Intent.objects.filter(run_id=run_id).order_by("turn")]


def test_langgraph_raises_the_refusal_with_its_code_out_of_invoke(seam: SeamClient) -> None:
    calls: list[str] = []

    @tool
    def issue_refund(order_id: str, amount: str) -> str:
        """Refund an order."""
        calls.append(order_id)
        raise ToolException(FORBIDDEN)

    issue_refund.handle_tool_error = True  # the model is told, and asks for the same call again
    run = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN)
    model = LangGraphScriptedModel(messages=iter(script([("issue_refund", REFUND)] * 2)))
    agent = create_agent(
        model, langchain_tools([issue_refund], run, errors_mean_not_performed={"issue_refund"})
    )

    with pytest.raises(SeamRefused) as refused:
        agent.invoke({"messages": [("user", "Refund SO-1.")]})

    assert (refused.value.status, refused.value.code) == (409, PERMANENT_REPEATED)
    assert calls == ["SO-1"]
    assert _refusal_of(run.id) == [(1, IntentStatus.FAILED, "permanent")]


def test_the_openai_agents_sdk_raises_the_refusal_with_its_code_out_of_runner_run(
    seam_server: str, agent_token: str
) -> None:
    set_tracing_disabled(True)
    calls: list[str] = []

    @function_tool
    def issue_refund(order_id: str, amount: str) -> str:
        """Refund an order."""
        calls.append(order_id)
        raise PermissionError(FORBIDDEN)

    model = OpenAIScriptedModel(
        [
            [function_call("issue_refund", REFUND, call_id="call-0")],
            [function_call("issue_refund", REFUND, call_id="call-1")],
            [assistant_message("Done.")],
        ]
    )
    started: list[str] = []

    async def agent_run() -> None:
        async with AsyncSeamClient(seam_server, agent_token) as seam:
            run = await seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN)
            started.append(run.id)
            tools = openai_tools([issue_refund], run, errors_mean_not_performed={"issue_refund"})
            await Runner.run(OpenAIAgent(name="desk", tools=tools, model=model), "Refund SO-1.")

    with pytest.raises(SeamRefused) as refused:
        asyncio.run(agent_run())

    assert (refused.value.status, refused.value.code) == (409, PERMANENT_REPEATED)
    assert calls == ["SO-1"]
    assert _refusal_of(started[0]) == [(1, IntentStatus.FAILED, "permanent")]


def test_pydantic_ai_raises_the_refusal_with_its_code_out_of_agent_run(
    seam_server: str, agent_token: str
) -> None:
    calls: list[str] = []

    def issue_refund(order_id: str, amount: str) -> str:
        """Refund an order."""
        calls.append(order_id)
        raise ModelRetry(FORBIDDEN)  # the model is told, and asks for the same call again

    replies = [
        ModelResponse(parts=[ToolCallPart("issue_refund", REFUND, tool_call_id=f"call-{n}")])
        for n in range(2)
    ] + [ModelResponse(parts=[TextPart("Done.")])]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return replies.pop(0)

    started: list[str] = []

    async def agent_run() -> None:
        async with AsyncSeamClient(seam_server, agent_token) as seam:
            run = await seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN)
            started.append(run.id)
            tools = journaled_toolset(
                FunctionToolset([issue_refund]), run, errors_mean_not_performed={"issue_refund"}
            )
            await PydanticAgent(FunctionModel(model), toolsets=[tools]).run("Refund SO-1.")

    with pytest.raises(SeamRefused) as refused:
        asyncio.run(agent_run())

    assert (refused.value.status, refused.value.code) == (409, PERMANENT_REPEATED)
    assert calls == ["SO-1"]
    assert _refusal_of(started[0]) == [(1, IntentStatus.FAILED, "permanent")]


def test_the_mcp_proxy_answers_a_refused_call_with_its_code_in_meta(
    tmp_path: Path, live_server: Any, tenant: Tenant
) -> None:
    token = new_token(tenant)
    credit = {"account": "A-1", "amount": "5.00"}

    async def session(desk: Desk) -> list[types.CallToolResult]:
        async with mcp_client(proxy_parameters(live_server.url, token, desk)) as client:
            await client.call_tool("close_account", {"account": "A-1", "reason": "asked"})
            # A closed account refuses the credit (a declared refusal: failed for good), and
            # Seam refuses the same credit again, which is not sent.
            return [await client.call_tool("credit_account", credit) for _ in range(2)]

    with desk_registered(tmp_path) as desk:
        failed, repeated = anyio.run(session, desk)

    assert failed.is_error and REFUSAL_META not in (failed.meta or {})
    assert repeated.is_error and (repeated.meta or {})[REFUSAL_META] == PERMANENT_REPEATED
    run = RunRow.objects.get(tenant=tenant, task_type="desk_session")
    assert [(i.tool, i.status, i.error_class) for i in run.intents.order_by("turn")] == [
        ("close_account", IntentStatus.PERFORMED, ""),
        ("credit_account", IntentStatus.FAILED, "permanent"),
    ]
