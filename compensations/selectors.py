"""Reads of the compensation catalogue. A tenant's own entry for a tool wins over the default
(the entry without a tenant: journal.tenancy); every place the engine or the console looks an
entry up goes through here, so a tenant's override is used everywhere or nowhere."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet

from journal.models import Intent, IntentStatus

from .models import CatalogueEntry, Compensation, CompensationStatus, DeadLetter


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


def open_dead_letters_of(run: Any) -> QuerySet[DeadLetter]:
    """The run's dead letters still open: an undo of one of its steps failed and no person has
    resolved it. `run` is a Run, its id or an OuterRef to one; found by the compensations' copy of
    their original's run, one lookup by its index."""
    return DeadLetter.objects.filter(compensation__run=run, resolved_at__isnull=True)


def undo_is_sent(compensation: Compensation | None) -> bool:
    """Whether compensating the run sends an undo for a step whose newest compensation this is:
    none yet, or one still pending. A finished one (done, partial, dead-lettered or not possible)
    is left as it ended; a dead letter is retried from its own page."""
    return compensation is None or compensation.status == CompensationStatus.PENDING


def steps_to_undo(
    intents: Iterable[Intent], *, compensation_intent_ids: set[int], compensations: dict[int, Any]
) -> list[Intent]:
    """The steps "compensate the run" undoes, in the run's order: performed, not an undo itself,
    and not already undone (undo_is_sent). The confirmation lists these, the request records them
    and compensations.services.run_compensate sends by the same rule."""
    return [
        intent
        for intent in intents
        if intent.status == IntentStatus.PERFORMED
        and intent.pk not in compensation_intent_ids
        and undo_is_sent(compensations.get(intent.pk))
    ]
