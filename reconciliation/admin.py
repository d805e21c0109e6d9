from typing import Any

from django.contrib import admin
from simple_history.admin import SimpleHistoryAdmin

from .models import TaskPolicy


@admin.register(TaskPolicy)
class TaskPolicyAdmin(SimpleHistoryAdmin):
    list_display = ["task_type", "strategy", "phase", "max_resume_age", "version", "updated_at"]
    readonly_fields = ["version", "updated_at"]

    def save_model(self, request: Any, obj: TaskPolicy, form: Any, change: bool) -> None:
        # Every edit is a new version of the policy; the history keeps who changed what.
        if change:
            obj.version += 1
        super().save_model(request, obj, form, change)
