from typing import Any

from django.contrib import admin

from journal.tenant_admin import TenantScopedAdmin, TenantScopedHistoryAdmin

from .models import CatalogueEntry, DeadLetter


@admin.register(CatalogueEntry)
class CatalogueEntryAdmin(TenantScopedHistoryAdmin):
    """Support staff and team leads read the catalogue (view permission); admins edit it
    (migration 0003 grants the roles). Permissions are Django's own; the history keeps who
    changed what, with the old and new values. A tenant's admin edits its tenant's own entries
    and reads the defaults (no tenant), which only superusers change."""

    defaults_readable = True
    list_display = [
        "tool",
        "whose",
        "compensating_tool",
        "reversibility",
        "until_condition",
        "loss",
        "updated_at",
    ]
    list_select_related = ["tenant"]
    list_filter = ["reversibility"]
    search_fields = ["tool", "compensating_tool"]
    readonly_fields = ["updated_at"]
    history_list_display = ["tenant", "compensating_tool", "reversibility", "argument_mapping"]

    @admin.display(description="for")
    def whose(self, entry: CatalogueEntry) -> str:
        return entry.tenant.name if entry.tenant else "every tenant (default)"


@admin.register(DeadLetter)
class DeadLetterAdmin(TenantScopedAdmin):
    """Read only: a dead letter is taken, assigned, retried and resolved from the console's
    dead-letter page, where each action is audited."""

    tenant_path = "compensation__original__run__tenant"
    list_display = ["compensation", "error_class", "owner", "created_at", "resolved_at"]
    list_select_related = ["compensation__original", "owner"]
    list_filter = ["error_class"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
