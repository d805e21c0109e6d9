"""The tools of the sandbox's providers (docs/sandbox.md), as a deployment would declare its
real ones: HTTP connectors configured per tool, arguments described by JSON Schema. Part of the
demo: the local settings list this module in SEAM_TOOL_MODULES (tests opt in with the
`sandbox_tools` fixture); production lists the operator's own modules."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from journal.channels import CustomerChannel
from tools.connectors import BusinessIdHttpConnector, HttpConnector
from tools.registry import CustomerFacing, ToolSpec

API = "/sandbox/api/"


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


ORDER_ID = {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3,10}$"}
MONEY = {"type": "string", "pattern": "^[0-9]{1,7}\\.[0-9]{2}$"}
SKU = {"type": "string", "minLength": 1, "maxLength": 40}
QTY = {"type": "integer", "minimum": 1, "maximum": 1000}
TEXT = {"type": "string", "minLength": 1, "maxLength": 200}


def _write(
    name: str,
    path: str,
    lookup: str,
    schema: dict[str, Any],
    receipt: tuple[str, ...],
    description: str,
    detail: str = "",
    loss: str = "",
    customer_facing: CustomerFacing | None = None,
) -> ToolSpec:
    base = settings.SEAM_SANDBOX_URL + API
    return ToolSpec(
        name=name,
        kind="write",
        args_schema=schema,
        connector=HttpConnector(base_url=base, path=path, lookup_path=lookup, receipt_fields=receipt),
        receipt_fields=receipt,
        description=description,
        receipt_detail=detail,
        loss_detail=loss,
        customer_facing=customer_facing,
    )


def tools() -> list[ToolSpec]:
    base = settings.SEAM_SANDBOX_URL + API
    return [
        _write(
            "start_return",
            "returns/start_return",
            "returns/lookup/{key}",
            _schema({"order_id": ORDER_ID}, ["order_id"]),
            ("label", "pickup_date"),
            "Generate a return label and book the courier pickup.",
            "label {label}, courier pickup booked {pickup_date}",
        ),
        _write(
            "cancel_pickup",
            "returns/cancel_pickup",
            "returns/lookup/{key}",
            _schema({"label": TEXT}, ["label"]),
            ("label", "status"),
            "Cancel a booked courier pickup (until the parcel is collected).",
            "pickup for {label} {status}",
        ),
        _write(
            "offer_replacement",
            "warehouse/reserve",
            "warehouse/lookup/{key}",
            _schema({"order_id": ORDER_ID, "sku": SKU, "qty": QTY}, ["order_id", "sku", "qty"]),
            ("reservation_id", "warehouse"),
            "Reserve replacement stock.",
            "reservation {reservation_id}, warehouse {warehouse}",
        ),
        _write(
            "release_reservation",
            "warehouse/release",
            "warehouse/lookup/{key}",
            _schema({"reservation_id": TEXT}, ["reservation_id"]),
            ("reservation_id", "status"),
            "Release a stock reservation.",
            "reservation {reservation_id} {status}",
        ),
        _write(
            "issue_refund",
            "payments/refund",
            "payments/lookup/{key}",
            _schema(
                {"order_id": ORDER_ID, "amount": MONEY, "currency": {"enum": ["USD", "GBP", "EUR"]}},
                ["order_id", "amount", "currency"],
            ),
            ("refund_id", "amount"),
            "Refund money to the buyer.",
            "refund {refund_id} of {amount}",
        ),
        _write(
            "reverse_refund",
            "payments/reverse",
            "payments/lookup/{key}",
            _schema({"refund_id": TEXT}, ["refund_id"]),
            ("refund_id", "status"),
            "Reverse a refund.",
            "refund {refund_id} {status}",
        ),
        _write(
            "issue_credit",
            "accounting/credit",
            "accounting/lookup/{key}",
            _schema({"order_id": ORDER_ID, "amount": MONEY}, ["order_id", "amount"]),
            ("credit_memo_id", "amount"),
            "Issue a credit memo.",
            "credit memo {credit_memo_id} of {amount}",
        ),
        _write(
            "reverse_credit",
            "accounting/reverse_credit",
            "accounting/lookup/{key}",
            _schema({"credit_memo_id": TEXT}, ["credit_memo_id"]),
            ("credit_memo_id", "status"),
            "Reverse a credit memo with an accounting entry.",
            "credit memo {credit_memo_id} {status}",
        ),
        _write(
            "reship",
            "shipping/reship",
            "shipping/lookup/{key}",
            _schema({"order_id": ORDER_ID, "sku": SKU, "qty": QTY}, ["order_id", "sku", "qty"]),
            ("shipment_id", "recall_cutoff"),
            "Ship replacement units.",
            "shipment {shipment_id}, recallable until {recall_cutoff}",
        ),
        _write(
            "cancel_shipment",
            "shipping/cancel",
            "shipping/lookup/{key}",
            _schema({"shipment_id": TEXT}, ["shipment_id"]),
            ("shipment_id", "status"),
            "Cancel a shipment before its recall cutoff; after it, recall at a fee.",
            "shipment {shipment_id} {status}",
            # Past the cutoff the carrier answers `recalled` with the fee: a partial undo.
            "recalled at a fee of {recall_fee} {currency}",
        ),
        _write(
            "notify_seller",
            "email/notify_seller",
            "email/lookup/{key}",
            _schema({"order_id": ORDER_ID, "template": TEXT}, ["order_id", "template"]),
            ("message_id",),
            "Email the seller. Cannot be unsent.",
            "email {message_id} sent",
        ),
        _write(
            "notify_customer",
            "email/notify_customer",
            "email/lookup/{key}",
            _schema({"order_id": ORDER_ID, "template": TEXT}, ["order_id", "template"]),
            ("message_id",),
            "Email the customer. Cannot be unsent.",
            "email {message_id} sent",
            # One tool sends every template, so it cannot say which step a template reports:
            # it announces none (no contradiction is guessed from a template's name).
            customer_facing=CustomerFacing(
                channel=CustomerChannel.EMAIL, says="email {template} ({message_id})"
            ),
        ),
        ToolSpec(
            name="adjust_stock",
            kind="write",
            args_schema=_schema(
                {
                    "sku": SKU,
                    "qty": {"type": "integer", "minimum": -1000, "maximum": 1000},
                    "reference": TEXT,
                },
                ["sku", "qty", "reference"],
            ),
            connector=BusinessIdHttpConnector(
                base_url=base,
                path="erp/adjust_stock",
                key_header="",
                receipt_fields=("adjustment_id",),
                search_path="erp/adjustments?reference={reference}",
                match_args=("sku", "qty", "reference"),
                result_key="adjustments",
                evidence_field="booked_at",
            ),
            receipt_fields=("adjustment_id",),
            receipt_detail="ERP adjustment {adjustment_id}",
            description="Adjust stock in the legacy ERP (ignores idempotency keys; reconciled by reference).",
        ),
        ToolSpec(
            name="order_status",
            kind="read",
            args_schema=_schema({"order_id": ORDER_ID}, ["order_id"]),
            connector=HttpConnector(
                base_url=base,
                path="orders/{order_id}/status",
                method="GET",
                key_header="",
                receipt_fields=("order_id", "status"),
            ),
            receipt_fields=("order_id", "status"),
            description="Read an order's status.",
        ),
        ToolSpec(
            name="entitlement",
            kind="read",
            args_schema=_schema({"order_id": ORDER_ID}, ["order_id"]),
            connector=HttpConnector(
                base_url=base,
                path="orders/{order_id}/entitlement",
                method="GET",
                key_header="",
                receipt_fields=("order_id", "remedies", "need_by"),
            ),
            receipt_fields=("order_id", "remedies", "need_by"),
            description="Read which remedies an order's contract allows, and by when the buyer needs the goods.",
        ),
        ToolSpec(
            name="warehouse_stock",
            kind="read",
            args_schema=_schema(
                {"warehouse": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]$"}, "sku": SKU},
                ["warehouse", "sku"],
            ),
            connector=HttpConnector(
                base_url=base,
                path="warehouse/{warehouse}/stock?sku={sku}",
                method="GET",
                key_header="",
                timeout=3.0,
                receipt_fields=("warehouse", "sku", "available"),
            ),
            receipt_fields=("warehouse", "sku", "available"),
            description="Read one warehouse's stock of a SKU (slow, sometimes missing).",
        ),
    ]
