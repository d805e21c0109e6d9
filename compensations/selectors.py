"""Reads of the compensation catalogue. A tenant's own entry for a tool wins over the default
(the entry without a tenant: journal.tenancy); every place the engine or the console looks an
entry up goes through here, so a tenant's override is used everywhere or nowhere."""

from __future__ import annotations

from collections.abc import Iterable

from .models import CatalogueEntry


def catalogue_entry_for(*, tenant_id: int | None, tool: str) -> CatalogueEntry | None:
    """The entry that governs `tool` for the tenant: its own, else the default, else None."""
    entry: CatalogueEntry | None = CatalogueEntry.objects.filter(tool=tool).for_tenant(tenant_id).first()
    return entry


def catalogue_for(*, tenant_id: int | None, tools: Iterable[str] | None = None) -> dict[str, CatalogueEntry]:
    """tool → the governing entry for the tenant, for `tools` (every tool when None)."""
    rows = CatalogueEntry.objects.select_related("tenant")
    if tools is not None:
        rows = rows.filter(tool__in=list(tools))
    entries: dict[str, CatalogueEntry] = rows.governing(tenant_id)
    return entries
