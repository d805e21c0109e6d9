"""Scripted tickets, starting with the two the product is built around: T-40912, the split-slat
garden bench from Ashcombe Furniture with a $14.95 expedited fee (a run that dies mid-sequence),
and the 4 x SKU-4471 shortage with a $412 credit (a fan-out under a deadline)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Precondition:
    """The world as it stood before the agent started (an order already reserved, a parcel
    already shipped): performed directly on the provider under a fixed key, so setting it up
    again returns the same receipt. `facts` maps ticket facts to receipt fields."""

    tool: str
    args: dict[str, Any]
    facts: dict[str, str]


@dataclass(frozen=True)
class Ticket:
    ticket_id: str
    task_type: str
    facts: dict[str, Any]
    preconditions: tuple[Precondition, ...] = ()

    @property
    def order_id(self) -> str:
        return str(self.facts.get("order_id", ""))


_DEMO_TICKETS: dict[str, Ticket] = {
    t.ticket_id: t
    for t in [
        Ticket(
            "T-40912",
            "returns",
            {
                "order_id": "SU-90317",
                "sku": "OAK-BENCH",
                "qty": 1,
                "item": "oak bench",
                "amount": "14.95",
                "currency": "USD",
                "refund_reason": "expedited delivery fee",
                "seller": "Ashcombe Furniture",
            },
        ),
        Ticket(
            "T-41207",
            "shortage",
            {
                "order_id": "SU-88410",
                "sku": "SKU-4471",
                "qty": 4,
                "amount": "412.00",
                "seller": "Pallet & Co",
            },
        ),
        Ticket("T-41311", "order_status", {"order_id": "SU-90502"}),
        Ticket(
            "T-41402",
            "damage_dispute",
            {"order_id": "SU-90611", "amount": "38.00", "seller": "Ashcombe Furniture"},
        ),
        Ticket(
            "T-41518", "expedited_fee_refund", {"order_id": "SU-90720", "amount": "9.99", "currency": "GBP"}
        ),
        Ticket(
            "T-41623",
            "order_cancellation",
            {"order_id": "SU-90833", "amount": "129.00", "currency": "USD"},
            (
                Precondition(
                    "offer_replacement",
                    {"order_id": "SU-90833", "sku": "WALNUT-SHELF", "qty": 1},
                    {"reservation_id": "reservation_id"},
                ),
            ),
        ),
        Ticket(
            "T-41730",
            "address_change",
            {"order_id": "SU-90941", "sku": "SKU-1001", "qty": 1},
            (
                Precondition(
                    "reship",
                    {"order_id": "SU-90941", "sku": "SKU-1001", "qty": 1},
                    {"shipment_id": "shipment_id"},
                ),
            ),
        ),
        Ticket(
            "T-41844",
            "stock_correction",
            {
                "order_id": "SU-91050",
                "sku": "SKU-4471",
                "qty": -4,
                "reference": "T-41844",
                "seller": "Pallet & Co",
            },
        ),
    ]
}

# The demo's scripted tickets, declared by `tickets()` in scenarios/seam.py. Read-only: another
# flow's tickets go in its own app's seam.py.
TICKETS: Mapping[str, Ticket] = MappingProxyType(_DEMO_TICKETS)
