"""Audit entries as staff read them (handover.audit.audit_changes)."""

from __future__ import annotations

from django import template

from handover.audit import AuditChange, audit_changes
from handover.models import AuditEntry

register = template.Library()


@register.filter
def changes(entry: AuditEntry) -> list[AuditChange]:
    return audit_changes(entry.old_state or {}, entry.new_state or {})
