"""What every log line is about: the run and step being worked, the web request or Celery task
doing it. Held in context variables, so a value set around a piece of work reaches every log
record made inside it (by Seam, Django, requests or a connector) and nothing outside it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
