"""Writes to the sandbox's world: each provider operation (returns, warehouse, payments,
accounting, shipping, email, the legacy ERP), each run through the ledger's `effect_perform`,
which records it and answers a repeated key from the first effect (sandbox/ledger.py)."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from .errors import Conflict, InvalidRequest, UnknownObject
from .ledger import Outcome, effect_perform
from .models import (
    CreditMemo,
    Effect,
    Provider,
    Refund,
    Reservation,
    Return,
    SentEmail,
    Shipment,
    ShipmentStatus,
    StockAdjustment,
    WarehouseStock,
)
from .seeded_world import world_ensure_seeded

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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
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

    return effect_perform(
        provider=Provider.ERP,
        operation="adjust_stock",
        idempotency_key="",
        business_ref=reference,
        request={"sku": sku, "qty": qty, "reference": reference},
        act=act,
    )
