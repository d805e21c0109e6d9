"""Seeding the demo's compensation catalogue (declared in sandbox/seam.py: what undoes each of the
sandbox's write tools, and how honestly). Seeded where the sandbox is installed (local and test
settings, never production) each time `migrate` runs (sandbox.apps), and by
`catalogue_seed_defaults` (tests flush tables between cases); an entry an admin has edited is
never overwritten, one deleted comes back at the next `migrate`."""

from __future__ import annotations

from typing import Any

from compensations.defaults import catalogue_seed

from .seam import catalogue


def catalogue_seed_defaults(model: Any = None, history_model: Any = None, using: str = "default") -> int:
    """Create the demo's entry of each sandbox tool that has none; edited entries are kept."""
    return catalogue_seed(catalogue(), model=model, history_model=history_model, using=using)


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
