from django.contrib import admin

from journal.tenant_admin import TenantScopedAdmin

from .models import FanOut, FanOutBranch

BRANCH_FIELDS = ["name", "attempt", "tool", "required", "status", "error_class", "latency_ms", "retry_note"]


class FanOutBranchInline(admin.TabularInline):
    model = FanOutBranch
    extra = 0
    can_delete = False
    fields = tuple(BRANCH_FIELDS)
    readonly_fields = BRANCH_FIELDS

    def has_add_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(FanOut)
class FanOutAdmin(TenantScopedAdmin):
    """Read-only: the record is written by fanout.services alone. Scoped to the caller's tenant,
    as every row of a run is: a tenant's admin who is granted the view permission sees its own
    tenant's fan-outs, and another tenant's is a 404."""

    tenant_path = "run__tenant"

    list_display = ["name", "run", "outcome", "coverage", "deadline_ms", "started_at"]
    list_filter = ["outcome"]
    readonly_fields = [
        "run",
        "turn",
        "name",
        "deadline_ms",
        "started_at",
        "deadline_at",
        "settled_at",
        "outcome",
        "coverage",
        "decision",
    ]
    inlines = [FanOutBranchInline]

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: object, obj: object = None) -> bool:
        return False
