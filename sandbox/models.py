"""The sandbox's world: stand-ins for the systems agents change, each keeping its own state, and
the ledger of every effect they actually performed.

Only the sandbox's own modules write these tables (services, through the ledger; seeded_world;
endpoint_calls), on behalf of requests to the sandbox's HTTP API (`manage.py runsandbox`). Seam never writes them; tests read them as the truth about the world."""

from __future__ import annotations

import json

from django.db import models
from django.db.models import Q


class Provider(models.TextChoices):
    RETURNS = "returns", "Returns"
    WAREHOUSE = "warehouse", "Warehouse"
    PAYMENTS = "payments", "Payments"
    ACCOUNTING = "accounting", "Accounting"
    SHIPPING = "shipping", "Shipping"
    EMAIL = "email", "Email"
    ERP = "erp", "ERP (legacy)"
    ORDERS = "orders", "Orders"


class Effect(models.Model):
    """One effect a provider actually performed, written in the same transaction as the change
    to the provider's state: a label booked, stock reserved, money refunded, a pickup cancelled.
    A request that was refused, failed before acting, or was answered from an earlier effect
    (an idempotent replay) writes no row. `undoes` points at the effect an undo operation undid.

    A non-blank idempotency key names at most one effect per provider: that is what makes a
    repeat a replay, and what `<provider>/lookup/<key>` answers about. The legacy ERP ignores
    keys, so its rows carry none and a repeat is a second row."""

    provider = models.CharField(max_length=20, choices=Provider.choices)
    operation = models.CharField(max_length=40)
    idempotency_key = models.CharField(max_length=255, blank=True)
    business_ref = models.CharField(
        max_length=200, blank=True, help_text="The business object acted on: order id, label, refund id…"
    )
    request = models.JSONField(help_text="The request's parameters, normalised (amounts as 2-dp strings).")
    receipt = models.JSONField(help_text="What the provider answered; a replay answers exactly this.")
    created_at = models.DateTimeField(auto_now_add=True)
    undoes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="undone_by"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="sandbox_effect_one_per_key",
            )
        ]
        indexes = [models.Index(fields=["provider", "business_ref"], name="sandbox_effect_ref_idx")]

    def __str__(self) -> str:
        return f"{self.provider}/{self.operation} {self.business_ref}"

    @property
    def request_json(self) -> str:
        return json.dumps(self.request, sort_keys=True)

    @property
    def receipt_json(self) -> str:
        return json.dumps(self.receipt, sort_keys=True)


class Return(models.Model):
    """A return the returns provider started for an order: a label and a booked courier pickup.
    The pickup can be cancelled until the courier collects the parcel (`collected_at`, set by the
    control endpoint `returns/collect`); after that it cannot."""

    return_id = models.CharField(max_length=40, unique=True)
    label = models.CharField(max_length=40, unique=True)
    order_id = models.CharField(max_length=100)
    pickup_date = models.DateField()
    effect = models.OneToOneField(Effect, on_delete=models.PROTECT, related_name="+")
    collected_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.label

    @property
    def collected(self) -> bool:
        return self.collected_at is not None

    @property
    def cancelled(self) -> bool:
        return self.cancelled_at is not None


class Warehouse(models.Model):
    """A warehouse the warehouse provider runs, with how its stock reads behave: each read waits
    `latency_ms`, and every `fail_every`-th read (counted in `reads`) answers 503; 0 never fails.
    Seeded (sandbox.seeded_world.world_seed); changed by `warehouse/<code>/configure`."""

    code = models.CharField(max_length=10, unique=True)
    name = models.CharField(max_length=100)
    latency_ms = models.PositiveIntegerField(default=0)
    fail_every = models.PositiveIntegerField(default=0)
    reads = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["code"]

    def __str__(self) -> str:
        return self.code


class WarehouseStock(models.Model):
    """How many units of a SKU a warehouse has free. Seeded; a reservation takes units and a
    release gives them back."""

    warehouse = models.ForeignKey(Warehouse, on_delete=models.CASCADE, related_name="stock")
    sku = models.CharField(max_length=40)
    available = models.IntegerField(default=0)
    restock_date = models.DateField(null=True, blank=True)

    class Meta:
        ordering = ["warehouse__code", "sku"]
        constraints = [
            models.UniqueConstraint(fields=["warehouse", "sku"], name="sandbox_stock_one_per_sku"),
        ]

    def __str__(self) -> str:
        return f"{self.sku} @ {self.warehouse_id}"


class Reservation(models.Model):
    """Stock the warehouse provider set aside for an order (the tool `offer_replacement`), until
    released."""

    reservation_id = models.CharField(max_length=40, unique=True)
    order_id = models.CharField(max_length=100)
    sku = models.CharField(max_length=40)
    qty = models.PositiveIntegerField()
    warehouse = models.ForeignKey(Warehouse, on_delete=models.PROTECT, related_name="reservations")
    effect = models.OneToOneField(Effect, on_delete=models.PROTECT, related_name="+")
    released_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.reservation_id

    @property
    def released(self) -> bool:
        return self.released_at is not None


