from typing import Any

from django.contrib import admin

from journal.tenant_admin import TenantScopedHistoryAdmin

from .models import TaskPolicy


@admin.register(TaskPolicy)
class TaskPolicyAdmin(TenantScopedHistoryAdmin):
    """A tenant's admin adds its tenant's own policy for a task type, which then governs that
    tenant's dead runs instead of the default (no tenant); the defaults only superusers change."""

    defaults_readable = True
    list_display = ["task_type", "whose", "strategy", "phase", "max_resume_age", "version", "updated_at"]
    list_select_related = ["tenant"]
    readonly_fields = ["version", "updated_at"]
    history_list_display = ["tenant", "strategy", "phase", "version"]

    @admin.display(description="for")
    def whose(self, policy: TaskPolicy) -> str:
        return policy.tenant.name if policy.tenant else "every tenant (default)"

    def save_model(self, request: Any, obj: TaskPolicy, form: Any, change: bool) -> None:
        # Every edit is a new version of the policy; the history keeps who changed what.
        if change:
            obj.version += 1
        super().save_model(request, obj, form, change)
