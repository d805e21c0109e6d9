"""Write the compensation catalogue entries and task policies declared in code (the `catalogue()`
and `policies()` of each installed app's seam.py: tools.discovery) where a tool or task type has
none. Safe to run on every deploy.

A stored default that differs from its declaration (an admin edited it, or the declaration
changed since it was seeded) is never overwritten silently: each is reported with the fields
that differ, declared against stored, and how to apply the declaration. `--update NAME` (a tool
or a task type; repeatable) or `--update-all` overwrites the differing fields with the declared
ones, kept in the row's history with the reason; the admin page edits it by hand.

    python manage.py seam_seed
    python manage.py seam_seed --update issue_refund --update returns
    python manage.py seam_seed --update-all
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from compensations.defaults import (
    DeclarationDiffers,
    catalogue_declared,
    catalogue_differences,
    catalogue_seed,
    declaration_apply,
)
from reconciliation.defaults import policies_declared, policies_differences, policies_seed, policy_apply

APPLIED_REASON = "seam_seed --update: the declaration in code applied"


class Command(BaseCommand):
    help = (
        "Seed the catalogue entries and task policies declared by the installed apps' seam.py "
        "modules, and report each stored default that differs from its declaration."
    )
    # The catalogue's system check refuses a write tool without an entry (compensations.E001): on
    # a fresh install that would block the very command that writes the entries.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--update",
            action="append",
            default=[],
            metavar="NAME",
            help="Overwrite the stored default of this tool's catalogue entry or task type's policy "
            "with its declaration (repeatable); recorded in its history.",
        )
        parser.add_argument(
            "--update-all", action="store_true", help="Overwrite every stored default that differs."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        entries = catalogue_declared()
        policies = policies_declared()
        wanted = set(options["update"])
        known = {e.tool for e in entries} | {p.task_type for p in policies}
        unknown = sorted(wanted - known)
        if unknown:
            raise CommandError(f"--update {', '.join(unknown)}: nothing of that name is declared")
        created_entries = catalogue_seed(entries)
        created_policies = policies_seed(policies)
        self.stdout.write(
            f"catalogue: {created_entries} of {len(entries)} declared entries created; "
            f"policies: {created_policies} of {len(policies)} declared policies created"
        )
        update_all = options["update_all"]
        with transaction.atomic():
            for entry_row, differs in catalogue_differences(entries):
                self._settle(entry_row, differs, apply=update_all or differs.name in wanted, policy=False)
            for policy_row, differs in policies_differences(policies):
                self._settle(policy_row, differs, apply=update_all or differs.name in wanted, policy=True)

    def _settle(self, row: Any, differs: DeclarationDiffers, *, apply: bool, policy: bool) -> None:
        if apply:
            (policy_apply if policy else declaration_apply)(row, differs, reason=APPLIED_REASON)
            self.stdout.write(f"updated: {differs.words()}; the declared values are stored now")
            return
        self.stdout.write(
            f"kept: {differs.words()}. To apply the declaration: manage.py seam_seed --update "
            f"{differs.name} (or --update-all); to keep the stored values, change the declaration; "
            f"to edit by hand: {differs.admin_path}"
        )
