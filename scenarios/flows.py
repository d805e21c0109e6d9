"""The flows agents run, declared as data: phases (gather / decide / act / notify), each step a
tool whose arguments are taken from the ticket's facts. A run's plan is its flow's writes with
their arguments, recorded when the run starts, so "not done" can be derived later.

Argument values starting with "$" name a ticket fact; anything else is literal. Detail strings
are formatted with the facts. Irreversible effects (email) come last in every flow, after the
money has moved, and the credit (an accounting entry, easy to undo) comes before the pallet (a
truck, hard to call back)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from fanout.spec import BranchSpec, GroupSpec

Phase = Literal["gather", "decide", "act", "notify"]


@dataclass(frozen=True)
class Step:
    tool: str
    phase: Phase
    args: dict[str, Any]
    detail: str = ""
    write: bool = True
    # What the customer is told once this step has been performed, if anything.
    tell_customer: str = ""

    def bind(self, facts: dict[str, Any]) -> dict[str, Any]:
        return {
            name: facts[value[1:]] if isinstance(value, str) and value.startswith("$") else value
            for name, value in self.args.items()
        }

    def describe(self, facts: dict[str, Any]) -> str:
        return self.detail.format(**facts)


@dataclass(frozen=True)
class Flow:
    task_type: str
    version: str
    # A GroupSpec is a fan-out: reads dispatched together against a shared deadline, merged by
    # declared rules before any write (fanout.services).
    steps: tuple[Step | GroupSpec, ...]
    description: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    # Why this flow performs an irreversible write (catalogue reversibility "none") before a
    # reversible one. Empty: it must not (system check compensations.E003).
    irreversible_first: str = ""

    @property
    def writes(self) -> tuple[Step, ...]:
        return tuple(step for step in self.steps if isinstance(step, Step) and step.write)

    def plan(self, facts: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"tool": s.tool, "args": s.bind(facts), "phase": s.phase, "detail": s.describe(facts)}
            for s in self.writes
        ]

    def run_versions(self) -> dict[str, str]:
        return {
            "schema": "1",
            "flow": f"{self.task_type}-{self.version}",
            "policy": "2026-11",
            "capability": "1",
            **self.versions,
        }


def _read(tool: str, **args: Any) -> Step:
    return Step(tool=tool, phase="gather", args=args, write=False)


def _stock_and_entitlement() -> GroupSpec:
    """Three warehouses, best-effort (any one with the units will do), and the
    entitlement, required (no remedy without it), under one deadline. The warehouses are slow and
    sometimes missing; what they did not say is never promised."""
    return GroupSpec(
        name="shortage.stock_and_entitlement",
        deadline_ms=5000,
        merge="shortage_remedy",
        branches=(
            *(
                BranchSpec(f"warehouse {code}", "warehouse_stock", {"warehouse": code, "sku": "$sku"})
                for code in ("LDS-2", "MAN-1", "BRS-3")
            ),
            BranchSpec("entitlement {order_id}", "entitlement", {"order_id": "$order_id"}, required=True),
        ),
    )


def _notify(tool: str, template: str, detail: str) -> Step:
    return Step(tool, "notify", {"order_id": "$order_id", "template": template}, detail)


def _refund(detail: str, tell_customer: str = "") -> Step:
    return Step(
        "issue_refund",
        "act",
        {"order_id": "$order_id", "amount": "$amount", "currency": "$currency"},
        detail,
        tell_customer=tell_customer,
    )


_DEMO_FLOWS: dict[str, Flow] = {
    flow.task_type: flow
    for flow in [
        Flow(
            task_type="order_status",
            version="1",
            description="Read-only: look the order up and answer. Recovery is a re-run.",
            steps=(_read("order_status", order_id="$order_id"),),
        ),
        Flow(
            task_type="returns",
            version="3",
            description="Return with a replacement and a fee refund; the seller is told last.",
            steps=(
                _read("order_status", order_id="$order_id"),
                Step(
                    "start_return",
                    "act",
                    {"order_id": "$order_id"},
                    "return label and courier pickup",
                    tell_customer="Return label sent.",
                ),
                Step(
                    "offer_replacement",
                    "act",
                    {"order_id": "$order_id", "sku": "$sku", "qty": "$qty"},
                    "{qty} x {item} reserved",
                ),
                _refund("${amount} {refund_reason}"),
                _notify("notify_seller", "return_started", "email {seller}"),
            ),
        ),
        Flow(
            task_type="damage_dispute",
            version="2",
            description="Credit the buyer for damage in transit and tell both sides.",
            steps=(
                _read("order_status", order_id="$order_id"),
                Step(
                    "issue_credit",
                    "act",
                    {"order_id": "$order_id", "amount": "$amount"},
                    "${amount} damage credit",
                    tell_customer="We have credited your account for the damage.",
                ),
                _notify("notify_seller", "damage_claim", "email {seller} about the claim"),
                _notify("notify_customer", "damage_credit", "email the buyer the credit note"),
            ),
        ),
        Flow(
            task_type="shortage",
            version="2",
            description="Check stock and entitlement (a fan-out), then reship the missing units; the credit "
            "(an accounting entry to undo) before the pallet (a truck).",
            steps=(
                _read("order_status", order_id="$order_id"),
                _stock_and_entitlement(),
                Step(
                    "issue_credit",
                    "act",
                    {"order_id": "$order_id", "amount": "$amount"},
                    "${amount} credit memo",
                ),
                Step(
                    "reship",
                    "act",
                    {"order_id": "$order_id", "sku": "$sku", "qty": "$qty"},
                    "reship {qty} x {sku}",
                    tell_customer="The missing units are on their way.",
                ),
                _notify("notify_customer", "reship_sent", "email the buyer the shipment"),
            ),
        ),
        Flow(
            task_type="expedited_fee_refund",
            version="1",
            description="Refund an expedited delivery fee the buyer should not have paid.",
            steps=(
                _refund("${amount} expedited delivery fee", "The expedited fee has been refunded."),
                _notify("notify_customer", "fee_refunded", "email the refund confirmation"),
            ),
        ),
        Flow(
            task_type="order_cancellation",
            version="1",
            description="Cancel an order: release its stock, refund it, confirm.",
            irreversible_first="Releasing the reservation is what cancelling means, and it comes before the "
            "refund so money is never paid back for stock still held. Re-reserving after a failed "
            "refund is a new decision for a person, not an undo.",
            steps=(
                _read("order_status", order_id="$order_id"),
                Step(
                    "release_reservation",
                    "act",
                    {"reservation_id": "$reservation_id"},
                    "release {reservation_id}",
                ),
                _refund("${amount} order refund", "Your order is cancelled and refunded."),
                _notify("notify_customer", "order_cancelled", "email the cancellation"),
            ),
        ),
        Flow(
            task_type="address_change",
            version="1",
            description="Stop the shipment to the old address and ship to the new one.",
            irreversible_first="The old shipment is stopped before the new one leaves, or the buyer gets two "
            "parcels. Restarting a stopped shipment to the old address is a new decision for a person.",
            steps=(
                _read("order_status", order_id="$order_id"),
                Step("cancel_shipment", "act", {"shipment_id": "$shipment_id"}, "stop {shipment_id}"),
                Step(
                    "reship",
                    "act",
                    {"order_id": "$order_id", "sku": "$sku", "qty": "$qty"},
                    "ship {qty} x {sku} to the new address",
                    tell_customer="We are shipping to your new address.",
                ),
                _notify("notify_customer", "address_changed", "email the new tracking"),
            ),
        ),
        Flow(
            task_type="stock_correction",
            version="1",
            description="Correct stock in the legacy ERP (no idempotency keys) and tell the seller.",
            steps=(
                Step(
                    "adjust_stock",
                    "act",
                    {"sku": "$sku", "qty": "$qty", "reference": "$reference"},
                    "adjust {sku} by {qty} ({reference})",
                ),
                _notify("notify_seller", "stock_corrected", "email {seller}"),
            ),
        ),
    ]
}


# The demo's flows, declared like any integrator's by `flows()` in scenarios/seam.py. Read-only:
# a new flow goes in its own app's seam.py, not into this mapping.
FLOWS: Mapping[str, Flow] = MappingProxyType(_DEMO_FLOWS)
