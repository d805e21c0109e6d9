"""Journal the tools of an OpenAI Agents SDK agent in Seam, without changing the tools' code.

    from agents import Agent, Runner
    from seam_client import AsyncSeamClient
    from seam_client.adapters.openai_agents import journaled_tools

    run = await AsyncSeamClient(url, token).start_run(task_type="goodwill", versions=versions, external_id=ticket)
    agent = Agent(name="desk", tools=journaled_tools([award_points, points_balance], run, read_only={"points_balance"}))
    await Runner.run(agent, "Award C-7 the goodwill points.")

Each `FunctionTool` is copied with the same name, description and JSON schema; only its
`on_invoke_tool` is wrapped, so the SDK's Runner validates, guards, times and traces the call as
before. The call goes through `AsyncRun.perform`: the intent is committed before the tool runs,
the outcome recorded after; a settled call (an agent started again on the same run) answers from
the journal without running the tool; an open one raises IntentInDoubt and the tool is not run.

The SDK normally turns a tool's exception into a message for the model. The wrapper sees the
exception first: a `seam_client.ToolError` is recorded with its class, any other exception is
left in doubt (`ambiguous`: the tool may have acted before it failed) for Seam's reconciliation;
then the tool's own failure message goes to the model as before (or the exception is raised, if
the tool was made with `failure_error_function=None`). The call's key is in
`current_idempotency_key()`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Sequence
from typing import Any

from agents import FunctionTool, Tool
from agents.tool import (
    maybe_invoke_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext

from .._async import AsyncRun
from .._errors import ErrorClass, ToolError
from .._types import Outcome
from . import Turns, calling_with, classify, receipt_of, summary_of

__all__ = ["journaled_tool", "journaled_tools"]


def journaled_tool(tool: FunctionTool, run: AsyncRun, turns: Turns) -> FunctionTool:
    """A copy of `tool` whose every call is journaled in `run` (see the module's docstring)."""
    # A copy that raises its exceptions to the wrapper instead of answering them to the model.
    raising = set_function_tool_failure_error_function(dataclasses.replace(tool), None)

    async def on_invoke_tool(ctx: ToolContext[Any], raw_args: str) -> Any:
        try:
            args = json.loads(raw_args or "{}")
        except ValueError:
            args = {"input": raw_args}
        if not isinstance(args, dict):
            args = {"input": args}
        answered: dict[str, Any] = {}

        async def call(_args: dict[str, Any], key: str) -> Outcome:
            try:
                with calling_with(key):
                    answer = await raising.on_invoke_tool(ctx, raw_args)
            except Exception as exc:
                answered["error"] = exc
                raise classify(exc) from exc
            answered["answer"] = answer
            return Outcome(summary=summary_of(answer), receipt=receipt_of(answer))

        try:
            intent = await run.perform(tool.name, args, call, turn=turns.next(tool.name))
        except ToolError as exc:
            error = answered.get("error", exc)
            message = await maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=ctx, error=error
            )
            if message is None or exc.error_class is ErrorClass.AMBIGUOUS:
                raise  # in doubt: the run stops here rather than let the model act on a guess
            return message
        if "answer" in answered:
            return answered["answer"]
        return intent.summary  # settled before: the journal's answer, the tool not run again

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def journaled_tools(
    tools: Sequence[Tool], run: AsyncRun, *, read_only: Collection[str] = (), turns: Turns | None = None
) -> list[Tool]:
    """The agent's tools, each function tool journaled in `run`; those named in `read_only`
    (lookups that change nothing) and tools that are not function tools (hosted tools run on
    the model provider's side) are returned as they are. One `Turns` numbers their calls."""
    turns = turns or Turns()
    return [
        journaled_tool(tool, run, turns)
        if isinstance(tool, FunctionTool) and tool.name not in read_only
        else tool
        for tool in tools
    ]
