"""What every log line is about: the run and step being worked, the web request or Celery task
doing it. Held in context variables, so a value set around a piece of work reaches every log
record made inside it (by Seam, Django, requests or a connector) and nothing outside it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

# The fields a log record may carry, in the order the formatters print them.
FIELDS = ("request_id", "task_id", "task", "run_id", "step_id", "intent_id", "compensation_id")

_EMPTY: Mapping[str, str] = {}
_context: ContextVar[Mapping[str, str]] = ContextVar("seam_log_context", default=_EMPTY)


def current() -> Mapping[str, str]:
    """The fields in force here (read-only)."""
    return _context.get()


def bind(**fields: Any) -> Token[Mapping[str, str]]:
    """Add fields (None values are ignored) until `unbind(token)`; prefer `log_context`."""
    merged = {**_context.get(), **{name: str(value) for name, value in fields.items() if value is not None}}
    return _context.set(merged)


def unbind(token: Token[Mapping[str, str]]) -> None:
    _context.reset(token)


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """`with log_context(run_id=run.pk, step_id=intent.step_id): ...` — every log record made
    inside carries these fields; the outer ones come back afterwards."""
    token = bind(**fields)
    try:
        yield
    finally:
        _context.reset(token)


def _journal_fields(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """run_id and step_id from a journal service's keyword arguments: an `intent`, or a `run`
    with the `turn`, `tool` and `occurrence` that name the step (handover.services.step_id_for)."""
    intent = kwargs.get("intent")
    if intent is not None:
        return {"run_id": intent.run_id, "step_id": intent.step_id}
    run = kwargs.get("run")
    if run is None:
        return {}
    fields: dict[str, Any] = {"run_id": run.pk}
    if "turn" in kwargs and isinstance(kwargs.get("tool"), str):
        from handover.services import step_id_for

        fields["step_id"] = step_id_for(
            run=run, turn=kwargs["turn"], tool=kwargs["tool"], occurrence=kwargs.get("occurrence", 0)
        )
    return fields


def journal_log_context[**P, R](func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a keyword-only journal service so that everything logged while it runs carries
    the run and step it works on."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        token = bind(**_journal_fields(kwargs))
        try:
            return func(*args, **kwargs)
        finally:
            _context.reset(token)

    return wrapper
