"""Writes to the sandbox's world: each provider operation, the ledger row that records it, the
fault rules, and the seeded reads.

Every keyed write follows one rule (Stripe's): the first request with an idempotency key
performs the effect and records it; a repeat with the same key and the same parameters answers
the recorded receipt and performs nothing; the same key with different parameters, or on a
different operation of the same provider, is a conflict. The effect's ledger row is inserted
first in the effect's own transaction, so the unique key is claimed before anything is touched:
of two identical requests at once, the second waits on the first's insert, fails it, and
replays the winner. The legacy ERP ignores keys, and a repeat performs again."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from .errors import Conflict, InvalidRequest, Unavailable, UnknownObject
from .faults import LOOKUP_OPERATION, UNKNOWN_LOOKUP, Fault
from .models import (
    Call,
    CreditMemo,
    Effect,
    Entitlement,
    FaultRule,
    OrderStatus,
    Provider,
    Refund,
    Reservation,
    Return,
    SentEmail,
    Shipment,
    ShipmentStatus,
    StockAdjustment,
    Warehouse,
    WarehouseStock,
)

# The operations each provider answers, by the names faults and the ledger use.
OPERATIONS: dict[str, frozenset[str]] = {
    Provider.RETURNS: frozenset({"start_return", "cancel_pickup", LOOKUP_OPERATION}),
    Provider.WAREHOUSE: frozenset({"reserve", "release", "stock", LOOKUP_OPERATION}),
    Provider.PAYMENTS: frozenset({"refund", "reverse", LOOKUP_OPERATION}),
    Provider.ACCOUNTING: frozenset({"credit", "reverse_credit", LOOKUP_OPERATION}),
    Provider.SHIPPING: frozenset({"reship", "cancel", LOOKUP_OPERATION}),
    Provider.EMAIL: frozenset({"notify_seller", "notify_customer", LOOKUP_OPERATION}),
    Provider.ERP: frozenset({"adjust_stock", "adjustments"}),
    Provider.ORDERS: frozenset({"status", "entitlement"}),
}
UNKEYED_PROVIDERS = frozenset({Provider.ERP})
MAX_KEY_LENGTH = 255

PICKUP_AFTER = timedelta(days=2)
RECALL_WINDOW = timedelta(hours=2)
RECALL_FEE = Decimal("7.50")
RECALL_FEE_CURRENCY = "GBP"
EMAIL_RECIPIENTS = ("seller", "customer")

_ID_ALPHABET = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"


def _new_id(prefix: str) -> str:
    """A provider-style id: `RL-7K3Q9M2X`. 40 random bits; unique columns catch the rest."""
    return prefix + "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def _new_token_id(prefix: str) -> str:
    """A Stripe-style id: `re_3f9a…`."""
    return prefix + secrets.token_hex(12)


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


# --- the ledger and idempotency ---------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a write came to: the effect (just performed, or the earlier one a replay answers
    from) and whether this request was a replay."""

    effect: Effect
    replayed: bool

    @property
    def receipt(self) -> dict[str, Any]:
        receipt: dict[str, Any] = self.effect.receipt
        return receipt


# An operation's body: given the (already inserted) ledger row, change the provider's state and
# return the receipt and the id of the effect this one undoes, if it is an undo.
Act = Callable[[Effect], tuple[dict[str, Any], int | None]]


def _earlier_effect(*, provider: str, idempotency_key: str) -> Effect | None:
    return Effect.objects.filter(provider=provider, idempotency_key=idempotency_key).first()


def _replay(earlier: Effect, *, operation: str, request: Mapping[str, Any]) -> Outcome:
    if earlier.operation != operation:
        raise Conflict(
            "idempotency_key_reused",
            f"this Idempotency-Key was already used for {earlier.provider}/{earlier.operation}",
            field="Idempotency-Key",
        )
    if earlier.request != dict(request):
        raise Conflict(
            "idempotency_key_mismatch",
            "this Idempotency-Key was already used with different parameters",
            field="Idempotency-Key",
        )
    return Outcome(effect=earlier, replayed=True)


