"""What undoes each giftdesk write, and how honestly (SEAM_CATALOGUE_MODULES=examples.giftdesk.catalogue):
points are reversible (a count, taken back by the opposite entry under the same reference), a
card load only partly (what the customer already spent is gone), an email not at all."""

from __future__ import annotations

from compensations.defaults import CatalogueEntrySpec


def catalogue() -> list[CatalogueEntrySpec]:
    return [
        CatalogueEntrySpec(
            tool="award_points",
            description="Book the opposite points entry under the same reference.",
            compensating_tool="award_points",
            argument_mapping={
                "customer": "args.customer",
                "points": "negate:args.points",
                "reference": "args.reference",
            },
            reversibility="reversible",
            staff_notes="The points ledger ignores idempotency keys; the undo is found by its reference "
            "and its negated points, like the award.",
        ),
        CatalogueEntrySpec(
            tool="load_gift_card",
            description="Take the loaded amount back off the card.",
            compensating_tool="load_gift_card",
            argument_mapping={"card": "args.card", "amount": "negate:args.amount"},
            reversibility="partial",
            loss="whatever the customer has already spent from the card",
            staff_notes="The take-back stops at the card's balance; its receipt's `unrecovered` says "
            "how much was already spent.",
        ),
        CatalogueEntrySpec(
            tool="send_goodwill_email",
            description="An email cannot be unsent.",
            reversibility="none",
            staff_notes="If a step it announced is undone, write to the customer again.",
        ),
    ]
