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
It lives here, beside Tenant and Membership, because the admins of every layer above use it.

An id that is not one of the model's ids (a word, a NUL, a number past any integer) is a 404,
as is a row of another tenant, in the history views too: never a 500, and never a 403 that
would tell a tenant's admin the row exists elsewhere. `AdminBadInputMiddleware` answers 400 to
what no admin page sends (a NUL anywhere, a selected row that is no id) before any admin, ours
or a library's, builds a query from it (issue 33, item 4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.utils import unquote
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, ValidationError
from django.db.models import Field, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from simple_history.admin import SimpleHistoryAdmin

from . import selectors
from .models import Tenant


def admin_tenant(request: HttpRequest) -> Tenant | None:
    """The tenant whose rows a non-superuser may administer (None: no tenant, so none)."""
    return selectors.tenant_for_user(request.user)


def _is_superuser(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_superuser", False))


def _id_of(field: Field[Any, Any], value: str) -> Any:
    """The id `value` names in `field` (as a URL quotes it), or Http404: "abc" is no row's id."""
    try:
        return field.to_python(unquote(value))
    except (ValidationError, ValueError, TypeError, OverflowError):
        raise Http404("No row with that id.") from None


def _has_nul(request: HttpRequest) -> bool:
    """Whether a NUL is anywhere in the path, the query string or the form: PostgreSQL stores no
    NUL in text, so a lookup with one fails as the query runs, after the admin's own checks."""
    params = [request.GET, request.POST] if request.method == "POST" else [request.GET]
    return "\x00" in request.path or any(
        "\x00" in key or any("\x00" in value for value in values)
        for each in params
        for key, values in each.lists()
    )


class AdminBadInputMiddleware:
    """400 for what no page of the Django admin sends: a NUL anywhere, or a row selected for an
    action by something that is not an id of the model. Django's change list and actions let
    both reach the database (a 500); this covers every registered admin, the libraries' too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any
    ) -> HttpResponse | None:
        match = request.resolver_match
        if match is None or admin.site.name not in match.namespaces:
            return None
        if _has_nul(request):
            return HttpResponseBadRequest("A NUL character is not valid input.")
        model_admin = getattr(view_func, "model_admin", None)
        if model_admin is not None and request.method == "POST":
            pk = model_admin.model._meta.pk
            try:
                for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
                    _id_of(pk, value)
            except Http404:
                return HttpResponseBadRequest("A selected row is not an id.")
        return None


class TenantScopedAdmin(admin.ModelAdmin):
    # The lookup path from the model to its tenant: "tenant", "run__tenant", "membership__tenant".
    tenant_path: str = "tenant"
    # Rows without a tenant are defaults every tenant's admin may read (superusers change them).
    defaults_readable: bool = False

    # --- which rows ------------------------------------------------------------------------

    def own_filter(self, tenant: Tenant) -> Q:
        """The rows of `tenant`."""
        return Q(**{self.tenant_path: tenant})

    def tenant_filter(self, tenant: Tenant) -> Q:
        """The rows a person of `tenant` may see: its own, and the defaults where readable."""
        own = self.own_filter(tenant)
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
    """TenantScopedAdmin for a model with django-simple-history, whose history views find the row
    in its history, past `get_queryset`: an id that is no id is a 404 here (simple-history lets
    it reach the database, a 500), and so is a row, or a version, of another tenant (it answered
    403, which told a tenant's admin the id exists).

    Its "revert to this version" view saves on POST after checking only that the caller may
    *view* the history, so a tenant's admin could otherwise revert a default (or anything it may
    read): a POST there needs the right to change the row."""

    def _history(self) -> Any:
        return getattr(self.model, self.model._meta.simple_history_manager_attribute)

    def _history_visible(self, request: HttpRequest, obj: Any) -> bool:
        if _is_superuser(request):
            return True
        try:
            return self.is_own(request, obj) or self.is_default(obj)
        except ObjectDoesNotExist:  # a version whose tenant is gone
            return False

    def _history_row(self, request: HttpRequest, object_id: str) -> Any:
        """The row whose history is asked for (or its last version, if it was deleted), or 404
        for an id that is no id, a row of no version, or a row the caller may not see."""
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied  # the model is refused whatever the id, as get_object does
        pk = _id_of(self.model._meta.pk, object_id)
        row = self.get_queryset(request).filter(pk=pk).first()
        if row is None:
            last = (
                self._history().filter(**{self.model._meta.pk.attname: pk}).order_by("-history_date").first()
            )
            row = None if last is None else last.instance
        if row is None or not self._history_visible(request, row):
            raise Http404(f"No {self.model._meta.verbose_name} with that id.")
        return row

    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> Any:
        self._history_row(request, object_id)
        return super().history_view(request, object_id, extra_context)

    def history_form_view(
        self, request: HttpRequest, object_id: str, version_id: str, extra_context: Any = None
    ) -> Any:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        pk = _id_of(self.model._meta.pk, object_id)
        history = self._history()
        version = history.filter(
            **{self.model._meta.pk.attname: pk, "history_id": _id_of(history.model._meta.pk, version_id)}
        ).first()
        if version is None or not self._history_visible(request, version.instance):
            raise Http404(f"No version of a {self.model._meta.verbose_name} with that id.")
        if request.method == "POST" and not _is_superuser(request):
            current = self.model._default_manager.filter(pk=pk).first()
            if current is None or not self.has_change_permission(request, current):
                raise PermissionDenied("You may not change this row.")
        return super().history_form_view(request, object_id, version_id, extra_context)