def _perform(
    *,
    provider: str,
    operation: str,
    idempotency_key: str,
    business_ref: str,
    request: Mapping[str, Any],
    act: Act,
) -> Outcome:
    """Run one effect with its ledger row in one durable transaction, honouring the key."""
    keyed = provider not in UNKEYED_PROVIDERS
    key = idempotency_key.strip() if keyed else ""
    if keyed:
        if not key:
            raise InvalidRequest(
                "missing_idempotency_key",
                "every write takes an Idempotency-Key header",
                field="Idempotency-Key",
            )
        if len(key) > MAX_KEY_LENGTH:
            raise InvalidRequest(
                "invalid_idempotency_key",
                f"an Idempotency-Key is at most {MAX_KEY_LENGTH} characters",
                field="Idempotency-Key",
            )
        earlier = _earlier_effect(provider=provider, idempotency_key=key)
        if earlier is not None:
            return _replay(earlier, operation=operation, request=request)
    try:
        with transaction.atomic(durable=True):
            # Claim the key first: a concurrent twin blocks here until this commits, then fails.
            effect = Effect.objects.create(
                provider=provider,
                operation=operation,
                idempotency_key=key,
                business_ref=business_ref,
                request=dict(request),
                receipt={},
            )
            receipt, undoes_id = act(effect)
            effect.receipt = receipt
            effect.undoes_id = undoes_id
            effect.save(update_fields=["receipt", "undoes"])
    except IntegrityError:
        winner = _earlier_effect(provider=provider, idempotency_key=key) if key else None
        if winner is None:
            raise
        return _replay(winner, operation=operation, request=request)
    return Outcome(effect=effect, replayed=False)


# --- returns ----------------------------------------------------------------------------------


def return_start(*, order_id: str, idempotency_key: str) -> Outcome:
    """Generate a return label and book the courier pickup."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        ret = Return.objects.create(
            return_id=_new_id("RET-"),
            label=_new_id("RL-"),
            order_id=order_id,
            pickup_date=timezone.localdate() + PICKUP_AFTER,
            effect=effect,
        )
        receipt = {"return_id": ret.return_id, "label": ret.label, "pickup_date": ret.pickup_date.isoformat()}
        return receipt, None

    return _perform(
        provider=Provider.RETURNS,
        operation="start_return",
        idempotency_key=idempotency_key,
        business_ref=order_id,
        request={"order_id": order_id},
        act=act,
    )


def _locked_return(label: str) -> Return:
    ret = Return.objects.select_for_update().filter(label=label).first()
    if ret is None:
        raise UnknownObject("unknown_label", f"no return with label {label}", field="label")
    return ret


def pickup_cancel(*, label: str, idempotency_key: str) -> Outcome:
    """Cancel a booked courier pickup. Refused once the courier has collected the parcel."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        ret = _locked_return(label)
        if ret.collected_at is not None:
            raise Conflict(
                "already_collected",
                f"the courier collected {label} at {_iso(ret.collected_at)}; the pickup can no longer be cancelled",
                field="label",
            )
        if ret.cancelled_at is not None:
            raise Conflict("already_cancelled", f"the pickup for {label} is already cancelled", field="label")
        ret.cancelled_at = timezone.now()
        ret.save(update_fields=["cancelled_at"])
        return {"label": label, "status": "cancelled"}, ret.effect_id

    return _perform(
        provider=Provider.RETURNS,
        operation="cancel_pickup",
        idempotency_key=idempotency_key,
        business_ref=label,
        request={"label": label},
        act=act,
    )


def parcel_collect(*, label: str) -> Return:
    """Control: the courier collected the parcel. Collecting twice changes nothing."""
    with transaction.atomic():
        ret = _locked_return(label)
        if ret.cancelled_at is not None:
            raise Conflict("pickup_cancelled", f"the pickup for {label} was cancelled", field="label")
        if ret.collected_at is None:
            ret.collected_at = timezone.now()
            ret.save(update_fields=["collected_at"])
    return ret


# --- warehouse --------------------------------------------------------------------------------


