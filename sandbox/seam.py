"""The sandbox's plug-ins (tools.discovery), found wherever the sandbox app is installed (the demo's
and the suite's settings, never production's): the tools of its providers (docs/sandbox.md), as a
deployment would declare its real ones, with HTTP connectors configured per tool and arguments
described by JSON Schema; and the demo's compensation catalogue, what undoes each write tool and
how honestly (seeded by sandbox.catalogue).

The tools call the sandbox at SEAM_SANDBOX_URL. Where that is blank (the suite's settings, until
a test starts a sandbox: the `sandbox_tools` fixture) the sandbox declares no tools, so the
journal's own tests record any tool name and arguments."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings

from compensations.defaults import CatalogueEntrySpec
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
    label: str = "",
    undo_window: timedelta | None = None,
) -> ToolSpec:
    base = settings.SEAM_SANDBOX_URL + API
    return ToolSpec(
        name=name,
        kind="write",
        args_schema=schema,
        connector=HttpConnector(base_url=base, path=path, lookup_path=lookup, receipt_fields=receipt),
        receipt_fields=receipt,
        description=description,
        label=label,
        receipt_detail=detail,
        loss_detail=loss,
        customer_facing=customer_facing,
        undo_window=undo_window,
        # The sandbox's ledger deduplicates every keyed call by its key (sandbox.ledger), and
        # keeps keys for as long as it keeps its records: a call in doubt may be sent again.
        honours_key=True,
    )


def tools() -> list[ToolSpec]:
    # One piece: a flat declaration, one entry per tool of the sandbox, read top to bottom.
    if not settings.SEAM_SANDBOX_URL:
        return []  # no sandbox to call
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
            label="Start the return",
        ),
        _write(
            "cancel_pickup",
            "returns/cancel_pickup",
            "returns/lookup/{key}",
            _schema({"label": TEXT}, ["label"]),
            ("label", "status"),
            "Cancel a booked courier pickup (until the parcel is collected).",
            "pickup for {label} {status}",
            label="Cancel the pickup",
        ),
        _write(
            "offer_replacement",
            "warehouse/reserve",
            "warehouse/lookup/{key}",
            _schema({"order_id": ORDER_ID, "sku": SKU, "qty": QTY}, ["order_id", "sku", "qty"]),
            ("reservation_id", "warehouse"),
            "Reserve replacement stock.",
            "reservation {reservation_id}, warehouse {warehouse}",
            label="Reserve a replacement",
        ),
        _write(
            "release_reservation",
            "warehouse/release",
            "warehouse/lookup/{key}",
            _schema({"reservation_id": TEXT}, ["reservation_id"]),
            ("reservation_id", "status"),
            "Release a stock reservation.",
            "reservation {reservation_id} {status}",
            label="Release the reservation",
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
            label="Refund the buyer",
        ),
        _write(
            "reverse_refund",
            "payments/reverse",
            "payments/lookup/{key}",
            _schema({"refund_id": TEXT}, ["refund_id"]),
            ("refund_id", "status"),
            "Reverse a refund.",
            "refund {refund_id} {status}",
            label="Reverse the refund",
        ),
        _write(
            "issue_credit",
            "accounting/credit",
            "accounting/lookup/{key}",
            _schema({"order_id": ORDER_ID, "amount": MONEY}, ["order_id", "amount"]),
            ("credit_memo_id", "amount"),
            "Issue a credit memo.",
            "credit memo {credit_memo_id} of {amount}",
            label="Issue a credit",
        ),
        _write(
            "reverse_credit",
            "accounting/reverse_credit",
            "accounting/lookup/{key}",
            _schema({"credit_memo_id": TEXT}, ["credit_memo_id"]),
            ("credit_memo_id", "status"),
            "Reverse a credit memo with an accounting entry.",
            "credit memo {credit_memo_id} {status}",
            label="Reverse the credit",
        ),
        _write(
            "reship",
            "shipping/reship",
            "shipping/lookup/{key}",
            _schema({"order_id": ORDER_ID, "sku": SKU, "qty": QTY}, ["order_id", "sku", "qty"]),
            ("shipment_id", "recall_cutoff"),
            "Ship replacement units.",
            "shipment {shipment_id}, recallable until {recall_cutoff}",
            label="Ship a replacement",
            # The shipping provider's recall cutoff (sandbox.services.RECALL_WINDOW).
            undo_window=timedelta(hours=2),
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
            label="Cancel the shipment",
        ),
        _write(
            "notify_seller",
            "email/notify_seller",
            "email/lookup/{key}",
            _schema({"order_id": ORDER_ID, "template": TEXT}, ["order_id", "template"]),
            ("message_id",),
            "Email the seller. Cannot be unsent.",
            "email {message_id} sent",
            label="Email the seller",
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
            label="Email the customer",
        ),
        ToolSpec(
            name="adjust_stock",
            label="Adjust the stock in the ERP",
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
            label="Look up the order's status",
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
            label="Look up the order's entitlement",
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
            label="Look up the warehouse's stock",
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


# The demo's compensation catalogue. Two judgement calls, recorded here and in each entry's staff
# notes:
#
# - reship is `reversible_until` the receipt's `recall_cutoff`, not `partial`: before the cutoff
#   the cancel is complete and free, which is the common case, and `partial` would tell staff
#   every undo loses something. After the cutoff the undo still works but costs the recall fee,
#   which is what `loss` says (see CatalogueEntry's docstring).
# - adjust_stock is `reversible`: the legacy ERP has no undo operation, but stock is a count and
#   an opposite adjustment (same SKU and reference, qty negated) restores it exactly. The ERP
#   ignores idempotency keys, so the opposite adjustment is reconciled by reference like the
#   original; it appears as a second entry with the negated qty.
UNDO_OF_UNDO = (
    "Undoing an undo is a new decision for a person: the original effect was reversed on purpose, "
    "and redoing it (a new pickup, reservation, refund, credit or shipment) is a fresh action."
)

DEFAULT_CATALOGUE: list[dict[str, Any]] = [
    {
        "tool": "start_return",
        "description": "Cancel the courier pickup booked with the return label.",
        "compensating_tool": "cancel_pickup",
        "argument_mapping": {"label": "receipt.label"},
        "reversibility": "reversible_until",
        "until_condition": "until collection",
        "staff_notes": "Once the courier has collected the parcel, cancel_pickup answers already_collected: "
        "the return is under way and a person decides what happens to it.",
    },
    {
        "tool": "offer_replacement",
        "description": "Release the reserved replacement stock.",
        "compensating_tool": "release_reservation",
        "argument_mapping": {"reservation_id": "receipt.reservation_id"},
        "reversibility": "reversible",
    },
    {
        "tool": "issue_refund",
        "description": "Reverse the refund.",
        "compensating_tool": "reverse_refund",
        "argument_mapping": {"refund_id": "receipt.refund_id"},
        "reversibility": "reversible",
    },
    {
        "tool": "issue_credit",
        "description": "Reverse the credit memo with an accounting entry.",
        "compensating_tool": "reverse_credit",
        "argument_mapping": {"credit_memo_id": "receipt.credit_memo_id"},
        "reversibility": "reversible",
    },
    {
        "tool": "reship",
        "description": "Cancel the shipment; after its recall cutoff it is recalled at a fee.",
        "compensating_tool": "cancel_shipment",
        "argument_mapping": {"shipment_id": "receipt.shipment_id"},
        "reversibility": "reversible_until",
        "until_condition": "until the recall cutoff",
        "deadline_field": "recall_cutoff",
        "loss": "recall fee after the cutoff",
        "staff_notes": "Before recall_cutoff the cancel is complete and free. After it the parcel is recalled "
        "(status recalled) and the recall fee is lost: the compensation ends partial.",
    },
    {
        "tool": "adjust_stock",
        "description": "Adjust the same SKU by the opposite quantity, under the same reference.",
        "compensating_tool": "adjust_stock",
        "argument_mapping": {"sku": "args.sku", "qty": "negate:args.qty", "reference": "args.reference"},
        "reversibility": "reversible",
        "staff_notes": "The legacy ERP has no undo and ignores idempotency keys; stock is a count, so the "
        "opposite adjustment restores it. It shows in erp/adjustments?reference= as a second entry.",
    },
    {
        "tool": "notify_seller",
        "description": "Nothing: an email cannot be unsent.",
        "reversibility": "none",
        "staff_notes": "If the email was wrong, a person writes to the seller to correct it.",
    },
    {
        "tool": "notify_customer",
        "description": "Nothing: an email cannot be unsent.",
        "reversibility": "none",
        "staff_notes": "If the email was wrong, a person writes to the customer to correct it.",
    },
    *(
        {
            "tool": undo_tool,
            "description": f"Nothing automatic: {undo_tool} is itself an undo.",
            "reversibility": "none",
            "staff_notes": UNDO_OF_UNDO,
        }
        for undo_tool in (
            "cancel_pickup",
            "release_reservation",
            "reverse_refund",
            "reverse_credit",
            "cancel_shipment",
        )
    ),
]


def catalogue() -> list[CatalogueEntrySpec]:
    """The demo's entries, for the sandbox's write tools."""
    return [CatalogueEntrySpec(**entry) for entry in DEFAULT_CATALOGUE]
