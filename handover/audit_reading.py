"""Audit entries as staff read them: an entry's before and after states field by field (the
audit page, the run page's history) and as JSON (the CSV export, the raw disclosure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AuditChange:
    """One field of an audited action as a person reads it: `before` is None where the field
    was not part of the state before (a customer message, say), `after` likewise."""

    field: str
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


SAID_LIMIT = 160  # longer values are cut in the table; the raw states stay one click away


def audit_changes(old: dict[str, Any], new: dict[str, Any]) -> list[AuditChange]:
    """An entry's before and after states field by field, in the order the action wrote them:
    the table shows these, not the raw JSON, so that a team lead sees "status: escalated →
    running" rather than two dictionaries."""
    fields = [*old, *(name for name in new if name not in old)]
    return [
        AuditChange(
            field=name.replace("_", " "),
            before=_said(old[name]) if name in old else None,
            after=_said(new[name]) if name in new else None,
        )
        for name in fields
    ]


def state_json(state: dict[str, Any]) -> str:
    """An entry's stored state as JSON (null, not None), the way the CSV export and the page's
    raw disclosure show it."""
    return json.dumps(state, ensure_ascii=False, default=str)


def _said(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        if all(isinstance(item, dict) and {"action", "tool"} <= item.keys() for item in value):
            # A resume's plan: what it sends and what it skips, step by step.
            text = ", ".join(f"{item['action']} {item['tool']}" for item in value)
        elif all(not isinstance(item, dict | list) for item in value):
            text = ", ".join(str(item) for item in value)
        else:
            text = f"{len(value)} items"
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    else:
        text = str(value)
    return text if len(text) <= SAID_LIMIT else text[: SAID_LIMIT - 1] + "…"
