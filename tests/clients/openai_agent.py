"""The OpenAI Agents SDK agent that docs/integrating.md shows (points_openai.py: agents.Runner runs
the journaled function tools), run with a scripted model: it asks for the balance, then each of
agent_support.AWARDS in turn, then answers. Run by tests/clients/test_framework_adapters.py in a
child process that is killed mid-run and started again.

    python -m tests.clients.openai_agent    (SEAM_URL, SEAM_TOKEN, RUN_EXTERNAL_ID, GIFTDESK_URL)"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from agents import Model, ModelResponse, Usage, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from tests.clients.agent_support import AWARDS, FINAL_ANSWER, doc_module


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


def main() -> None:
    set_tracing_disabled(True)  # no traces leave the process
    agent = doc_module("points_openai.py")
    print(asyncio.run(agent.run_agent(ScriptedModel(), os.environ["RUN_EXTERNAL_ID"])))


if __name__ == "__main__":
    main()