class Refund(models.Model):
    """Money the payments provider refunded to a buyer; reversible once (`reversal_id`)."""

    refund_id = models.CharField(max_length=40, unique=True)
    order_id = models.CharField(max_length=100)
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    currency = models.CharField(max_length=3)
    effect = models.OneToOneField(Effect, on_delete=models.PROTECT, related_name="+")
    reversal_id = models.CharField(max_length=40, blank=True)
    reversed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.refund_id

    @property
    def reversed(self) -> bool:
        return self.reversed_at is not None


class CreditMemo(models.Model):
    """A credit memo the accounting provider issued against an order; reversible once by an
    accounting entry."""

    credit_memo_id = models.CharField(max_length=40, unique=True)
    order_id = models.CharField(max_length=100)
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    effect = models.OneToOneField(Effect, on_delete=models.PROTECT, related_name="+")
    reversed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.credit_memo_id

    @property
    def reversed(self) -> bool:
        return self.reversed_at is not None


class ShipmentStatus(models.TextChoices):
    SHIPPED = "shipped", "Shipped"
    CANCELLED = "cancelled", "Cancelled"
    RECALLED = "recalled", "Recalled (after the cutoff, at a fee)"


class Shipment(models.Model):
    """Units the shipping provider sent. Cancelling before `recall_cutoff` is free and complete;
    after it the carrier can only recall the parcel, at `recall_fee` (a partial undo).
    `shipping/advance` moves the cutoff into the past."""

    shipment_id = models.CharField(max_length=40, unique=True)
    order_id = models.CharField(max_length=100)
    sku = models.CharField(max_length=40)
    qty = models.PositiveIntegerField()
    recall_cutoff = models.DateTimeField()
    status = models.CharField(max_length=20, choices=ShipmentStatus.choices, default=ShipmentStatus.SHIPPED)
    recall_fee = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    effect = models.OneToOneField(Effect, on_delete=models.PROTECT, related_name="+")
    cancelled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.shipment_id


class SentEmail(models.Model):
    """An email the email provider sent to an order's seller or customer. It cannot be unsent."""

    message_id = models.CharField(max_length=40, unique=True)
    recipient = models.CharField(max_length=20)  # "seller" or "customer"
    order_id = models.CharField(max_length=100)
    template = models.CharField(max_length=100)
    effect = models.OneToOneField(Effect, on_delete=models.PROTECT, related_name="+")
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at", "-id"]

    def __str__(self) -> str:
        return self.message_id


class StockAdjustment(models.Model):
    """A stock adjustment booked in the legacy ERP. The ERP ignores idempotency keys, so the
    same request twice books two of these; `reference` (a business id) is how callers find them."""

    adjustment_id = models.CharField(max_length=40, unique=True)
    sku = models.CharField(max_length=40)
    qty = models.IntegerField()
    reference = models.CharField(max_length=100, db_index=True)
    effect = models.OneToOneField(Effect, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.adjustment_id


class OrderStatus(models.Model):
    """What the order system says about an order, for `orders/<order_id>/status`. Seeded; no
    write operation changes it."""

    order_id = models.CharField(max_length=100, unique=True)
    status = models.CharField(max_length=40)
    carrier = models.CharField(max_length=40, blank=True)
    eta = models.DateField(null=True, blank=True)

    class Meta:
        ordering = ["order_id"]
        verbose_name_plural = "order statuses"

    def __str__(self) -> str:
        return f"{self.order_id}: {self.status}"


class FaultRule(models.Model):
    """A fault to inject into the next `remaining` calls of a provider's operation (all of its
    operations when `operation` is blank). Each call that takes the fault decrements `remaining`;
    a spent rule is deleted. Written by `POST faults/`, cleared by `DELETE faults/`."""

    provider = models.CharField(max_length=20, choices=Provider.choices)
    operation = models.CharField(max_length=40, blank=True)
    fault = models.CharField(max_length=40)
    remaining = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.fault} on {self.provider}/{self.operation or '*'} x{self.remaining}"


class Entitlement(models.Model):
    """What the order's contract allows as a remedy (`remedies`: any of "reship", "credit",
    "refund"), by when the buyer needs the goods (`need_by`, or none), and the clause that says
    so. Read by `orders/<order_id>/entitlement`; seeded, and changed only by the control endpoint
    `orders/<order_id>/entitlement/configure`."""

    order_id = models.CharField(max_length=100, unique=True)
    remedies = models.JSONField(default=list)
    need_by = models.DateField(null=True, blank=True)
    clause = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["order_id"]

    def __str__(self) -> str:
        return f"{self.order_id}: {', '.join(self.remedies) or 'no remedy'}"


class Call(models.Model):
    """One call a provider endpoint answered, refused, delayed or hung up on — reads included,
    which the ledger (effects only) does not show. Written by the endpoint after its answer is
    decided; `status` is null when the connection was dropped without an answer. Tests read it
    to prove what was sent (and what was never sent)."""

    provider = models.CharField(max_length=20, choices=Provider.choices)
    operation = models.CharField(max_length=40)
    target = models.CharField(
        max_length=200, blank=True, help_text="The path's object: warehouse, order, key."
    )
    method = models.CharField(max_length=10)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    fault = models.CharField(max_length=40, blank=True)
    duration_ms = models.PositiveIntegerField()
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["provider", "operation", "-at"], name="sandbox_call_op_idx")]

    def __str__(self) -> str:
        return f"{self.method} {self.provider}/{self.operation} {self.target} -> {self.status}"
