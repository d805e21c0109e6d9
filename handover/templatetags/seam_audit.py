"""Audit entries as staff read them (handover.audit.audit_changes)."""

from __future__ import annotations

from typing import Any

from django import template

from handover.audit import AuditChange, audit_changes, state_json
from handover.models import AuditEntry

register = template.Library()


@register.filter
def changes(entry: AuditEntry) -> list[AuditChange]:
    return audit_changes(entry.old_state or {}, entry.new_state or {})


@register.filter
def as_json(state: Any) -> str:
    return state_json(state)
