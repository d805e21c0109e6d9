from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.db.models import Q, QuerySet
from django.http import HttpRequest

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
from journal.tenant_admin import TenantScopedAdmin, admin_tenant
from observability.middleware import request_id_of

from .forms import NotificationRuleForm, TenantForm
from .login_throttle import login_unlock
from .models import NotificationRule, TenantSettings
from .roles import ROLE_PERMISSIONS


class TenantSettingsInline(admin.StackedInline):
    model = TenantSettings
    can_delete = False


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    """Superusers manage tenants. Anyone else granted the tenant permissions sees their own
    tenant alone: another tenant is a 404, as any row of it is."""

    tenant_path = "pk"
    form = TenantForm
    list_display = ["slug", "name", "retention_days", "created_at"]
    inlines = [TenantSettingsInline]

    def own_filter(self, tenant: Tenant) -> Q:
        return Q(pk=tenant.pk)

    def row_tenant_id(self, obj: Any) -> int | None:
        return int(obj.pk)


@admin.register(TenantSettings)
class TenantSettingsAdmin(TenantScopedAdmin):
    """Per tenant: the helpdesk link of a ticket id (validated: http(s), {ticket_id} once)."""

    tenant_path = "tenant"

    list_display = ["tenant", "helpdesk_ticket_url"]
    list_select_related = ["tenant"]


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ["user", "tenant"]
    list_select_related = ["user", "tenant"]


@admin.register(AgentToken)
class AgentTokenAdmin(TenantScopedAdmin):
    list_display = ["name", "tenant", "created_at", "revoked_at"]
    readonly_fields = ["digest", "created_at"]


class ReadOnlyAdmin(TenantScopedAdmin):
    """The journal is written by services only; the admin may look (at its tenant's rows), never
    touch."""

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    tenant_path = "tenant"
    list_display = ["ticket_id", "order_id", "task_type", "status", "tenant", "created_at"]
    list_filter = ["status", "task_type", "tenant"]
    search_fields = ["ticket_id", "order_id", "external_id"]


@admin.register(Intent)
class IntentAdmin(ReadOnlyAdmin):
    tenant_path = "run__tenant"
    list_display = ["step_id", "tool", "status", "error_class", "intended_at", "settled_at"]
    list_filter = ["status", "tool"]
    search_fields = ["step_id", "idempotency_key"]


@admin.register(CustomerMessage)
class CustomerMessageAdmin(ReadOnlyAdmin):
    tenant_path = "run__tenant"
    list_display = ["run", "channel", "told_at"]


@admin.register(JournalEvent)
class JournalEventAdmin(ReadOnlyAdmin):
    tenant_path = "run__tenant"
    list_display = ["at", "kind", "actor_kind", "actor_name", "run"]
    list_filter = ["kind", "actor_kind"]


@admin.register(Escalation)
class EscalationAdmin(ReadOnlyAdmin):
    tenant_path = "run__tenant"
    list_display = ["run", "reason", "created_at", "resolved_at", "resolved_by"]
    list_filter = ["reason"]


@admin.register(NotificationRule)
class NotificationRuleAdmin(TenantScopedAdmin):
    """Who hears about escalations. Editable by superusers and the admin role, which alone holds
    handover.*_notificationrule (console.roles); support staff and team leads do not see it. A
    tenant's admin sees and edits its own tenant's rules only."""

    form = NotificationRuleForm
    list_display = ["tenant", "task_type", "emails", "webhook_url", "active"]
    list_filter = ["active", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["task_type", "emails"]


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class StaffUserAdmin(TenantScopedAdmin, UserAdmin):
    """People, by tenant. Superusers manage everyone. Anyone else with the user permissions (an
    operator may grant them to a tenant's admin) manages the people of their own tenant, never a
    superuser, and gives only the staff roles: no superuser flag, no permissions one by one, so
    no one makes themselves more than a tenant's admin. A person they add joins their tenant."""

    tenant_path = "membership__tenant"
    actions = ["login_unlock_action"]

    @admin.action(description="Let them sign in again (forget their failed logins)", permissions=["change"])
    def login_unlock_action(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        # The queryset is the caller's tenant's people (get_queryset); each unlock is audited.
        cleared = sum(
            login_unlock(user=person, actor=request.user, request_id=request_id_of(request))
            for person in queryset
        )
        self.message_user(
            request, f"{queryset.count()} people may sign in again ({cleared} failure records forgotten)."
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        return rows if request.user.is_superuser else rows.filter(is_superuser=False)

    def is_own(self, request: HttpRequest, obj: Any) -> bool:
        return super().is_own(request, obj) and not obj.is_superuser

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if request.user.is_superuser:
            return fieldsets
        hidden = {"is_superuser", "user_permissions"}
        return [
            (name, {**options, "fields": [f for f in options["fields"] if f not in hidden]})
            for name, options in fieldsets
        ]

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "groups" and not request.user.is_superuser:
            kwargs["queryset"] = Group.objects.filter(name__in=ROLE_PERMISSIONS)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        tenant = None if request.user.is_superuser else admin_tenant(request)
        super().save_model(request, obj, form, change)
        if tenant is not None:
            Membership.objects.get_or_create(user=obj, defaults={"tenant": tenant})
