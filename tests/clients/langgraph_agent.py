"""The LangGraph agent that docs/integrating.md shows (points_langgraph.py: create_react_agent, whose
ToolNode runs the journaled tools), run with a scripted chat model: it asks for the balance, then
each of agent_support.AWARDS in turn, then answers. Run by tests/clients/test_framework_adapters.py
in a child process that is killed mid-run and started again.

    python -m tests.clients.langgraph_agent    (SEAM_URL, SEAM_TOKEN, RUN_EXTERNAL_ID, GIFTDESK_URL)"""

from __future__ import annotations

import os
import warnings
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage

from tests.clients.agent_support import AWARDS, FINAL_ANSWER, doc_module


class ScriptedModel(FakeMessagesListChatModel):
    """A chat model that says what the script says, whatever it is asked (no network)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def script() -> list[AIMessage]:
    calls = [("points_balance", {"customer": "C-7"})] + [("award_points", args) for args in AWARDS]
    return [
        *(
            AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{n}"}])
            for n, (name, args) in enumerate(calls)
        ),
        AIMessage(content=FINAL_ANSWER),
    ]


def main() -> None:
    agent = doc_module("points_langgraph.py")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        print(agent.run_agent(ScriptedModel(responses=script()), os.environ["RUN_EXTERNAL_ID"]))


if __name__ == "__main__":
    main()
