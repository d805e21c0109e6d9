"""Log records made while a journal service runs carry the run and step it works on."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from observability.context import bind, unbind

from .keys import step_id_of


def _journal_fields(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """run_id and step_id from a journal service's keyword arguments: an `intent`, or a `run`
    (or an agent's `caller`, which names its run) with the `step_id`, or the `turn`, `tool` and
    `occurrence` that name the step."""
    intent = kwargs.get("intent")
    if intent is not None:
        return {"run_id": intent.run_id, "step_id": intent.step_id}
    run, caller = kwargs.get("run"), kwargs.get("caller")
    if run is not None:
        run_pk = run.pk
    elif caller is not None:
        run_pk = caller.run_pk
    else:
        return {}
    fields: dict[str, Any] = {"run_id": run_pk}
    if isinstance(kwargs.get("step_id"), str):
        fields["step_id"] = kwargs["step_id"]
    elif "turn" in kwargs and isinstance(kwargs.get("tool"), str):
        fields["step_id"] = step_id_of(
            str(run_pk), kwargs["turn"], kwargs["tool"], kwargs.get("occurrence", 0)
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
            unbind(token)

    return wrapper
