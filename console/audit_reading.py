"""Audit entries as staff read them: an entry as one sentence ("lena-lead marked “Start the
return” as performed"), its before and after states field by field and as JSON behind the row's
"Details" disclosure (the audit page, the run page's history), and as JSON in the CSV export."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from handover import audit_words, words


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


def audit_sentence(entry: Any) -> str:
    """An audit entry (audit.AuditEntry) as the sentence its row says (handover.audit_words.audit_sentence)."""
    return audit_words.audit_sentence(
        action=entry.action,
        label=entry.get_action_display(),
        who=entry.username,
        step_id=entry.step_id or "",
        old=entry.old_state or {},
        new=entry.new_state or {},
    )


def state_json(state: dict[str, Any]) -> str:
    """An entry's stored state as JSON (null, not None), the way the CSV export and the page's
    raw disclosure show it."""
    return json.dumps(state, ensure_ascii=False, default=str)
