"""Audit entries as staff read them: an entry's before and after states field by field (the
audit page, the run page's history) and as JSON (the CSV export, the raw disclosure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from handover import words


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


def audit_changes(old: dict[str, Any], new: dict[str, Any]) -> list[AuditChange]:
    """An entry's before and after states field by field, in the order the action wrote them:
    the table shows these, not the raw JSON, so that a team lead sees "status: escalated →
    running" rather than two dictionaries."""
    fields = [*old, *(name for name in new if name not in old)]
    return [
        AuditChange(
            field=name.replace("_", " "),
            before=words.audit_value_words(old[name]) if name in old else None,
            after=words.audit_value_words(new[name]) if name in new else None,
        )
        for name in fields
    ]


def state_json(state: dict[str, Any]) -> str:
    """An entry's stored state as JSON (null, not None), the way the CSV export and the page's
    raw disclosure show it."""
    return json.dumps(state, ensure_ascii=False, default=str)
