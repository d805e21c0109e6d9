"""Journal the tools of a LangGraph or LangChain agent in Seam, without changing the tools' code.

    from seam_client import SeamClient
    from seam_client.adapters.langchain import journaled_tools

    run = SeamClient(url, token).start_run(task_type="goodwill", versions=versions, external_id=ticket)
    agent = create_react_agent(model, journaled_tools([award_points, lookup_order], run, read_only={"lookup_order"}))
    agent.invoke({"messages": [...]})

Each wrapped tool keeps its name, description and argument schema, so the model and LangGraph's
ToolNode see the same tool. Its call goes through `Run.perform`: the intent is committed before
the tool runs, the outcome recorded after; a settled call (an agent started again on the same
run) answers from the journal without running the tool; an open one raises IntentInDoubt and
the tool is not run. A tool's own answer is returned to the agent unchanged.

A tool answer with `status="error"` (a ToolException the tool handles) is recorded as a
`permanent` failure; an exception the tool raises is recorded by its class if it is a
`seam_client.ToolError`, and otherwise left in doubt (`ambiguous`: the tool may have acted before
it failed) for Seam's reconciliation. The call's key is in `current_idempotency_key()` and in
the tool's config metadata (`seam_idempotency_key`)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, ValidationError

from .._errors import ErrorClass, ToolError
from .._sync import Run
from .._types import Outcome
from . import Turns, calling_with, classify, receipt_of, replay_text, summary_of

__all__ = ["JournaledTool", "journaled_tools"]

KEY_METADATA = "seam_idempotency_key"


class JournaledTool(BaseTool):
    """A tool whose every call is journaled in a Seam run (see the module's docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool
    seam_run: Run
    turns: Turns

    def __init__(self, inner: BaseTool, seam_run: Run, turns: Turns) -> None:
        super().__init__(
            name=inner.name,
            description=inner.description,
            args_schema=inner.args_schema,
            return_direct=inner.return_direct,
            response_format=inner.response_format,
            inner=inner,
            seam_run=seam_run,
            turns=turns,
        )

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is overridden
        raise NotImplementedError("a JournaledTool is called through invoke")

    def invoke(
        self, input: str | dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        tool_call: dict[str, Any] | None = input if isinstance(input, dict) and _is_tool_call(input) else None
        raw_args = tool_call["args"] if tool_call else input
        args = _journaled_args(self.inner, raw_args)
        answered: dict[str, Any] = {}

        def call(_args: dict[str, Any], key: str) -> Outcome:
            call_config: RunnableConfig = {**(config or {})}
            call_config["metadata"] = {**(call_config.get("metadata") or {}), KEY_METADATA: key}
            try:
                with calling_with(key):
                    answer = self.inner.invoke(input, call_config, **kwargs)
            except ValidationError as exc:
                raise ToolError(ErrorClass.INVALID_INPUT, str(exc)[:4000]) from exc
            except Exception as exc:
                raise classify(exc) from exc
            answered["answer"] = answer
            content = answer.content if isinstance(answer, ToolMessage) else answer
            if isinstance(answer, ToolMessage) and answer.status == "error":
                raise ToolError(ErrorClass.PERMANENT, summary_of(content))
            artifact = answer.artifact if isinstance(answer, ToolMessage) else None
            return Outcome(summary=summary_of(content), receipt=receipt_of(artifact) or receipt_of(content))

        try:
            intent = self.seam_run.perform(
                self.name, args, call, turn=self.turns.next(self.name), call_id=_call_id_of(tool_call)
            )
        except ToolError:
            if "answer" in answered:  # the tool answered with its own error: the agent sees it
                return answered["answer"]
            raise
        if "answer" in answered:
            return answered["answer"]
        # Settled before this call: the journal's answer, the tool not run again.
        if tool_call is not None:
            return ToolMessage(
                content=replay_text(intent),
                tool_call_id=_call_id_of(tool_call),
                name=self.name,
                artifact=intent.receipt or None,
                status="success" if intent.status in ("performed", "already_so") else "error",
            )
        return replay_text(intent)

    async def ainvoke(
        self, input: str | dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        # Run.perform and the inner tool's sync path, off the event loop.
        return await asyncio.to_thread(self.invoke, input, config, **kwargs)


def journaled_tools(
    tools: Sequence[BaseTool], run: Run, *, read_only: Collection[str] = (), turns: Turns | None = None
) -> list[BaseTool]:
    """The agent's tools, each write journaled in `run`; the tools named in `read_only` (lookups
    that change nothing) are returned as they are. One `Turns` numbers their calls."""
    turns = turns or Turns()
    return [tool if tool.name in read_only else JournaledTool(tool, run, turns) for tool in tools]


def _call_id_of(tool_call: dict[str, Any] | None) -> str:
    return str((tool_call or {}).get("id") or "")


def _is_tool_call(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "tool_call" and "args" in value


def _journaled_args(tool: BaseTool, raw: Any) -> dict[str, Any]:
    """What the model asked for, without what the framework injects (state, store, runtime)."""
    if not isinstance(raw, dict):
        return {"input": raw}
    injected: frozenset[str] = getattr(tool, "_injected_args_keys", frozenset())
    return {name: value for name, value in raw.items() if name not in injected}
