"""The giftdesk's flow and its scripted ticket (SEAM_FLOW_MODULES=examples.giftdesk.flows): load
the goodwill onto the customer's gift card, award loyalty points, then email the customer
(irreversible, so last)."""

from __future__ import annotations

from scenarios.flows import Flow, Step
from scenarios.tickets import Ticket

TASK_TYPE = "goodwill_credit"
TICKET_ID = "GD-100"


def flows() -> list[Flow]:
    return [
        Flow(
            task_type=TASK_TYPE,
            version="1",
            description="A goodwill credit: gift-card load, loyalty points, an email.",
            steps=(
                Step(
                    "load_gift_card", "act", {"card": "$card", "amount": "$amount"}, "load {amount} on {card}"
                ),
                Step(
                    "award_points",
                    "act",
                    {"customer": "$customer", "points": "$points", "reference": "$reference"},
                    "award {points} points",
                ),
                Step(
                    "send_goodwill_email",
                    "notify",
                    {"customer": "$customer", "template": "goodwill_credit"},
                    "email {customer}",
                ),
            ),
        )
    ]


def tickets() -> list[Ticket]:
    return [
        Ticket(
            TICKET_ID,
            TASK_TYPE,
            {
                "card": "GC-7781",
                "amount": "25.00",
                "customer": "C-204",
                "points": 500,
                "reference": TICKET_ID,
            },
        )
    ]
