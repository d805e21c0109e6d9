"""Reads of the compensation catalogue. A tenant's own entry for a tool wins over the default
(the entry without a tenant); every place the engine or the console looks an entry up goes
through here, so a tenant's override is used everywhere or nowhere."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F, Q, QuerySet

from .models import CatalogueEntry


def _for_tenant(tenant_id: int | None) -> QuerySet[CatalogueEntry]:
    """The tenant's own entries and the defaults, the tenant's first for each tool."""
    return CatalogueEntry.objects.filter(Q(tenant_id=tenant_id) | Q(tenant__isnull=True)).order_by(
        "tool", F("tenant_id").asc(nulls_last=True)
    )


def catalogue_entry_for(*, tenant_id: int | None, tool: str) -> CatalogueEntry | None:
    """The entry that governs `tool` for the tenant: its own, else the default, else None."""
    return _for_tenant(tenant_id).filter(tool=tool).first()


def catalogue_for(*, tenant_id: int | None, tools: Iterable[str] | None = None) -> dict[str, CatalogueEntry]:
    """tool → the governing entry for the tenant, for `tools` (every tool when None)."""
    rows = _for_tenant(tenant_id)
    if tools is not None:
        rows = rows.filter(tool__in=list(tools))
    entries: dict[str, CatalogueEntry] = {}
    for entry in rows.select_related("tenant"):
        entries.setdefault(entry.tool, entry)  # the tenant's own row comes first
    return entries
