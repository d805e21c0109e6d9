"""The tenant's own row, else the default: the one rule for settings that every tenant inherits
and any tenant may override (the compensation catalogue's entries, the task policies).

A model of such rows subclasses `TenantOrDefault` and names its key (`tenant_key`, e.g. "tool"):
a row without a tenant is the default for every tenant; a tenant's own row for the same key is
used instead of it for that tenant's runs. `tenant_or_default_constraints` keeps one row per
tenant and key, and one default per key; `TenantOrDefaultQuerySet` reads them (`for_tenant`,
`governing`, `defaults`), and `default_row` names the default when seeding one."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models
from django.db.models import F, Q

from .models import Tenant


class TenantOrDefaultQuerySet[Row: "TenantOrDefault"](models.QuerySet[Row]):
    def defaults(self) -> TenantOrDefaultQuerySet[Row]:
        """The defaults: the rows of no tenant."""
        return self.filter(tenant__isnull=True)

    def for_tenant(self, tenant_id: int | None) -> TenantOrDefaultQuerySet[Row]:
        """The tenant's own rows and the defaults, by key, the tenant's own first for each key
        (so `.filter(<key>=...).first()` is the row that governs that key for the tenant)."""
        return self.filter(Q(tenant_id=tenant_id) | Q(tenant__isnull=True)).order_by(
            self.model.tenant_key, F("tenant_id").asc(nulls_last=True)
        )

    def governing(self, tenant_id: int | None) -> dict[str, Row]:
        """key → the row that governs it for the tenant: its own, else the default."""
        rows: dict[str, Row] = {}
        for row in self.for_tenant(tenant_id):
            rows.setdefault(getattr(row, self.model.tenant_key), row)
        return rows


class TenantOrDefault(models.Model):
    """A row that is either one tenant's own (`tenant` set) or the default for every tenant
    (`tenant` blank), one of each per key (`tenant_key`)."""

    tenant = models.ForeignKey(
        Tenant,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Blank: the default for every tenant (superusers only). A tenant's own row is used "
        "instead of the default for that tenant's runs.",
    )

    # The field a tenant's row overrides the default by, e.g. "tool", "task_type".
    tenant_key: ClassVar[str]

    objects: Any = TenantOrDefaultQuerySet.as_manager()

    class Meta:
        abstract = True


def tenant_or_default_constraints(key: str, *, per_tenant: str, default: str) -> list[models.BaseConstraint]:
    """One row per tenant and key (`per_tenant` names the constraint), and one default per key
    (`default`)."""
    return [
        models.UniqueConstraint(fields=["tenant", key], name=per_tenant),
        models.UniqueConstraint(fields=[key], condition=Q(tenant__isnull=True), name=default),
    ]


def default_row(model: Any) -> dict[str, Any]:
    """The lookup of a default row of `model` ({"tenant": None}), for a seeder. A migration's
    historical model from before tenants had rows of their own has no tenant column: {} there."""
    return {"tenant": None} if "tenant" in {f.name for f in model._meta.fields} else {}
