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
the outcome recorded after, with the model's `ctx.tool_call_id`; a settled call (an agent
started again on the same run) answers from the journal without running the tool
(`replay_text`: what the call did, or a sentence saying what became of it); an open one is run
again under the same key if the tool is named in `honours_key` (names, or each tool's
`seam_client.HonoursKey`) and its key's lifetime has not passed; otherwise the tool is not run,
and, after the client's `wait_for_settle` (if any) has given Seam's reconciliation the time to
settle it, IntentInDoubt is raised out of `Runner.run`. The tool's own answer, or the SDK's
failure message for its exception, reaches the model unchanged (or the exception is raised, if
the tool was made with `failure_error_function=None`).

The Runner wraps a tool's exception in its own `UserError` unless the exception is one of the
SDK's (`AgentsException`: agents/run_internal/tool_execution.py lets those through). So each of
Seam's own answers (`IntentInDoubt`; `SeamRefused`, a 400 for arguments Seam's schema refuses or
a tool the deployment does not declare; `OutcomeNotRecorded`; any `SeamError`) is raised out of
`Runner.run` as itself, as an instance of a subclass of its own class and `AgentsException`:
`except seam_client.IntentInDoubt` (or `SeamRefused`, …) around `Runner.run` catches it.

What a failure records (an error is evidence, not proof that nothing happened):
- argument validation (the SDK's `ModelBehaviorError`, before the tool runs): `invalid_input`;
- a `seam_client.ToolError` the tool raises: its own class;
- any other exception: `ambiguous`, recorded as evidence (the tool's error text) on the open
  intent, which Seam's reconciliation settles by the tool's lookup, else a person; unless the
  tool is named in `errors_mean_not_performed` (its errors are refusals before it acts): then
  `permanent`.

The call's key is in `current_idempotency_key()`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Sequence
from typing import Any, TypeVar, cast

from agents import AgentsException, FunctionTool, ModelBehaviorError, Tool
from agents.tool import (
    maybe_invoke_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext

from .. import _errors
from .._async import AsyncRun
from .._errors import ToolError
from .._resume import HonoursKey, HonoursKeys, honours_keys
from .._types import Outcome
from . import ToolCall, Turns, classify, outcome_of, replay_text

__all__ = ["journaled_tool", "journaled_tools", "through_runner"]

SeamErrorT = TypeVar("SeamErrorT", bound=_errors.SeamError)
_PASSING: dict[type[_errors.SeamError], type[_errors.SeamError]] = {}


def through_runner(error: SeamErrorT) -> SeamErrorT:
    """`error` as the SDK's Runner lets it through (see the module's docstring): the same error,
    its class made also an `AgentsException`, so it reaches the agent's code as itself."""
    if isinstance(error, AgentsException):
        return error
    kind = type(error)
    if kind not in _PASSING:
        _PASSING[kind] = type(
            kind.__name__, (kind, AgentsException), {"__module__": kind.__module__, "__doc__": kind.__doc__}
        )
    passing = _PASSING[kind]
    # Made without __init__ (each kind takes its own arguments), then given the error's state.
    raised = cast(SeamErrorT, passing.__new__(passing, *error.args))
    raised.__dict__.update(vars(error))
    raised.run_data = None  # type: ignore[attr-defined]  # AgentsException's; the Runner fills it
    return raised


def journaled_tool(
    tool: FunctionTool,
    run: AsyncRun,
    turns: Turns,
    *,
    errors_mean_not_performed: bool = False,
    honours_key: HonoursKey | None = None,
) -> FunctionTool:
    """A copy of `tool` whose every call is journaled in `run` (see the module's docstring)."""
    # A copy that raises its exceptions to the wrapper instead of answering them to the model.
    raising = set_function_tool_failure_error_function(dataclasses.replace(tool), None)

    def classified(exc: Exception) -> ToolError:
        # The SDK's ModelBehaviorError: the model's arguments were refused before the tool ran.
        return classify(
            exc, errors_mean_not_performed=errors_mean_not_performed, argument_errors=(ModelBehaviorError,)
        )

    async def on_invoke_tool(ctx: ToolContext[Any], raw_args: str) -> Any:
        record = ToolCall()

        async def call(_args: dict[str, Any], key: str) -> Outcome:
            with record.running(key, classified):
                record.took(await raising.on_invoke_tool(ctx, raw_args))
            return outcome_of(record.answer)

        try:
            intent = await run.perform(
                tool.name,
                _journaled_args(raw_args),
                call,
                turn=turns.next(tool.name),
                call_id=ctx.tool_call_id,
                honours_key=honours_key,
            )
        except _errors.SeamError as exc:
            raise through_runner(exc) from exc
        except ToolError as recorded:
            error = record.raised or recorded
            message = await maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=ctx, error=error
            )
            if message is None:  # the tool was made to raise: it does, as without Seam
                raise error from error.__cause__
            return message
        if record.answered:
            return record.answer
        return replay_text(intent)  # settled before: the journal's answer, the tool not run again

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def journaled_tools(
    tools: Sequence[Tool],
    run: AsyncRun,
    *,
    read_only: Collection[str] = (),
    errors_mean_not_performed: Collection[str] = (),
    honours_key: HonoursKeys = (),
    turns: Turns | None = None,
) -> list[Tool]:
    """The agent's tools, each function tool journaled in `run`; those named in `read_only`
    (lookups that change nothing) and tools that are not function tools (hosted tools run on
    the model provider's side) are returned as they are. `errors_mean_not_performed` names the
    tools whose exceptions are refusals made before acting; `honours_key` (names, or each
    tool's HonoursKey) the tools whose downstream honours the call's key, run again under it
    when found open inside the key's lifetime. One `Turns` numbers their calls."""
    turns = turns or Turns()
    honoured = honours_keys(honours_key)
    return [
        journaled_tool(
            tool,
            run,
            turns,
            errors_mean_not_performed=tool.name in errors_mean_not_performed,
            honours_key=honoured.get(tool.name),
        )
        if isinstance(tool, FunctionTool) and tool.name not in read_only
        else tool
        for tool in tools
    ]


def _journaled_args(raw_args: str) -> dict[str, Any]:
    """What the model asked for, as a JSON object (the SDK refuses anything else, after this)."""
    try:
        args = json.loads(raw_args or "{}")
    except ValueError:
        return {"input": raw_args}
    return args if isinstance(args, dict) else {"input": args}
