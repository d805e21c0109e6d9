from django.contrib import admin
from simple_history.admin import SimpleHistoryAdmin

from .models import CatalogueEntry


@admin.register(CatalogueEntry)
class CatalogueEntryAdmin(SimpleHistoryAdmin):
    """Support staff and team leads read the catalogue (view permission); admins edit it
    (migration 0003 grants the roles). Permissions are Django's own; the history keeps who
    changed what, with the old and new values."""

    list_display = ["tool", "compensating_tool", "reversibility", "until_condition", "loss", "updated_at"]
    list_filter = ["reversibility"]
    search_fields = ["tool", "compensating_tool"]
    readonly_fields = ["updated_at"]
    history_list_display = ["compensating_tool", "reversibility", "argument_mapping"]
