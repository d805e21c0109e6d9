"""The default compensation catalogue: what undoes each of the sandbox's write tools
(docs/sandbox.md), and how honestly. Seeded by migration 0002 and by
`catalogue_seed_defaults` (tests flush tables between cases); an entry an admin has edited is
never overwritten. Migration 0003 gives the staff roles their catalogue permissions through
`catalogue_grant_roles`.

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

from django.contrib.auth.models import Group, Permission
from django.utils import timezone

from .models import CatalogueEntry

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

# The staff roles (handover's create_demo_users) and what they may do with the catalogue.
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "support_staff": ("view_catalogueentry",),
    "team_lead": ("view_catalogueentry",),
    "admin": ("view_catalogueentry", "add_catalogueentry", "change_catalogueentry", "delete_catalogueentry"),
}


def catalogue_seed_defaults(model: Any = None, history_model: Any = None) -> None:
    """Create the default entry of each tool that has none; edited entries are kept. Each
    created entry gets its first history row, so the first edit shows old and new values.
    (The real model writes it itself; a migration's historical model needs `history_model`.)"""
    if model is None:
        model = CatalogueEntry
    for entry in DEFAULT_CATALOGUE:
        fields = dict(entry)
        row, created = model.objects.get_or_create(tool=fields.pop("tool"), defaults=fields)
        if created and history_model is not None:
            history_model.objects.create(
                **{f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields},
                history_date=timezone.now(),
                history_type="+",
                history_change_reason="default catalogue",
            )


def catalogue_grant_roles(group_model: Any = None, permission_model: Any = None) -> None:
    """Give each staff role its catalogue permissions, creating the role's group if missing.
    Support staff and team leads read the catalogue; admins edit it. Only adds permissions."""
    if group_model is None or permission_model is None:
        group_model, permission_model = Group, Permission
    for group_name, codenames in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=group_name)
        permissions = permission_model.objects.filter(
            content_type__app_label="compensations", codename__in=codenames
        )
        missing = set(codenames) - {p.codename for p in permissions}
        if missing:
            raise LookupError(f"permissions not created yet: {', '.join(sorted(missing))}")
        group.permissions.add(*permissions)