def reservation_create(*, order_id: str, sku: str, qty: int, idempotency_key: str) -> Outcome:
    """Reserve `qty` units of `sku` at the warehouse with the most of it free (ties by code)."""
    world_ensure_seeded()

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        stock = (
            WarehouseStock.objects.select_for_update(of=("self",))
            .select_related("warehouse")
            .filter(sku=sku, available__gte=qty)
            .order_by("-available", "warehouse__code")
            .first()
        )
        if stock is None:
            raise Conflict("insufficient_stock", f"no warehouse has {qty} x {sku} free", field="qty")
        stock.available -= qty
        stock.save(update_fields=["available"])
        reservation = Reservation.objects.create(
            reservation_id=_new_id("RSV-"),
            order_id=order_id,
            sku=sku,
            qty=qty,
            warehouse=stock.warehouse,
            effect=effect,
        )
        return {"reservation_id": reservation.reservation_id, "warehouse": stock.warehouse.code}, None

    return _perform(
        provider=Provider.WAREHOUSE,
        operation="reserve",
        idempotency_key=idempotency_key,
        business_ref=order_id,
        request={"order_id": order_id, "sku": sku, "qty": qty},
        act=act,
    )


def reservation_release(*, reservation_id: str, idempotency_key: str) -> Outcome:
    """Release a reservation; its units are free again."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        reservation = Reservation.objects.select_for_update().filter(reservation_id=reservation_id).first()
        if reservation is None:
            raise UnknownObject(
                "unknown_reservation", f"no reservation {reservation_id}", field="reservation_id"
            )
        if reservation.released_at is not None:
            raise Conflict(
                "already_released",
                f"reservation {reservation_id} is already released",
                field="reservation_id",
            )
        reservation.released_at = timezone.now()
        reservation.save(update_fields=["released_at"])
        WarehouseStock.objects.filter(warehouse_id=reservation.warehouse_id, sku=reservation.sku).update(
            available=F("available") + reservation.qty
        )
        return {"reservation_id": reservation_id, "status": "released"}, reservation.effect_id

    return _perform(
        provider=Provider.WAREHOUSE,
        operation="release",
        idempotency_key=idempotency_key,
        business_ref=reservation_id,
        request={"reservation_id": reservation_id},
        act=act,
    )


# --- payments ---------------------------------------------------------------------------------


def refund_create(*, order_id: str, amount: Decimal, currency: str, idempotency_key: str) -> Outcome:
    """Refund money to the buyer of an order."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        refund = Refund.objects.create(
            refund_id=_new_token_id("re_"), order_id=order_id, amount=amount, currency=currency, effect=effect
        )
        return {"refund_id": refund.refund_id, "amount": str(amount), "currency": currency}, None

    return _perform(
        provider=Provider.PAYMENTS,
        operation="refund",
        idempotency_key=idempotency_key,
        business_ref=order_id,
        request={"order_id": order_id, "amount": str(amount), "currency": currency},
        act=act,
    )


def refund_reverse(*, refund_id: str, idempotency_key: str) -> Outcome:
    """Reverse a refund (once)."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        refund = Refund.objects.select_for_update().filter(refund_id=refund_id).first()
        if refund is None:
            raise UnknownObject("unknown_refund", f"no refund {refund_id}", field="refund_id")
        if refund.reversed_at is not None:
            raise Conflict("already_reversed", f"refund {refund_id} is already reversed", field="refund_id")
        refund.reversal_id = _new_token_id("rev_")
        refund.reversed_at = timezone.now()
        refund.save(update_fields=["reversal_id", "reversed_at"])
        receipt = {"refund_id": refund_id, "reversal_id": refund.reversal_id, "status": "reversed"}
        return receipt, refund.effect_id

    return _perform(
        provider=Provider.PAYMENTS,
        operation="reverse",
        idempotency_key=idempotency_key,
        business_ref=refund_id,
        request={"refund_id": refund_id},
        act=act,
    )


# --- accounting -------------------------------------------------------------------------------


def credit_memo_create(*, order_id: str, amount: Decimal, idempotency_key: str) -> Outcome:
    """Issue a credit memo against an order."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        memo = CreditMemo.objects.create(
            credit_memo_id=_new_id("CM-"), order_id=order_id, amount=amount, effect=effect
        )
        return {"credit_memo_id": memo.credit_memo_id, "amount": str(amount)}, None

    return _perform(
        provider=Provider.ACCOUNTING,
        operation="credit",
        idempotency_key=idempotency_key,
        business_ref=order_id,
        request={"order_id": order_id, "amount": str(amount)},
        act=act,
    )


