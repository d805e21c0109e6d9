"""Journal the tools of a LangGraph or LangChain agent in Seam, without changing the tools' code.

    from langchain.agents import create_agent
    from seam_client import SeamClient
    from seam_client.adapters.langchain import journaled_tools

    run = SeamClient(url, token).start_run(task_type="goodwill", versions=versions, external_id=ticket)
    tools = journaled_tools([award_points, lookup_order], run, read_only={"lookup_order"})
    agent = create_agent(model, tools)
    agent.invoke({"messages": [...]})          # or: await agent.ainvoke(...)

Each wrapped tool keeps its name, description and argument schema, so the model and LangGraph's
ToolNode (under `create_agent` or a graph of your own) see the same tool. Its call goes through
`Run.perform`: the intent is committed before the tool runs, the outcome recorded after; a
settled call (an agent started again on the same run) answers from the journal without running
the tool (`replay_text`: what the call did, or a sentence saying what became of it); an open one
(the agent died between running the tool and recording its outcome) is run again under the same
key if the tool is named in `honours_key` (its downstream keeps the key, a day by default, and
answers a repeat with the first result) and the key's lifetime has not passed. Otherwise the tool
is not run: with the client's `wait_for_settle`, the call waits while Seam's reconciliation
settles it and the agent goes on from what was found (a performed call is replayed); without,
or when the wait ends unsettled, IntentInDoubt is raised out of `invoke`. The tool's own answer,
or its own exception, reaches the agent unchanged; LangGraph's `tool_call["id"]` is recorded
with the outcome.

    tools = journaled_tools([award_points, lookup_order], run, read_only={"lookup_order"},
                            honours_key={"award_points": HonoursKey(lifetime=24 * 3600)})

Sync and async tools both work. `agent.invoke` calls each tool's sync path; `agent.ainvoke` and
`astream` its async path (`@tool async def` tools need it), with either run handle: an
`AsyncRun` is awaited on the agent's event loop; a `Run` (sync) records from a worker thread
while the tool's coroutine runs on the agent's loop. A tool LangChain cannot call synchronously
(an async-only tool under `agent.invoke`) is refused before anything is journaled: it never ran.

What a failure records (an error is evidence, not proof that nothing happened):
- argument validation (pydantic's ValidationError, before the tool runs): `invalid_input`;
- a `seam_client.ToolError` the tool raises: its own class;
- an answer with `status="error"` (a ToolException the tool handles), or any other exception:
  `ambiguous`, recorded as evidence (the tool's error text) on the open intent, which Seam's
  reconciliation settles by the tool's lookup, else a person; unless the tool is named in
  `errors_mean_not_performed` (its errors are refusals before it acts): then `permanent`.

The call's key is in `current_idempotency_key()` and in the tool's config metadata
(`seam_idempotency_key`)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, ValidationError

from .._async import AsyncRun
from .._errors import ToolError
from .._resume import HonoursKey, HonoursKeys, honours_keys
from .._sync import Run
from .._types import Call, Intent, Outcome
from . import (
    SETTLED_WITHOUT_ERROR,
    ToolCall,
    Turns,
    classify,
    error_answer,
    outcome_of,
    replay_text,
    summary_of,
)

__all__ = ["JournaledTool", "journaled_tools"]

KEY_METADATA = "seam_idempotency_key"


class JournaledTool(BaseTool):
    """A tool whose every call is journaled in a Seam run (see the module's docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool
    seam_run: Run | AsyncRun
    turns: Turns
    errors_mean_not_performed: bool = False
    honours_key: HonoursKey | None = None

    def __init__(
        self,
        inner: BaseTool,
        seam_run: Run | AsyncRun,
        turns: Turns,
        *,
        errors_mean_not_performed: bool = False,
        honours_key: HonoursKey | None = None,
    ) -> None:
        super().__init__(
            name=inner.name,
            description=inner.description,
            args_schema=inner.args_schema,
            return_direct=inner.return_direct,
            response_format=inner.response_format,
            inner=inner,
            seam_run=seam_run,
            turns=turns,
            errors_mean_not_performed=errors_mean_not_performed,
            honours_key=honours_key,
        )

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is overridden
        raise NotImplementedError("a JournaledTool is called through invoke")

    def invoke(
        self, input: str | dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        if isinstance(self.seam_run, AsyncRun):
            raise TypeError(
                f"{self.name} is journaled in an AsyncRun: run the agent with ainvoke or astream, "
                "or journal its tools in a (sync) Run"
            )
        if _async_only(self.inner):
            # LangChain's own refusal, made before the intent: the tool never ran, so nothing
            # is journaled and nobody is asked to check an effect that cannot exist.
            raise NotImplementedError(
                f"{self.name} is an async tool (`async def`): run the agent with ainvoke or astream"
            )
        call = _ToolCall(self, input, config, kwargs)
        try:
            intent = self.seam_run.perform(
                self.name,
                call.args,
                call.sync,
                turn=self.turns.next(self.name),
                call_id=call.call_id,
                honours_key=self.honours_key,
            )
        except ToolError as failure:
            return call.own_failure(failure)
        return call.answer_to(intent)

    async def ainvoke(
        self, input: str | dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        call = _ToolCall(self, input, config, kwargs)
        turn = self.turns.next(self.name)
        try:
            if isinstance(self.seam_run, AsyncRun):
                intent = await self.seam_run.perform(
                    self.name,
                    call.args,
                    call.coroutine,
                    turn=turn,
                    call_id=call.call_id,
                    honours_key=self.honours_key,
                )
            else:
                # The sync Run's requests block: made from a worker thread, while the tool's
                # coroutine is handed back to this loop, which is free while it awaits the thread.
                intent = await asyncio.to_thread(
                    self.seam_run.perform,
                    self.name,
                    call.args,
                    call.on_loop(asyncio.get_running_loop()),
                    turn=turn,
                    call_id=call.call_id,
                    honours_key=self.honours_key,
                )
        except ToolError as failure:
            return call.own_failure(failure)
        return call.answer_to(intent)


class _ToolCall(ToolCall):
    """One call of a JournaledTool: what is journaled of it, the inner tool's call made by
    `perform` (sync, as a coroutine, or as a coroutine on the agent's loop from a thread), and
    what the agent gets back."""

    def __init__(self, tool: JournaledTool, input: Any, config: RunnableConfig | None, kwargs: Any) -> None:
        super().__init__()
        self.tool = tool
        self.input = input
        self.config = config
        self.kwargs = kwargs
        self.tool_call: dict[str, Any] | None = input if _is_tool_call(input) else None
        self.args = _journaled_args(tool.inner, self.tool_call["args"] if self.tool_call else input)
        self.call_id = str((self.tool_call or {}).get("id") or "")

    def _config(self, key: str) -> RunnableConfig:
        config: RunnableConfig = {**(self.config or {})}
        config["metadata"] = {**(config.get("metadata") or {}), KEY_METADATA: key}
        return config

    def sync(self, _args: dict[str, Any], key: str) -> Outcome:
        with self.running(key, self._classified):
            self.took(self.tool.inner.invoke(self.input, self._config(key), **self.kwargs))
        return self._outcome()

    async def coroutine(self, _args: dict[str, Any], key: str) -> Outcome:
        with self.running(key, self._classified):
            self.took(await self.tool.inner.ainvoke(self.input, self._config(key), **self.kwargs))
        return self._outcome()

    def on_loop(self, loop: asyncio.AbstractEventLoop) -> Call:
        def call(args: dict[str, Any], key: str) -> Outcome:
            return asyncio.run_coroutine_threadsafe(self.coroutine(args, key), loop).result()

        return call

    def _classified(self, exc: Exception) -> ToolError:
        # pydantic's ValidationError: the model's arguments were refused before the tool ran.
        return classify(
            exc,
            errors_mean_not_performed=self.tool.errors_mean_not_performed,
            argument_errors=(ValidationError,),
        )

    def _outcome(self) -> Outcome:
        """What the tool's answer records; an answer with status="error" is an error answer."""
        answer = self.answer
        if not isinstance(answer, ToolMessage):
            return outcome_of(answer)
        if answer.status == "error":
            raise error_answer(
                summary_of(answer.content), errors_mean_not_performed=self.tool.errors_mean_not_performed
            )
        return outcome_of(answer.content, receipt_from=answer.artifact)

    def answer_to(self, intent: Intent) -> Any:
        if self.answered:
            return self.answer
        # Settled before this call: the journal's answer, the tool not run again.
        if self.tool_call is None:
            return replay_text(intent)
        return ToolMessage(
            content=replay_text(intent),
            tool_call_id=self.call_id,
            name=self.tool.name,
            artifact=intent.receipt or None,
            status="success" if intent.status in SETTLED_WITHOUT_ERROR else "error",
        )


def journaled_tools(
    tools: Sequence[BaseTool],
    run: Run | AsyncRun,
    *,
    read_only: Collection[str] = (),
    errors_mean_not_performed: Collection[str] = (),
    honours_key: HonoursKeys = (),
    turns: Turns | None = None,
) -> list[BaseTool]:
    """The agent's tools, each write journaled in `run` (a Run, or an AsyncRun for an agent run
    with ainvoke/astream); the tools named in `read_only` (lookups that change nothing) are
    returned as they are. The tools named in `errors_mean_not_performed` declare that their
    errors are refusals before they act, so an error from one is recorded `permanent`, not kept
    in doubt. The tools named in `honours_key` (names, or each tool's HonoursKey) declare that
    their downstream honours the call's key: one found open is run again under its key inside
    the key's lifetime. One `Turns` numbers their calls."""
    turns = turns or Turns()
    honoured = honours_keys(honours_key)
    return [
        tool
        if tool.name in read_only
        else JournaledTool(
            tool,
            run,
            turns,
            errors_mean_not_performed=tool.name in errors_mean_not_performed,
            honours_key=honoured.get(tool.name),
        )
        for tool in tools
    ]


def _async_only(tool: BaseTool) -> bool:
    """A tool made from an `async def` (StructuredTool or Tool with a coroutine and no func)."""
    return getattr(tool, "coroutine", None) is not None and getattr(tool, "func", True) is None


def _is_tool_call(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "tool_call" and "args" in value


def _journaled_args(tool: BaseTool, raw: Any) -> dict[str, Any]:
    """What the model asked for, without what the framework injects (state, store, runtime)."""
    if not isinstance(raw, dict):
        return {"input": raw}
    injected: frozenset[str] = getattr(tool, "_injected_args_keys", frozenset())
    return {name: value for name, value in raw.items() if name not in injected}
