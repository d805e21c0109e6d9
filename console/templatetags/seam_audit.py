"""Audit entries as staff read them (console.audit_reading.audit_changes)."""

from __future__ import annotations

from typing import Any

from django import template

from audit.models import AuditEntry
from console.audit_reading import AuditChange, audit_changes, audit_sentence, state_json

register = template.Library()


@register.filter
def changes(entry: AuditEntry) -> list[AuditChange]:
    return audit_changes(entry.old_state or {}, entry.new_state or {})


@register.filter
def sentence(entry: AuditEntry) -> str:
    return audit_sentence(entry)


@register.filter
def as_json(state: Any) -> str:
    return state_json(state)
