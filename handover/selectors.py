"""Reads of the run journal, always scoped to one tenant. Each returns a queryset (or row) with
its related rows already joined or prefetched, so a page or response runs a fixed number of
queries however many runs or steps there are."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet

from .models import CustomerMessage, Intent, IntentStatus, Membership, Run, Tenant


def tenant_for_user(user: Any) -> Tenant | None:
    """The tenant a request acts for: an agent token's own, or a staff user's membership."""
    tenant = getattr(user, "tenant", None)
    if tenant is not None:
        return tenant  # an AgentPrincipal
    if not getattr(user, "is_authenticated", False):
        return None
    membership = Membership.objects.select_related("tenant").filter(user=user).first()
    return membership.tenant if membership else None


def runs_for_tenant(
    *, tenant: Tenant, ticket_id: str = "", order_id: str = "", status: str = ""
) -> QuerySet[Run]:
    runs = Run.objects.filter(tenant=tenant).select_related("tenant")
    if ticket_id:
        runs = runs.filter(ticket_id=ticket_id)
    if order_id:
        runs = runs.filter(order_id=order_id)
    if status:
        runs = runs.filter(status=status)
    return runs.order_by("-created_at", "id")


def runs_with_counts(*, tenant: Tenant) -> QuerySet[Run]:
    """Runs with their intent tallies, for lists."""
    return runs_for_tenant(tenant=tenant).annotate(
        intent_count=Count("intents"),
        open_count=Count("intents", filter=Q(intents__status=IntentStatus.INTENDED)),
        performed_count=Count("intents", filter=Q(intents__status=IntentStatus.PERFORMED)),
        failed_count=Count("intents", filter=Q(intents__status=IntentStatus.FAILED)),
    )


def run_get(*, tenant: Tenant, run_id: Any) -> Run | None:
    """One run of this tenant, or None: another tenant's run is indistinguishable from none."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        return None
    return Run.objects.select_related("tenant").filter(tenant=tenant, pk=pk).first()


def run_get_with_journal(*, tenant: Tenant, run_id: Any) -> Run | None:
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        return None
    return (
        Run.objects.select_related("tenant")
        .prefetch_related(
            Prefetch("intents", queryset=Intent.objects.order_by("intended_at", "id")),
            Prefetch("customer_messages", queryset=CustomerMessage.objects.order_by("told_at", "id")),
        )
        .filter(tenant=tenant, pk=pk)
        .first()
    )


def intent_get(*, run: Run, step_id: str) -> Intent | None:
    return Intent.objects.select_related("run", "run__tenant").filter(run=run, step_id=step_id).first()
