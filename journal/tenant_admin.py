"""The Django admin, scoped to the admin's tenant. Every ModelAdmin of a row that belongs to a
tenant mixes in `TenantScopedAdmin` and says how to reach the tenant (`tenant_path`):

- the change list and every object view show the caller's tenant's rows only (`get_queryset`);
  an object of another tenant is a 404, and a permission check on it says no, so no view that
  finds the object another way (django-simple-history's) can show or change it;
- a form's tenant field offers the caller's tenant alone, and `save_model` sets it, so a posted
  id of another tenant is refused ("select a valid choice") and nothing is written;
- rows without a tenant are the defaults for every tenant (`defaults_readable`: the catalogue and
  the task policies). A tenant's admin reads them, because they govern the tenant's runs wherever
  it has no row of its own, and overriding one starts from reading it; only superusers change,
  add or delete them.

Superusers are not scoped. A staff user of no tenant sees no row. The mixin decides where rows
may go; which models a person may use at all stays with Django's permissions (console.roles).
It lives here, beside Tenant and Membership, because the admins of every layer above use it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from . import selectors
from .models import Tenant


def admin_tenant(request: HttpRequest) -> Tenant | None:
    """The tenant whose rows a non-superuser may administer (None: no tenant, so none)."""
    return selectors.tenant_for_user(request.user)


def _is_superuser(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_superuser", False))


class TenantScopedAdmin(admin.ModelAdmin):
    # The lookup path from the model to its tenant: "tenant", "run__tenant", "membership__tenant".
    tenant_path: str = "tenant"
    # Rows without a tenant are defaults every tenant's admin may read (superusers change them).
    defaults_readable: bool = False

    # --- which rows ------------------------------------------------------------------------

    def tenant_filter(self, tenant: Tenant) -> Q:
        own = Q(**{self.tenant_path: tenant})
        return own | Q(**{f"{self.tenant_path}__isnull": True}) if self.defaults_readable else own

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        if _is_superuser(request):
            return rows
        tenant = admin_tenant(request)
        return rows.none() if tenant is None else rows.filter(self.tenant_filter(tenant))

    def get_list_filter(self, request: HttpRequest) -> Any:
        # A filter by tenant would list every tenant's name to a tenant's admin.
        filters = super().get_list_filter(request)
        if _is_superuser(request):
            return filters
        return [f for f in filters if f != self.tenant_path]

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        # The role first: a caller who may not use this model at all is refused (403) whatever the
        # id. Then the tenant: another tenant's row does not exist for this caller, a 404 (not the
        # admin's "perhaps it was deleted" redirect), as for an id that exists nowhere.
        if not (self.has_view_or_change_permission(request) or self.has_delete_permission(request)):
            raise PermissionDenied
        found = super().get_object(request, object_id, from_field)
        if found is None:
            raise Http404(f"No {self.model._meta.verbose_name} with that id.")
        return found

    def row_tenant_id(self, obj: Any) -> int | None:
        value: Any = obj
        for part in self.tenant_path.split("__"):
            value = getattr(value, part, None)
            if value is None:
                return None
        return value.pk if isinstance(value, Tenant) else None

    def is_default(self, obj: Any) -> bool:
        return self.defaults_readable and self.row_tenant_id(obj) is None

    def is_own(self, request: HttpRequest, obj: Any) -> bool:
        tenant = admin_tenant(request)
        return tenant is not None and self.row_tenant_id(obj) == tenant.pk

    # --- what may be done with a row -------------------------------------------------------

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = super().has_view_permission(request, obj)
        if obj is None or _is_superuser(request):
            return allowed
        return allowed and (self.is_own(request, obj) or self.is_default(obj))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = super().has_change_permission(request, obj)
        if obj is None or _is_superuser(request):
            return allowed
        return allowed and self.is_own(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = super().has_delete_permission(request, obj)
        if obj is None or _is_superuser(request):
            return allowed
        return allowed and self.is_own(request, obj)

    # --- where a row may go ----------------------------------------------------------------

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant" and not _is_superuser(request):
            tenant = admin_tenant(request)
            kwargs["queryset"] = Tenant.objects.filter(pk=tenant.pk) if tenant else Tenant.objects.none()
            kwargs["required"] = True
            kwargs["empty_label"] = None
            kwargs["initial"] = tenant
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not _is_superuser(request) and self.tenant_path == "tenant":
            tenant = admin_tenant(request)
            if tenant is None:
                raise Http404("Your account belongs to no tenant.")
            obj.tenant = tenant
        super().save_model(request, obj, form, change)


class TenantScopedHistoryAdmin(TenantScopedAdmin, SimpleHistoryAdmin):
    """TenantScopedAdmin for a model with django-simple-history. Its "revert to this version"
    view saves on POST after checking only that the caller may *view* the history, so a tenant's
    admin could otherwise revert a default (or anything it may read): a POST there needs the
    right to change the row."""

    def history_form_view(
        self, request: HttpRequest, object_id: str, version_id: str, extra_context: Any = None
    ) -> Any:
        if request.method == "POST" and not _is_superuser(request):
            current = self.model._default_manager.filter(pk=object_id).first()
            if current is None or not self.has_change_permission(request, current):
                raise PermissionDenied("You may not change this row.")
        return super().history_form_view(request, object_id, version_id, extra_context)
