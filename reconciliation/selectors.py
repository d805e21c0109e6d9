"""Reads of the reconciliation sweep: which intent rows are in doubt and due to be asked about."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from handover.models import Intent, IntentStatus


def stale_after(tool: str | None = None) -> timedelta:
    """How long an open intent of `tool` may wait, with its run silent, before it is in doubt."""
    by_tool: dict[str, Any] = settings.SEAM_STALE_AFTER_BY_TOOL
    if tool is not None and tool in by_tool:
        return timedelta(seconds=float(by_tool[tool]))
    return timedelta(seconds=float(settings.SEAM_STALE_AFTER_SECONDS))


def _stale_since(cutoff: datetime) -> Q:
    # Both the row and its run's last sign of life must be older than the cutoff: a run that is
    # still heartbeating may have its call in flight right now.
    return Q(intended_at__lt=cutoff) & (
        Q(run__last_heartbeat_at__isnull=True) | Q(run__last_heartbeat_at__lt=cutoff)
    )


def stale_intents(
    *, older_than: timedelta | None = None, run_id: Any = None, now: datetime | None = None
) -> QuerySet[Intent]:
    """Intent rows still `intended` whose run has gone quiet for longer than the threshold and
    that are not waiting out a lookup backoff (or another sweeper's claim), oldest first.

    `older_than` applies to every tool; without it, settings.SEAM_STALE_AFTER_SECONDS applies,
    overridden per tool by settings.SEAM_STALE_AFTER_BY_TOOL. The status and intended_at
    conditions are the partial index intent_open_idx's own, so the scan touches open rows only."""
    now = now or timezone.now()
    if older_than is not None:
        stale = _stale_since(now - older_than)
    else:
        by_tool: dict[str, Any] = settings.SEAM_STALE_AFTER_BY_TOOL
        stale = _stale_since(now - stale_after()) & ~Q(tool__in=list(by_tool))
        for tool in by_tool:
            stale |= Q(tool=tool) & _stale_since(now - stale_after(tool))
        # One range over intended_at that every branch implies, so the index bounds the scan.
        shortest = min([stale_after(), *(stale_after(tool) for tool in by_tool)])
        stale &= Q(intended_at__lt=now - shortest)
    rows = Intent.objects.filter(status=IntentStatus.INTENDED).filter(stale)
    rows = rows.filter(Q(next_lookup_at__isnull=True) | Q(next_lookup_at__lte=now))
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    return rows.select_related("run").order_by("intended_at", "id")
