"""Journal the tools of a Pydantic AI agent in Seam, without changing the tools' code.

    from pydantic_ai import Agent, FunctionToolset
    from seam_client import AsyncSeamClient
    from seam_client.adapters.pydantic_ai import journaled_toolset

    run = await AsyncSeamClient(url, token).start_run(task_type="goodwill", versions=versions, external_id=ticket)
    tools = journaled_toolset(FunctionToolset([award_points, points_balance]), run, read_only={"points_balance"})
    await Agent(model).run("Award C-7 the goodwill points.", toolsets=[tools])

`JournaledToolset` is a `WrapperToolset`, Pydantic AI's public way to change how a toolset's
tools run (its Temporal, DBOS and Prefect integrations wrap toolsets the same way): the model
sees the wrapped toolset's tools unchanged, Pydantic AI validates each call's arguments before the
toolset is asked to run it, and only `call_tool` is journaled. The call goes through
`AsyncRun.perform`: the intent is committed before the tool runs, the outcome recorded after,
with the model's `ctx.tool_call_id`; a settled call (an agent started again on the same run)
answers from the journal without running the tool (`replay_text`: what the call did, or a
sentence saying what became of it, as a failed tool result (`ToolFailed`) when it did not
succeed); an open one is run again under the same key if the tool is named in `honours_key`
(names, or each tool's `seam_client.HonoursKey`) and its key's lifetime has not passed;
otherwise it is not run, and, after the client's `wait_for_settle` (if any) has given Seam's
reconciliation the time to settle it, IntentInDoubt is raised out of `Agent.run`. The
tool's own answer, or its own exception, reaches the agent unchanged: the model sees a
`ModelRetry` or `ToolFailed`, any other exception ends the run, as without Seam.

What a failure records (an error is evidence, not proof that nothing happened):
- a `seam_client.ToolError` the tool raises: its own class;
- any other exception, `ModelRetry` and `ToolFailed` included: `ambiguous`, recorded as evidence
  (the tool's error text) on the open intent, which Seam's reconciliation settles by the tool's
  lookup, else a person; unless the tool is named in `errors_mean_not_performed` (its errors
  are refusals before it acts): then `permanent`.
(Argument validation happens before `call_tool`: a call Pydantic AI refused is never journaled.)

Tools named in `read_only` run as they are. Wrap approval (`ApprovalRequiredToolset`) and
deferral around the journaled toolset, not inside it, so a call is journaled only once it runs.
The call's key is in `current_idempotency_key()`."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext, ToolFailed
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
from pydantic_core import to_jsonable_python

from .._async import AsyncRun
from .._errors import ToolError
from .._resume import HonoursKey, HonoursKeys, honours_keys
from .._types import Outcome
from . import SETTLED_WITHOUT_ERROR, ToolCall, Turns, classify, outcome_of, replay_text

__all__ = ["JournaledToolset", "journaled_toolset"]


@dataclass
class JournaledToolset(WrapperToolset[Any]):
    """A toolset whose every call, except those of its `read_only` tools, is journaled in
    `seam_run` (see the module's docstring). One `Turns` numbers the calls of each tool in the
    order Pydantic AI starts them, so an agent started again meets its settled calls again."""

    seam_run: AsyncRun
    read_only: frozenset[str] = frozenset()
    errors_mean_not_performed: frozenset[str] = frozenset()
    honours_key: Mapping[str, HonoursKey] = field(default_factory=dict)
    turns: Turns = field(default_factory=Turns)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if name in self.read_only:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        turn = self.turns.next(name)  # before any await: calls are ranked in the order they start
        record = ToolCall()

        def classified(exc: Exception) -> ToolError:
            return classify(exc, errors_mean_not_performed=name in self.errors_mean_not_performed)

        async def call(_args: dict[str, Any], key: str) -> Outcome:
            with record.running(key, classified):
                record.took(await self.wrapped.call_tool(name, tool_args, ctx, tool))
            return outcome_of(to_jsonable_python(record.answer, fallback=str))

        try:
            intent = await self.seam_run.perform(
                name,
                # The validated arguments as JSON, as the model sent them (dates as ISO text).
                to_jsonable_python(tool_args, fallback=str),
                call,
                turn=turn,
                call_id=ctx.tool_call_id or "",
                honours_key=self.honours_key.get(name),
            )
        except ToolError as recorded:
            return record.own_failure(recorded)  # the tool's own exception goes on as without Seam
        if record.answered:
            return record.answer
        # Settled before this call: the journal's answer, the tool not run again.
        if intent.status in SETTLED_WITHOUT_ERROR:
            return replay_text(intent)
        raise ToolFailed(replay_text(intent))


def journaled_toolset(
    toolset: AbstractToolset[Any],
    run: AsyncRun,
    *,
    read_only: Collection[str] = (),
    errors_mean_not_performed: Collection[str] = (),
    honours_key: HonoursKeys = (),
    turns: Turns | None = None,
) -> JournaledToolset:
    """`toolset` (a FunctionToolset, an MCP server, any toolset) with its calls journaled in
    `run`. `read_only` names the tools that change nothing (lookups), run as they are;
    `errors_mean_not_performed` names the tools whose errors are refusals made before acting;
    `honours_key` (names, or each tool's HonoursKey) the tools whose downstream honours the
    call's key, run again under it when found open inside the key's lifetime."""
    return JournaledToolset(
        wrapped=toolset,
        seam_run=run,
        read_only=frozenset(read_only),
        errors_mean_not_performed=frozenset(errors_mean_not_performed),
        honours_key=honours_keys(honours_key),
        turns=turns or Turns(),
    )
