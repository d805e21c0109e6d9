"""An agent framework's agent that died between its tool's send and the record of what came of
it, started again (issue 30), each through its framework's own execution path: the OpenAI
Agents SDK's Runner.run with its ScriptedModel, and langchain's create_agent (LangGraph's
ToolNode) under agent.invoke. The tool loads a gift card at the giftdesk, a real provider
process that keeps each load by its Idempotency-Key (a repeat answers the first receipt), so its
own state file counts the loads. The process's death is a BaseException raised right after the
provider answered: nothing after it runs, as under a kill."""

from __future__ import annotations

import asyncio
import os
from decimal import Decimal
from typing import Any

import pytest
import requests
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain.agents import create_agent
from langchain_core.tools import tool
from seam_client import AsyncSeamClient, HonoursKey, IntentInDoubt, SeamClient
from seam_client.adapters import current_idempotency_key
from seam_client.adapters.langchain import journaled_tools as langchain_tools
from seam_client.adapters.openai_agents import journaled_tools as openai_tools

from journal.models import Escalation, Intent, IntentStatus, Run, RunStatus
from tests.clients.adapter_support import TASK_TYPE, VERSIONS, Desk, desk, ticket
from tests.clients.langgraph_agent import ScriptedModel as LangchainModel
from tests.clients.langgraph_agent import script
from tests.clients.test_framework_adapters import giftdesk

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["desk", "giftdesk"]  # the fixtures

LOAD = {"card": "GC-77", "amount": "25.00"}


class Killed(BaseException):
    """The agent's process died here (a BaseException: no `except Exception` records anything)."""


def load_gift_card(card: str, amount: str) -> dict[str, Any]:
    """Load an amount onto a gift card."""
    response = requests.post(
        f"{os.environ['GIFTDESK_URL']}/cards/{card}/loads",
        json={"amount": amount},
        headers={"Idempotency-Key": current_idempotency_key() or ""},
        timeout=5,
    )
    response.raise_for_status()
    if os.environ.get("AGENT_DIES_AFTER_SEND"):
        raise Killed  # the card is loaded; the agent dies before its outcome is recorded
    return dict(response.json())


def loads(on: Desk) -> dict[str, dict[str, Any]]:
    """The giftdesk's own record of its loads, by key."""
    return dict(on.ledger.state()["loads"])


def the_load(on: Desk, work: str) -> Intent:
    return Intent.objects.get(run=Run.objects.get(tenant=on.tenant, external_id=work), tool="load_gift_card")


def openai_agent(on: Desk, work: str, *, honours_key: Any = (), wait_for_settle: float = 0.0) -> str:
    """Runner.run over a model that loads the card once, then answers; the tool's output."""
    model = ScriptedModel(
        [[function_call("load_gift_card", LOAD, call_id="call-1")], [assistant_message("Done.")]]
    )

    async def agent_run() -> str:
        async with AsyncSeamClient(on.seam_url, on.token, wait_for_settle=wait_for_settle) as seam:
            run = await seam.start_run(task_type=TASK_TYPE, versions=VERSIONS, external_id=work)
            tools = openai_tools([function_tool(load_gift_card)], run, honours_key=honours_key)
            result = await Runner.run(Agent(name="card desk", tools=tools, model=model), "Load the card.")
            await run.complete()
            return str([item.output for item in result.new_items if hasattr(item, "output")])

    return asyncio.run(agent_run())


def killed_after_the_load(on: Desk, work: str, monkeypatch: pytest.MonkeyPatch, start: Any) -> Intent:
    with monkeypatch.context() as dying:
        dying.setenv("AGENT_DIES_AFTER_SEND", "1")
        with pytest.raises(Killed):
            start()
    intent = the_load(on, work)
    assert intent.status == IntentStatus.INTENDED
    assert list(loads(on)) == [intent.idempotency_key]
    return intent


def assert_loaded_once_and_completed(on: Desk, work: str, first: Intent) -> None:
    (load,) = loads(on).values()  # one load: the repeat was answered from the giftdesk's record
    assert Decimal(on.ledger.state()["cards"]["GC-77"]) == Decimal("25.00")
    settled = the_load(on, work)
    assert (settled.status, settled.idempotency_key) == (IntentStatus.PERFORMED, first.idempotency_key)
    assert settled.receipt["load_id"] == load["load_id"]
    run = Run.objects.get(pk=settled.run_id)
    assert run.status == RunStatus.COMPLETED and not Escalation.objects.filter(run=run).exists()


@pytest.fixture(autouse=True)
def no_traces() -> None:
    set_tracing_disabled(True)


def test_an_openai_agent_started_again_sends_its_keyed_call_again_and_goes_on(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = ticket()
    first = killed_after_the_load(desk, work, monkeypatch, lambda: openai_agent(desk, work))

    output = openai_agent(desk, work, honours_key={"load_gift_card": HonoursKey(lifetime=3600)})

    assert "ld_1" in output  # the giftdesk's first receipt, answered to the repeat
    assert_loaded_once_and_completed(desk, work, first)


def test_an_openai_agent_waits_for_a_call_not_declared_then_stops_in_doubt(
    desk: Desk, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    work = ticket()
    first = killed_after_the_load(desk, work, monkeypatch, lambda: openai_agent(desk, work))

    with pytest.raises(IntentInDoubt) as raised:
        openai_agent(desk, work, wait_for_settle=1.0)

    assert raised.value.waited >= 1.0 and not raised.value.person_decides
    assert (
        f"waiting for Seam to settle load_gift_card (key {first.idempotency_key})" in capfd.readouterr().err
    )
    assert list(loads(desk)) == [first.idempotency_key]  # not sent again
    assert the_load(desk, work).status == IntentStatus.INTENDED


def langgraph_agent(on: Desk, work: str, *, honours_key: Any = ()) -> str:
    """langchain's create_agent under agent.invoke (LangGraph's ToolNode runs the tool), its
    tools journaled in a sync Run; the agent's final answer."""
    model = LangchainModel(messages=iter(script([("load_gift_card", LOAD)])))
    with SeamClient(on.seam_url, on.token) as seam:
        run = seam.start_run(task_type=TASK_TYPE, versions=VERSIONS, external_id=work)
        tools = langchain_tools([tool(load_gift_card)], run, honours_key=honours_key)
        result = create_agent(model, tools).invoke({"messages": [("user", "Load the card.")]})
        run.complete()
    return str(result["messages"][-2].content)  # the tool's answer, before the final one


def test_a_langgraph_agent_started_again_sends_its_keyed_call_again_and_goes_on(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = ticket()
    first = killed_after_the_load(desk, work, monkeypatch, lambda: langgraph_agent(desk, work))

    answer = langgraph_agent(desk, work, honours_key={"load_gift_card"})

    assert "ld_1" in answer
    assert_loaded_once_and_completed(desk, work, first)
