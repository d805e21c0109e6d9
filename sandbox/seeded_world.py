"""The sandbox's seeded world and what reads and configures it: warehouses with their stock (read
as slowly and unreliably as each is configured to answer), orders with their status, and what
each order's contract allows (entitlements). Seeded where missing (`world_seed`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from django.db import transaction
from django.utils import timezone

from .errors import InvalidRequest, Unavailable, UnknownObject
from .models import Entitlement, OrderStatus, Warehouse, WarehouseStock

# (code, name, latency_ms, fail_every): one fast, one failing every other read, one slow.
SEED_WAREHOUSES = [
    ("LDS-2", "Leeds", 0, 0),
    ("MAN-1", "Manchester", 0, 2),
    ("BRS-3", "Bristol", 300, 0),
]
# (warehouse, sku, available, restock in days or None)
SEED_STOCK = [
    ("LDS-2", "OAK-BENCH", 12, None),
    ("MAN-1", "OAK-BENCH", 3, None),
    ("BRS-3", "OAK-BENCH", 0, 10),
    ("LDS-2", "SKU-4471", 40, None),
    ("MAN-1", "SKU-4471", 25, None),
    ("BRS-3", "SKU-4471", 8, None),
    ("LDS-2", "WALNUT-SHELF", 0, 7),
    ("MAN-1", "WALNUT-SHELF", 5, None),
    ("BRS-3", "WALNUT-SHELF", 2, None),
    ("LDS-2", "SKU-1001", 500, None),
    ("MAN-1", "SKU-1001", 500, None),
    ("BRS-3", "SKU-1001", 500, None),
]
# (order_id, status, carrier, eta in days or None)
SEED_ORDERS = [
    ("SU-90317", "delivered", "DPD", None),
    ("SU-88410", "delivered", "Royal Mail", None),
    ("SU-90502", "shipped", "Royal Mail", 1),
    ("SU-10001", "processing", "", 3),
    ("SU-77120", "cancelled", "", None),
    # The scripted tickets' orders (scenarios/tickets.py).
    ("SU-90611", "delivered", "DPD", None),
    ("SU-90720", "delivered", "DHL Express", None),
    ("SU-90833", "processing", "", 4),
    ("SU-90941", "shipped", "Evri", 2),
    ("SU-91050", "delivered", "Royal Mail", None),
]

# (order_id, remedies the contract allows, need-by in days or None, clause)
SEED_ENTITLEMENTS = [
    ("SU-90317", ["reship", "credit", "refund"], None, "standard terms 4.1"),
    ("SU-88410", ["reship", "credit"], 5, "trade terms 7.2: shortages made good by reship or credit"),
    ("SU-90502", ["refund"], None, "standard terms 4.1"),
    ("SU-10001", ["refund"], None, "standard terms 4.1"),
    ("SU-77120", [], None, "cancelled orders carry no remedy"),
    ("SU-90611", ["credit", "refund"], None, "standard terms 4.3: damage in transit"),
    ("SU-90720", ["refund"], None, "standard terms 4.1"),
    ("SU-90833", ["refund"], None, "standard terms 4.1"),
    ("SU-90941", ["reship", "refund"], None, "standard terms 4.1"),
    ("SU-91050", ["credit"], None, "trade terms 7.2"),
]


def world_seed() -> None:
    """Create the seeded warehouses, stock and orders that are missing. Harmless to run twice,
    or twice at once."""
    today = timezone.localdate()

    def in_days(days: int | None) -> date | None:
        return None if days is None else today + timedelta(days=days)

    with transaction.atomic():
        Warehouse.objects.bulk_create(
            [
                Warehouse(code=code, name=name, latency_ms=latency, fail_every=fail_every)
                for code, name, latency, fail_every in SEED_WAREHOUSES
            ],
            ignore_conflicts=True,
        )
        warehouses = {w.code: w for w in Warehouse.objects.filter(code__in=[w[0] for w in SEED_WAREHOUSES])}
        WarehouseStock.objects.bulk_create(
            [
                WarehouseStock(
                    warehouse=warehouses[code], sku=sku, available=available, restock_date=in_days(restock)
                )
                for code, sku, available, restock in SEED_STOCK
            ],
            ignore_conflicts=True,
        )
        OrderStatus.objects.bulk_create(
            [
                OrderStatus(order_id=order_id, status=status, carrier=carrier, eta=in_days(eta))
                for order_id, status, carrier, eta in SEED_ORDERS
            ],
            ignore_conflicts=True,
        )
        Entitlement.objects.bulk_create(
            [
                Entitlement(order_id=order_id, remedies=remedies, need_by=in_days(need_by), clause=clause)
                for order_id, remedies, need_by, clause in SEED_ENTITLEMENTS
            ],
            ignore_conflicts=True,
        )


def world_ensure_seeded() -> None:
    """Seed a world that has no warehouses yet: a fresh database, or one a test suite emptied."""
    if not Warehouse.objects.exists():
        world_seed()


def order_status_read(*, order_id: str) -> OrderStatus:
    world_ensure_seeded()
    order = OrderStatus.objects.filter(order_id=order_id).first()
    if order is None:
        raise UnknownObject("unknown_order", f"no order {order_id}", field="order_id")
    return order


@dataclass(frozen=True)
class StockLevel:
    warehouse: str
    sku: str
    available: int
    restock_date: date | None


def warehouse_stock_read(*, code: str, sku: str) -> StockLevel:
    """Read one warehouse's stock of a SKU, as slowly and as unreliably as that warehouse is
    configured to answer: every read counts, and every `fail_every`-th one fails with 503."""
    world_ensure_seeded()
    with transaction.atomic():
        warehouse = Warehouse.objects.select_for_update().filter(code=code).first()
        if warehouse is None:
            raise UnknownObject("unknown_warehouse", f"no warehouse {code}", field="warehouse")
        warehouse.reads += 1
        warehouse.save(update_fields=["reads"])
    if warehouse.latency_ms:
        time.sleep(warehouse.latency_ms / 1000)
    if warehouse.fail_every and warehouse.reads % warehouse.fail_every == 0:
        raise Unavailable(
            "warehouse_unavailable", f"warehouse {code} did not answer (read {warehouse.reads})"
        )
    stock = WarehouseStock.objects.filter(warehouse=warehouse, sku=sku).first()
    if stock is None:
        return StockLevel(warehouse=code, sku=sku, available=0, restock_date=None)
    return StockLevel(warehouse=code, sku=sku, available=stock.available, restock_date=stock.restock_date)


@dataclass(frozen=True)
class EntitlementTerms:
    order_id: str
    remedies: list[str]
    need_by: date | None
    clause: str


REMEDIES = ("reship", "credit", "refund")


def entitlement_read(*, order_id: str) -> EntitlementTerms:
    """Which remedies an order's contract allows and by when the buyer needs the goods. A known
    order with nothing on file allows no remedy."""
    order = order_status_read(order_id=order_id)
    terms = Entitlement.objects.filter(order_id=order.order_id).first()
    if terms is None:
        return EntitlementTerms(order_id=order_id, remedies=[], need_by=None, clause="no entitlement on file")
    return EntitlementTerms(
        order_id=order_id, remedies=sorted(terms.remedies), need_by=terms.need_by, clause=terms.clause
    )


def entitlement_configure(
    *,
    order_id: str,
    remedies: list[str] | None = None,
    need_by: date | None = None,
    clear_need_by: bool = False,
    clause: str | None = None,
) -> Entitlement:
    """Control: change what an order's contract allows."""
    order = order_status_read(order_id=order_id)
    unknown = sorted(set(remedies or ()) - set(REMEDIES))
    if unknown:
        raise InvalidRequest(
            "invalid_remedy", f"unknown remedy {unknown[0]!r}; one of {REMEDIES}", field="remedies"
        )
    with transaction.atomic():
        terms, _ = Entitlement.objects.select_for_update().get_or_create(order_id=order.order_id)
        if remedies is not None:
            terms.remedies = sorted(set(remedies))
        if need_by is not None or clear_need_by:
            terms.need_by = need_by
        if clause is not None:
            terms.clause = clause
        terms.save()
    return terms


def warehouse_configure(
    *,
    code: str,
    latency_ms: int | None = None,
    fail_every: int | None = None,
    stock: Mapping[str, int] | None = None,
) -> Warehouse:
    """Control: change how a warehouse's reads behave, and set its free stock of some SKUs.
    Setting `fail_every` restarts the read count, so the failure pattern starts afresh."""
    world_ensure_seeded()
    with transaction.atomic():
        warehouse = Warehouse.objects.select_for_update().filter(code=code).first()
        if warehouse is None:
            raise UnknownObject("unknown_warehouse", f"no warehouse {code}", field="warehouse")
        if latency_ms is not None:
            warehouse.latency_ms = latency_ms
        if fail_every is not None:
            warehouse.fail_every = fail_every
            warehouse.reads = 0
        warehouse.save(update_fields=["latency_ms", "fail_every", "reads"])
        for sku, available in (stock or {}).items():
            WarehouseStock.objects.update_or_create(
                warehouse=warehouse, sku=sku, defaults={"available": available}
            )
    return warehouse
