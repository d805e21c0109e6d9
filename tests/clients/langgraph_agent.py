"""The LangGraph agent that docs/integrating.md shows (points_langgraph.py: langchain's
create_agent, whose ToolNode runs the journaled tools), run with the page's own scripted model
(its ScriptedModel, a langchain-core GenericFakeChatModel: the balance, then each of
agent_support.AWARDS in turn, then its answer). Run by tests/clients/test_framework_adapters.py
in a child process that is killed mid-run and started again.

With AGENT_TOOLS=async the same agent is built from `@tool async def` tools and driven with
`await agent.ainvoke(...)` (tests/clients/test_langchain_adapter.py kills that one), journaled in
a sync Run (SEAM_HANDLE unset) or an AsyncRun (SEAM_HANDLE=async), with the page's model class
following the same script.

    python -m tests.clients.langgraph_agent    (SEAM_URL, SEAM_TOKEN, RUN_EXTERNAL_ID, GIFTDESK_URL)"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import requests
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from seam_client import AsyncSeamClient, SeamClient
from seam_client.adapters.langchain import journaled_tools

from tests.clients.agent_support import AWARDS, FINAL_ANSWER, doc_module

VERSIONS = {"schema": "1", "flow": "agent", "policy": "1", "capability": "points"}
PAGE = "points_langgraph.py"
# The page's own scripted chat model class, for the scripts of tests/clients/test_langchain_adapter.py.
ScriptedModel = doc_module(PAGE).ScriptedModel
AGENT_CALLS = [("points_balance", {"customer": "C-7"})] + [("award_points", args) for args in AWARDS]


def script(calls: list[tuple[str, dict[str, Any]]]) -> list[AIMessage]:
    """The model's messages: a tool call each of `calls`, then the final answer."""
    return [
        *(
            AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{n}"}])
            for n, (name, args) in enumerate(calls)
        ),
        AIMessage(content=FINAL_ANSWER),
    ]


@tool
async def award_points(customer: str, points: int, reference: str) -> dict[str, Any]:
    """Award loyalty points to a customer under a reference."""
    body = {"customer": customer, "points": points, "reference": reference}
    response = await asyncio.to_thread(
        requests.post, f"{os.environ['GIFTDESK_URL']}/points", json=body, timeout=5
    )
    response.raise_for_status()
    if reference == os.environ.get("HOLD_AFTER_REFERENCE"):
        await asyncio.sleep(3600)  # booked; the test kills the process before the outcome
    return dict(response.json())


@tool
async def points_balance(customer: str) -> str:
    """How many points a customer holds."""
    state = (await asyncio.to_thread(requests.get, f"{os.environ['GIFTDESK_URL']}/state", timeout=5)).json()
    return str(sum(entry["points"] for entry in state["points"] if entry["customer"] == customer))


async def run_async_agent(model: Any, ticket: str) -> str:
    """points_langgraph.py's run_agent, with async tools and agent.ainvoke."""
    request = {"messages": [("user", f"Award the goodwill points for {ticket}.")]}
    if os.environ.get("SEAM_HANDLE") == "async":
        async with AsyncSeamClient(os.environ["SEAM_URL"], os.environ["SEAM_TOKEN"]) as seam:
            arun = await seam.start_run(task_type="points_agent", versions=VERSIONS, external_id=ticket)
            tools = journaled_tools([award_points, points_balance], arun, read_only={"points_balance"})
            result = await create_agent(model, tools).ainvoke(request)
            await arun.complete()
    else:
        run = SeamClient(os.environ["SEAM_URL"], os.environ["SEAM_TOKEN"]).start_run(
            task_type="points_agent", versions=VERSIONS, external_id=ticket
        )
        tools = journaled_tools([award_points, points_balance], run, read_only={"points_balance"})
        with run.heartbeat(every=15.0):
            result = await create_agent(model, tools).ainvoke(request)
        run.complete()
    return str(result["messages"][-1].content)


def main() -> None:
    ticket = os.environ["RUN_EXTERNAL_ID"]
    started = time.monotonic()
    if os.environ.get("AGENT_TOOLS") == "async":
        print(asyncio.run(run_async_agent(ScriptedModel(messages=iter(script(AGENT_CALLS))), ticket)))
    else:
        agent = doc_module(PAGE)
        print(agent.run_agent(agent.scripted_model(), ticket))
    print(f"agent finished in {time.monotonic() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
