"""A LangGraph agent (create_react_agent: the model node and LangGraph's ToolNode) whose plain
tools are journaled in Seam by seam_client.adapters.langchain. Its model is scripted: it asks for
each of agent_support.AWARDS in turn, then answers. Run by tests/clients/test_framework_adapters.py
in a child process that is killed mid-run and started again.

    python -m tests.clients.langgraph_agent    (SEAM_URL, SEAM_TOKEN, RUN_EXTERNAL_ID, GIFTDESK_URL)"""

from __future__ import annotations

import warnings
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool
from langgraph.prebuilt import create_react_agent
from seam_client.adapters.langchain import journaled_tools

from tests.clients.agent_support import AWARDS, FINAL_ANSWER, award_points, points_balance, the_run


class ScriptedModel(FakeMessagesListChatModel):
    """A chat model that says what the script says, whatever it is asked (no network)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def script() -> list[AIMessage]:
    calls = [
        AIMessage(content="", tool_calls=[{"name": "award_points", "args": args, "id": f"call-{n}"}])
        for n, args in enumerate(AWARDS, start=1)
    ]
    balance = AIMessage(
        content="", tool_calls=[{"name": "points_balance", "args": {"customer": "C-7"}, "id": "call-balance"}]
    )
    return [balance, *calls, AIMessage(content=FINAL_ANSWER)]


def main() -> None:
    run = the_run()
    tools = [StructuredTool.from_function(award_points), StructuredTool.from_function(points_balance)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        agent = create_react_agent(
            ScriptedModel(responses=script()), journaled_tools(tools, run, read_only={"points_balance"})
        )
    with run.heartbeat(every=5.0):
        result = agent.invoke({"messages": [("user", "Award C-7 the goodwill points.")]})
    run.complete()
    print(result["messages"][-1].content)


if __name__ == "__main__":
    main()
