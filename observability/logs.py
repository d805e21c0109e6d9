"""Log formatting: one JSON object per line (SEAM_LOG_JSON=1, the production default) or a
readable line, both carrying the run, step, request and task ids of observability.context.

Imported by Django's logging set-up before the apps are ready: it must not import models."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from .context import FIELDS, current


class ContextFilter(logging.Filter):
    """Copy the context's fields onto each record (a field the call passed in `extra` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


def _context_of(record: logging.LogRecord) -> dict[str, str]:
    fields = dict(current())
    for name in FIELDS:
        value = getattr(record, name, None)
        if value is not None:
            fields[name] = str(value)
    return {name: fields[name] for name in FIELDS if name in fields}


class JsonFormatter(logging.Formatter):
    """{"ts", "level", "logger", "msg", then the context's ids, then "exc"}: one line each, so a
    log shipper needs no multi-line rules and `jq 'select(.run_id == "...")'` finds a run."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **_context_of(record),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """`2026-11-30 10:00:00,123 INFO seam.journal outcome recorded [run_id=… step_id=…]`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = _context_of(record)
        if not fields:
            return text
        suffix = " ".join(f"{name}={value}" for name, value in fields.items())
        head, newline, rest = text.partition("\n")
        return f"{head} [{suffix}]{newline}{rest}"
