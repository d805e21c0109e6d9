"""What undoes the mcpdesk's registered write (SEAM_CATALOGUE_MODULES=examples.mcpdesk.catalogue): a
credit is taken back by the opposite credit. `close_account` has no entry: nothing undoes it."""

from __future__ import annotations

from compensations.defaults import CatalogueEntrySpec


def catalogue() -> list[CatalogueEntrySpec]:
    return [
        CatalogueEntrySpec(
            tool="credit_account",
            description="Credit the opposite amount to the same account.",
            compensating_tool="credit_account",
            argument_mapping={"account": "args.account", "amount": "negate:args.amount"},
            reversibility="reversible",
        )
    ]
