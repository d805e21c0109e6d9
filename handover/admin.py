from django.contrib import admin

from journal.models import (
    AgentToken,
    CustomerMessage,
    Escalation,
    Intent,
    JournalEvent,
    Membership,
    Run,
    Tenant,
)

from .models import NotificationRule, TenantSettings


class TenantSettingsInline(admin.StackedInline):
    model = TenantSettings
    can_delete = False


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    inlines = [TenantSettingsInline]


@admin.register(TenantSettings)
class TenantSettingsAdmin(admin.ModelAdmin):
    """Per tenant: the helpdesk link of a ticket id (validated: http(s), {ticket_id} once)."""

    list_display = ["tenant", "helpdesk_ticket_url"]
    list_select_related = ["tenant"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant"]
    list_select_related = ["user", "tenant"]


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "created_at", "revoked_at"]
    readonly_fields = ["digest", "created_at"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """The journal is written by services only; the admin may look, never touch."""

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["ticket_id", "order_id", "task_type", "status", "tenant", "created_at"]
    list_filter = ["status", "task_type", "tenant"]
    search_fields = ["ticket_id", "order_id", "external_id"]


@admin.register(Intent)
class IntentAdmin(ReadOnlyAdmin):
    list_display = ["step_id", "tool", "status", "error_class", "intended_at", "settled_at"]
    list_filter = ["status", "tool"]
    search_fields = ["step_id", "idempotency_key"]


@admin.register(CustomerMessage)
class CustomerMessageAdmin(ReadOnlyAdmin):
    list_display = ["run", "channel", "told_at"]


@admin.register(JournalEvent)
class JournalEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "kind", "actor_kind", "actor_name", "run"]
    list_filter = ["kind", "actor_kind"]


@admin.register(Escalation)
class EscalationAdmin(ReadOnlyAdmin):
    list_display = ["run", "reason", "created_at", "resolved_at", "resolved_by"]
    list_filter = ["reason"]


@admin.register(NotificationRule)
class NotificationRuleAdmin(admin.ModelAdmin):
    """Who hears about escalations. Editable by superusers and the admin role, which alone holds
    handover.*_notificationrule (handover.roles); support staff and team leads do not see it."""

    list_display = ["tenant", "task_type", "emails", "webhook_url", "active"]
    list_filter = ["active", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["task_type", "emails"]
