"""Reads of the sandbox's world that write nothing: key lookups, the ERP's search by business
id, the ledger, and the overview page's tables (each already joined, so the page runs a fixed
number of queries)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from .models import (
    Call,
    CreditMemo,
    Effect,
    FaultRule,
    OrderStatus,
    Provider,
    Refund,
    Reservation,
    Return,
    SentEmail,
    Shipment,
    StockAdjustment,
    Warehouse,
    WarehouseStock,
)

LEDGER_LIMIT = 1000


def effect_for_key(*, provider: str, idempotency_key: str) -> Effect | None:
    """The effect a provider performed under this key, if it performed one."""
    if not idempotency_key:
        return None
    return Effect.objects.filter(provider=provider, idempotency_key=idempotency_key).first()


def erp_adjustments(*, reference: str) -> list[dict[str, Any]]:
    """Every adjustment the ERP booked under a business reference, oldest first, each as the
    receipt the ERP answered when it booked it, with `booked_at`: when the ERP booked it, so a
    caller can tell an adjustment it caused from one that was there before it asked."""
    effects = Effect.objects.filter(
        provider=Provider.ERP, operation="adjust_stock", business_ref=reference
    ).order_by("created_at", "id")
    return [{**effect.receipt, "booked_at": effect.created_at.isoformat()} for effect in effects]


def fault_rules() -> QuerySet[FaultRule]:
    """Live fault rules, in the order calls take them."""
    return FaultRule.objects.filter(remaining__gt=0).order_by("created_at", "id")


def ledger(
    *, provider: str = "", operation: str = "", business_ref: str = "", limit: int = LEDGER_LIMIT
) -> QuerySet[Effect]:
    """Performed effects, newest first."""
    effects = Effect.objects.all()
    if provider:
        effects = effects.filter(provider=provider)
    if operation:
        effects = effects.filter(operation=operation)
    if business_ref:
        effects = effects.filter(business_ref=business_ref)
    return effects.order_by("-created_at", "-id")[:limit]


def calls(
    *, provider: str = "", operation: str = "", target: str = "", limit: int = LEDGER_LIMIT
) -> QuerySet[Call]:
    """Calls the providers answered, newest first."""
    found = Call.objects.all()
    if provider:
        found = found.filter(provider=provider)
    if operation:
        found = found.filter(operation=operation)
    if target:
        found = found.filter(target=target)
    return found.order_by("-at", "-id")[:limit]


def call_as_json(call: Call) -> dict[str, Any]:
    return {
        "id": call.pk,
        "provider": call.provider,
        "operation": call.operation,
        "target": call.target,
        "method": call.method,
        "status": call.status,
        "fault": call.fault,
        "duration_ms": call.duration_ms,
        "at": call.at.isoformat(),
    }


def effect_as_json(effect: Effect) -> dict[str, Any]:
    return {
        "id": effect.pk,
        "provider": effect.provider,
        "operation": effect.operation,
        "idempotency_key": effect.idempotency_key,
        "business_ref": effect.business_ref,
        "request": effect.request,
        "receipt": effect.receipt,
        "created_at": effect.created_at.isoformat(),
        "undoes": effect.undoes_id,
    }


@dataclass(frozen=True)
class Table:
    """One section of the overview page: its rows (newest first, at most `limit`) and how many
    rows the table holds in all."""

    title: str
    count: int
    rows: list[Any]


PAGE_ROWS = 100


def _table(title: str, queryset: QuerySet[Any], *, limit: int = PAGE_ROWS) -> Table:
    return Table(title=title, count=queryset.count(), rows=list(queryset[:limit]))


def world_overview() -> dict[str, Table]:
    return {
        "ledger": _table("Ledger", Effect.objects.select_related("undoes").order_by("-created_at", "-id")),
        "returns": _table("Returns", Return.objects.order_by("-created_at", "-id")),
        "reservations": _table(
            "Reservations", Reservation.objects.select_related("warehouse").order_by("-created_at", "-id")
        ),
        "refunds": _table("Refunds", Refund.objects.order_by("-created_at", "-id")),
        "credit_memos": _table("Credit memos", CreditMemo.objects.order_by("-created_at", "-id")),
        "shipments": _table("Shipments", Shipment.objects.order_by("-created_at", "-id")),
        "emails": _table("Emails sent", SentEmail.objects.order_by("-sent_at", "-id")),
        "adjustments": _table(
            "ERP stock adjustments", StockAdjustment.objects.order_by("-created_at", "-id")
        ),
        "faults": _table("Fault rules", FaultRule.objects.order_by("-created_at", "-id")),
        "warehouses": _table("Warehouses", Warehouse.objects.order_by("code")),
        "stock": _table(
            "Warehouse stock",
            WarehouseStock.objects.select_related("warehouse").order_by("warehouse__code", "sku"),
            limit=500,
        ),
        "orders": _table("Order statuses", OrderStatus.objects.order_by("order_id"), limit=500),
    }