def credit_memo_reverse(*, credit_memo_id: str, idempotency_key: str) -> Outcome:
    """Reverse a credit memo with an accounting entry (once)."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        memo = CreditMemo.objects.select_for_update().filter(credit_memo_id=credit_memo_id).first()
        if memo is None:
            raise UnknownObject(
                "unknown_credit_memo", f"no credit memo {credit_memo_id}", field="credit_memo_id"
            )
        if memo.reversed_at is not None:
            raise Conflict(
                "already_reversed",
                f"credit memo {credit_memo_id} is already reversed",
                field="credit_memo_id",
            )
        memo.reversed_at = timezone.now()
        memo.save(update_fields=["reversed_at"])
        return {"credit_memo_id": credit_memo_id, "status": "reversed"}, memo.effect_id

    return _perform(
        provider=Provider.ACCOUNTING,
        operation="reverse_credit",
        idempotency_key=idempotency_key,
        business_ref=credit_memo_id,
        request={"credit_memo_id": credit_memo_id},
        act=act,
    )


# --- shipping ---------------------------------------------------------------------------------


def shipment_create(*, order_id: str, sku: str, qty: int, idempotency_key: str) -> Outcome:
    """Ship replacement units. They can be cancelled free until the recall cutoff."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        shipment = Shipment.objects.create(
            shipment_id=_new_id("SH-"),
            order_id=order_id,
            sku=sku,
            qty=qty,
            recall_cutoff=timezone.now() + RECALL_WINDOW,
            effect=effect,
        )
        return {"shipment_id": shipment.shipment_id, "recall_cutoff": _iso(shipment.recall_cutoff)}, None

    return _perform(
        provider=Provider.SHIPPING,
        operation="reship",
        idempotency_key=idempotency_key,
        business_ref=order_id,
        request={"order_id": order_id, "sku": sku, "qty": qty},
        act=act,
    )


def _locked_shipment(shipment_id: str) -> Shipment:
    shipment = Shipment.objects.select_for_update().filter(shipment_id=shipment_id).first()
    if shipment is None:
        raise UnknownObject("unknown_shipment", f"no shipment {shipment_id}", field="shipment_id")
    return shipment


def shipment_cancel(*, shipment_id: str, idempotency_key: str) -> Outcome:
    """Cancel a shipment: complete and free before its recall cutoff; after it, the parcel is
    recalled at a fee (a partial undo)."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        shipment = _locked_shipment(shipment_id)
        if shipment.status != ShipmentStatus.SHIPPED:
            raise Conflict(
                f"already_{shipment.status}",
                f"shipment {shipment_id} is already {shipment.status}",
                field="shipment_id",
            )
        now = timezone.now()
        shipment.cancelled_at = now
        receipt: dict[str, Any] = {"shipment_id": shipment_id}
        if now < shipment.recall_cutoff:
            shipment.status = ShipmentStatus.CANCELLED
            receipt["status"] = "cancelled"
        else:
            shipment.status = ShipmentStatus.RECALLED
            shipment.recall_fee = RECALL_FEE
            receipt.update(status="recalled", recall_fee=str(RECALL_FEE), currency=RECALL_FEE_CURRENCY)
        shipment.save(update_fields=["status", "recall_fee", "cancelled_at"])
        return receipt, shipment.effect_id

    return _perform(
        provider=Provider.SHIPPING,
        operation="cancel",
        idempotency_key=idempotency_key,
        business_ref=shipment_id,
        request={"shipment_id": shipment_id},
        act=act,
    )


def shipment_advance(*, shipment_id: str) -> Shipment:
    """Control: time passes for a shipment, to just past its recall cutoff."""
    with transaction.atomic():
        shipment = _locked_shipment(shipment_id)
        now = timezone.now()
        if shipment.recall_cutoff > now:
            shipment.recall_cutoff = now
            shipment.save(update_fields=["recall_cutoff"])
    return shipment


# --- email ------------------------------------------------------------------------------------


def email_send(*, recipient: str, order_id: str, template: str, idempotency_key: str) -> Outcome:
    """Email an order's seller or customer. There is no undo: email cannot be unsent."""
    if recipient not in EMAIL_RECIPIENTS:
        raise InvalidRequest("invalid_recipient", f"recipient must be one of {EMAIL_RECIPIENTS}")

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        email = SentEmail.objects.create(
            message_id=_new_token_id("msg_"),
            recipient=recipient,
            order_id=order_id,
            template=template,
            effect=effect,
        )
        return {"message_id": email.message_id}, None

    return _perform(
        provider=Provider.EMAIL,
        operation=f"notify_{recipient}",
        idempotency_key=idempotency_key,
        business_ref=order_id,
        request={"order_id": order_id, "template": template},
        act=act,
    )


