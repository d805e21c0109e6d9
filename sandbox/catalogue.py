"""The demo's compensation catalogue: what undoes each of the sandbox's write tools
(docs/sandbox.md, sandbox.tools), and how honestly. Seeded where the sandbox is installed (local
and test settings, never production) each time `migrate` runs (sandbox.apps), and by
`catalogue_seed_defaults` (tests flush tables between cases); an entry an admin has edited is
never overwritten, one deleted comes back at the next `migrate`.

Two judgement calls, recorded here and in each entry's staff notes:

- reship is `reversible_until` the receipt's `recall_cutoff`, not `partial`: before the cutoff
  the cancel is complete and free, which is the common case, and `partial` would tell staff
  every undo loses something. After the cutoff the undo still works but costs the recall fee,
  which is what `loss` says (see CatalogueEntry's docstring).
- adjust_stock is `reversible`: the legacy ERP has no undo operation, but stock is a count and
  an opposite adjustment (same SKU and reference, qty negated) restores it exactly. The ERP
  ignores idempotency keys, so the opposite adjustment is reconciled by reference like the
  original; it appears as a second entry with the negated qty.
"""

from __future__ import annotations

from typing import Any

from compensations.defaults import CatalogueEntrySpec, catalogue_seed

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


def catalogue_seed_defaults(model: Any = None, history_model: Any = None, using: str = "default") -> int:
    """Create the demo's entry of each sandbox tool that has none; edited entries are kept."""
    return catalogue_seed(catalogue(), model=model, history_model=history_model, using=using)


def catalogue() -> list[CatalogueEntrySpec]:
    """The demo's entries, declared like any integrator's (SEAM_CATALOGUE_MODULES)."""
    return [CatalogueEntrySpec(**entry) for entry in DEFAULT_CATALOGUE]


def catalogue_seed_after_migrate(*, using: str, plan: Any = None, apps: Any = None, **kwargs: Any) -> None:
    """post_migrate: after `migrate` (never after `flush`, whose plan is None: tests empty the
    tables on purpose), write the demo's catalogue entries for the sandbox's tools where a tool
    has none. Connected only where the demo is installed, so a production database never gets
    them. Uses the migrated state's models, so that a database migrated to an older state is
    seeded as far as its tables go."""
    if plan is None or apps is None:
        return
    try:
        model = apps.get_model("compensations", "CatalogueEntry")
        history_model = apps.get_model("compensations", "HistoricalCatalogueEntry")
    except LookupError:  # migrated back to before the table existed
        return
    catalogue_seed_defaults(model=model, history_model=history_model, using=using)
