"""An OpenAI Agents SDK agent (agents.Runner runs its function tools) whose plain tools are
journaled in Seam by seam_client.adapters.openai_agents. Its model is scripted: it asks for each
of agent_support.AWARDS in turn, then answers. Run by tests/clients/test_framework_adapters.py
in a child process that is killed mid-run and started again.

    python -m tests.clients.openai_agent    (SEAM_URL, SEAM_TOKEN, RUN_EXTERNAL_ID, GIFTDESK_URL)"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from seam_client import AsyncSeamClient
from seam_client.adapters.openai_agents import journaled_tools

from tests.clients.agent_support import AWARDS, FINAL_ANSWER, VERSIONS, award_points, points_balance


class ScriptedModel(Model):
    """A model that answers with the next item of its script, whatever it is asked (no network)."""

    def __init__(self) -> None:
        calls = [("points_balance", {"customer": "C-7"})] + [("award_points", args) for args in AWARDS]
        self.script: list[Any] = [
            ResponseFunctionToolCall(
                id=f"fc-{n}", call_id=f"call-{n}", name=name, arguments=json.dumps(args), type="function_call"
            )
            for n, (name, args) in enumerate(calls)
        ]
        self.script.append(
            ResponseOutputMessage(
                id="msg-final",
                role="assistant",
                status="completed",
                type="message",
                content=[ResponseOutputText(text=FINAL_ANSWER, type="output_text", annotations=[])],
            )
        )

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=[self.script.pop(0)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


async def main() -> None:
    set_tracing_disabled(True)
    async with AsyncSeamClient(os.environ["SEAM_URL"], os.environ["SEAM_TOKEN"]) as seam:
        run = await seam.start_run(
            task_type="points_agent", versions=VERSIONS, plan=[], external_id=os.environ["RUN_EXTERNAL_ID"]
        )
        tools = journaled_tools(
            [function_tool(award_points), function_tool(points_balance)], run, read_only={"points_balance"}
        )
        agent = Agent(
            name="points desk", instructions="Award the points.", tools=tools, model=ScriptedModel()
        )
        async with run.heartbeat(every=5.0):
            result = await Runner.run(agent, "Award C-7 the goodwill points.")
        await run.complete()
    print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