# --- the legacy ERP ---------------------------------------------------------------------------


def stock_adjust(*, sku: str, qty: int, reference: str) -> Outcome:
    """Book a stock adjustment in the ERP. No key: every call books another adjustment."""

    def act(effect: Effect) -> tuple[dict[str, Any], int | None]:
        adjustment = StockAdjustment.objects.create(
            adjustment_id=_new_id("ADJ-"), sku=sku, qty=qty, reference=reference, effect=effect
        )
        return {
            "adjustment_id": adjustment.adjustment_id,
            "sku": sku,
            "qty": qty,
            "reference": reference,
        }, None

    return _perform(
        provider=Provider.ERP,
        operation="adjust_stock",
        idempotency_key="",
        business_ref=reference,
        request={"sku": sku, "qty": qty, "reference": reference},
        act=act,
    )


# --- seeded reads -----------------------------------------------------------------------------

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


def call_record(
    *,
    provider: str,
    operation: str,
    target: str,
    method: str,
    status: int | None,
    fault: str,
    duration_ms: int,
) -> Call:
    """Log one call a provider endpoint answered (or hung up on)."""
    return Call.objects.create(
        provider=provider,
        operation=operation,
        target=target[:200],
        method=method,
        status=status,
        fault=fault,
        duration_ms=duration_ms,
        at=timezone.now(),
    )


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


# --- faults -----------------------------------------------------------------------------------


def _check_operation(provider: str, operation: str) -> None:
    if provider not in OPERATIONS:
        raise InvalidRequest(
            "unknown_provider", f"provider must be one of {', '.join(sorted(OPERATIONS))}", field="provider"
        )
    if operation and operation not in OPERATIONS[provider]:
        raise InvalidRequest(
            "unknown_operation",
            f"{provider} has no operation {operation!r}; it has {', '.join(sorted(OPERATIONS[provider]))}",
            field="operation",
        )


def fault_rule_create(*, provider: str, operation: str, fault: str, remaining: int) -> FaultRule:
    """Inject `fault` into the next `remaining` calls of `provider`/`operation` (every operation
    of the provider when `operation` is blank)."""
    _check_operation(provider, operation)
    parsed = Fault.parse(fault)
    if parsed.kind == UNKNOWN_LOOKUP and operation not in ("", LOOKUP_OPERATION):
        raise InvalidRequest(
            "invalid_fault", "unknown_lookup applies only to the lookup operation", field="fault"
        )
    if remaining < 1:
        raise InvalidRequest("invalid_remaining", "remaining must be at least 1", field="remaining")
    return FaultRule.objects.create(
        provider=provider, operation=operation, fault=str(parsed), remaining=remaining
    )


def fault_rules_clear() -> int:
    deleted, _ = FaultRule.objects.all().delete()
    return deleted


def fault_claim(*, provider: str, operation: str) -> Fault | None:
    """Take one use of the oldest live rule for this call, if any. The decrement is a
    compare-and-swap, so two calls at once never both take a rule's last use."""
    rules = FaultRule.objects.filter(provider=provider, operation__in=(operation, ""), remaining__gt=0)
    if operation != LOOKUP_OPERATION:
        rules = rules.exclude(fault=UNKNOWN_LOOKUP)
    for rule in rules.order_by("created_at", "id")[:20]:
        taken = FaultRule.objects.filter(pk=rule.pk, remaining__gt=0).update(remaining=F("remaining") - 1)
        if taken == 1:
            FaultRule.objects.filter(pk=rule.pk, remaining=0).delete()
            return Fault.parse(rule.fault)
    return None
