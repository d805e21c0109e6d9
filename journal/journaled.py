"""Adopt the journal without rewriting tools: `@journaled_tool("issue_refund")` turns a plain
tool function into one that records its intent, calls the function with the intent's
idempotency key, and records the outcome.

    @journaled_tool("issue_refund")
    def issue_refund(order_id: str, amount: str, idempotency_key: str) -> dict:
        return payments.refund(order_id, amount, idempotency_key=idempotency_key)

    with run_scope(run, actor=Actor.agent("returns-bot")):
        issue_refund(order_id="SU-90317", amount="14.95")   # journaled

The agent framework keeps calling the function with its own arguments; the run, the turn and
the actor come from the enclosing `run_scope`. A call whose intent was already settled returns
the stored result without calling the function again."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from .calls import perform
from .events import Actor
from .models import Run
from .tool_errors import DispatchResult

P = ParamSpec("P")
R = TypeVar("R")

# A non-dict return value is stored in the receipt under this key and unwrapped on replay.
VALUE_KEY = "value"


@dataclass
class RunScope:
    """The run a block of tool calls belongs to. `turn` advances by one after every journaled
    call, so replaying the same sequence of calls after a restart lands on the same steps;
    a runtime with its own notion of turns may set it before each call."""

    run: Run
    actor: Actor
    turn: int = 0


_current_scope: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar(
    "seam_run_scope", default=None
)


@contextlib.contextmanager
def run_scope(run: Run, *, actor: Actor, turn: int = 0) -> Iterator[RunScope]:
    scope = RunScope(run=run, actor=actor, turn=turn)
    token = _current_scope.set(scope)
    try:
        yield scope
    finally:
        _current_scope.reset(token)


class NoRunScope(RuntimeError):
    pass


def journaled_tool(
    tool: str, *, key_parameter: str = "idempotency_key"
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Journal every call of the decorated function as tool `tool`. If the function has a
    parameter named `key_parameter`, it receives the intent's idempotency key (and that
    parameter is not part of the recorded arguments)."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(function)
        wants_key = key_parameter in signature.parameters

        @functools.wraps(function)
        def journaled(*args: P.args, **kwargs: P.kwargs) -> R:
            scope = _current_scope.get()
            if scope is None:
                raise NoRunScope(
                    f"{tool} is journaled: call it inside `with run_scope(run, actor=...)` so the "
                    "call is recorded against a run"
                )
            if wants_key and key_parameter in kwargs:
                raise TypeError(f"{key_parameter} is supplied by the journal; do not pass it")
            bound = signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            arguments.pop(key_parameter, None)
            returned: list[Any] = []

            def dispatch(recorded_args: dict[str, Any], key: str) -> DispatchResult:
                call_kwargs = dict(arguments)  # the caller's own values, not their canonical form
                if wants_key:
                    call_kwargs[key_parameter] = key
                value = function(**call_kwargs)  # type: ignore[call-arg]
                returned.append(value)
                if isinstance(value, DispatchResult):
                    return value
                receipt = value if isinstance(value, dict) else {VALUE_KEY: value}
                return DispatchResult(receipt=receipt)

            turn = scope.turn
            scope.turn += 1
            performed = perform(
                run=scope.run, tool=tool, args=arguments, dispatch=dispatch, turn=turn, actor=scope.actor
            )
            if returned:
                result: R = returned[0]
                return result
            # Replayed: the function was not called again; hand back what it returned then.
            receipt = performed.intent.receipt
            stored: Any = receipt[VALUE_KEY] if set(receipt) == {VALUE_KEY} else receipt
            return stored

        return journaled

    return decorate
