"""Write the compensation catalogue entries and task policies declared in code (the modules of
SEAM_CATALOGUE_MODULES and SEAM_POLICY_MODULES) where a tool or task type has none; an entry or
policy an admin has edited is never overwritten. Safe to run on every deploy.

    python manage.py seam_seed
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from compensations.defaults import catalogue_declared, catalogue_seed
from reconciliation.defaults import policies_declared, policies_seed


class Command(BaseCommand):
    help = "Seed the catalogue entries and task policies declared in SEAM_CATALOGUE_MODULES and SEAM_POLICY_MODULES."
    # The catalogue's system check refuses a write tool without an entry (compensations.E001): on
    # a fresh install that would block the very command that writes the entries.
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        entries = catalogue_declared()
        policies = policies_declared()
        created_entries = catalogue_seed(entries)
        created_policies = policies_seed(policies)
        self.stdout.write(
            f"catalogue: {created_entries} of {len(entries)} declared entries created; "
            f"policies: {created_policies} of {len(policies)} declared policies created"
        )
