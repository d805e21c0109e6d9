"""Adapters that journal an agent framework's tools in Seam without changing the tools' code:
`seam_client.adapters.langchain` (LangGraph and LangChain), `seam_client.adapters.openai_agents`
(the OpenAI Agents SDK) and `seam_client.adapters.pydantic_ai` (Pydantic AI). Each wraps a tool
so that its call goes through `Run.perform`: the intent is committed before the tool runs, its outcome recorded
after, a settled call is replayed without running the tool again, and a call left in doubt (its
agent died between running it and recording what came of it) is run again only for a tool
declared to honour its key (`honours_key=`: names, or each tool's `seam_client.HonoursKey`),
under the same key and inside the key's lifetime. Any other call in doubt is not run: the
client's `wait_for_settle` (`SeamClient(..., wait_for_settle=120)`) makes the agent wait, with
progress on stderr, while Seam's reconciliation settles it, then go on from what it found.

A tool that can pass an idempotency key to its downstream system reads the current call's key
with `current_idempotency_key()`; one that cannot is still journaled, and Seam's reconciliation
finds its effect the way its registered connector says (by a business reference, say).

What the adapters share is here: the call's key (`calling_with`), the ranks of calls (`Turns`),
one call's record (`ToolCall`: the tool's own answer or exception), what an answer records
(`outcome_of`), what an error means (`classify`, `error_answer`) and what a replay tells the model
(`replay_text`, `SETTLED_WITHOUT_ERROR`)."""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .._errors import ErrorClass, ToolError
from .._types import Intent, Outcome

__all__ = ["SETTLED_WITHOUT_ERROR", "Turns", "classify", "current_idempotency_key", "replay_text"]

SUMMARY_LIMIT = 4000
# The statuses of a settled call that a replay tells the model as a success; any other (failed,
# not performed, unknown) is replayed as a failed call (a ToolMessage with status="error", a
# ToolFailed, an MCP result with isError), so the model does not take it for an effect.
SETTLED_WITHOUT_ERROR = frozenset({"performed", "already_so"})

_current_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "seam_idempotency_key", default=None
)


def current_idempotency_key() -> str | None:
    """The idempotency key of the journaled call being made now (None outside one)."""
    return _current_key.get()


@contextmanager
def calling_with(key: str) -> Iterator[None]:
    token = _current_key.set(key)
    try:
        yield
    finally:
        _current_key.reset(token)


class Turns:
    """Numbers an agent's journaled calls of each tool 1, 2, … in the order they are made: the
    intent's `turn` is the call's rank among the calls of its tool. An agent that is started again
    on the same run and makes the same calls in the same order therefore meets its settled calls
    again and gets them replayed, not re-run.

    Counting per tool keeps calls that a framework runs in parallel threads (several tool calls
    in one model message, under LangGraph's sync ToolNode) on their own steps when they are of
    different tools, whichever starts first. Two parallel calls of the same tool with different
    arguments may swap ranks on a second start: Seam then refuses the differing intent (409)
    rather than guess, and the agent stops."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def next(self, tool: str) -> int:
        with self._lock:
            self._counts[tool] = self._counts.get(tool, 0) + 1
            return self._counts[tool]


class ToolCall:
    """One journaled call as its adapter sees it: the tool's own answer, or the exception it raised
    (kept, so that once `perform` has recorded the failure the agent gets the tool's own, as
    without Seam)."""

    def __init__(self) -> None:
        self.answered = False
        self.answer: Any = None
        self.raised: Exception | None = None

    @contextmanager
    def running(self, key: str, classified: Callable[[Exception], ToolError]) -> Iterator[None]:
        """Around the tool's own call: its key is `current_idempotency_key()`, and an exception it
        raises is kept and raised to `perform` as the ToolError `classified` makes of it."""
        try:
            with calling_with(key):
                yield
        except Exception as exc:
            self.raised = exc
            error = classified(exc)
            if error is exc:  # the tool's own ToolError
                raise
            raise error from exc

    def took(self, answer: Any) -> None:
        self.answered, self.answer = True, answer

    def own_failure(self, recorded: ToolError) -> Any:
        """After `perform` recorded the call's failure: the tool's own error answer, else its own
        exception raised again, else (the tool did not run) `recorded`."""
        if self.answered:
            return self.answer
        raise self.raised or recorded


def outcome_of(value: Any, *, receipt_from: Any = None) -> Outcome:
    """What a tool's answer records: its text as the summary, a JSON object in it (or in
    `receipt_from`, a framework's artifact) as the receipt."""
    receipt = receipt_of(receipt_from) if receipt_from is not None else {}
    return Outcome(summary=summary_of(value), receipt=receipt or receipt_of(value))


def receipt_of(value: Any) -> dict[str, Any]:
    """A tool's answer as a receipt: a JSON object it returned (or wrote as JSON text), else
    nothing (its text is the outcome's summary)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    if isinstance(value, dict):
        try:
            return json.loads(json.dumps(value))  # type: ignore[no-any-return]
        except (TypeError, ValueError):
            return {}
    return {}


def summary_of(value: Any) -> str:
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, default=str)
        if isinstance(value, dict | list)
        else str(value)
    )
    return text[:SUMMARY_LIMIT]


def classify(
    exc: BaseException,
    *,
    errors_mean_not_performed: bool = False,
    argument_errors: tuple[type[BaseException], ...] = (),
) -> ToolError:
    """A tool's exception as Seam's error class. A ToolError keeps its own. One of
    `argument_errors` (the framework's refusal of the model's arguments, before the tool ran) is
    `invalid_input`. Any other exception may have come after the downstream acted, so it is
    `ambiguous` (recorded as evidence, the intent left open for reconciliation or a person),
    unless the agent's code declared the tool `errors_mean_not_performed` (its errors are
    refusals before it acts): then `permanent`."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, argument_errors):
        return ToolError(ErrorClass.INVALID_INPUT, str(exc)[:SUMMARY_LIMIT])
    return error_answer(f"{type(exc).__name__}: {exc}", errors_mean_not_performed=errors_mean_not_performed)


def error_answer(text: str, *, errors_mean_not_performed: bool = False) -> ToolError:
    """A tool's error answer (a message it returned as an error, not an exception) as a
    ToolError: evidence, not proof, that nothing happened (see `classify`)."""
    klass = ErrorClass.PERMANENT if errors_mean_not_performed else ErrorClass.AMBIGUOUS
    return ToolError(klass, text[:SUMMARY_LIMIT])


UNKNOWN_TEXT = "The outcome of this call is unknown; a person is checking it. Do not call it again."


def replay_text(intent: Intent) -> str:
    """What a settled intent, replayed instead of run again, tells the model: the recorded summary
    of a performed call, else a sentence saying what became of it. Never empty: an empty tool
    result reads to a model as "nothing happened", and it may call again."""
    summary = intent.summary.strip()
    if intent.status == "performed":
        if summary:
            return summary
        receipt = json.dumps(intent.receipt, sort_keys=True) if intent.receipt else ""
        return f"Done: {intent.tool or 'this call'} was performed" + (f" ({receipt})." if receipt else ".")
    detail = f" ({summary})" if summary else ""
    sentence = {
        "unknown": UNKNOWN_TEXT,
        "not_performed": f"This call was not performed: it had no effect{detail}.",
        "failed": f"This call failed ({intent.error_class or 'error'}){detail}; it had no effect.",
        "already_so": f"Nothing was done: this was already so before the call{detail}.",
        "intended": "This call has no recorded outcome yet; it is not sent again. Do not call it again.",
    }.get(intent.status)
    return sentence or f"This call is recorded as {intent.status}{detail}."
