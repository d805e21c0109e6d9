"""manage.py retention: archive what is due, or say what would be, or check every archive
again; then list the months past every tenant's retention that some run still holds."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from journal.models import Tenant
from retention.models import Archive
from retention.selectors import blocked_months, droppable_months, due_months
from retention.services import ArchiveOutcome, DroppedMonth, retention_apply, verify_archive


class Command(BaseCommand):
    help = (
        "Archive the ended runs past their tenant's retention (a verified gzip'd JSON-lines file per "
        "tenant, month and batch), drop the intents' and events' partitions of the months past every "
        "tenant's retention whose runs are all archived, then list the months some run keeps from "
        "being dropped, and why."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Archive nothing; say what would be.")
        parser.add_argument(
            "--verify", action="store_true", help="Check every archive again; exit 1 on any mismatch."
        )
        parser.add_argument("--tenant", default="", help="Only this tenant's runs (its slug).")

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        tenant = Tenant.objects.filter(slug=options["tenant"]).first() if options["tenant"] else None
        if options["tenant"] and tenant is None:
            raise CommandError(f"no tenant with the slug {options['tenant']!r}")
        if options["verify"]:
            failed = self._verify()
        elif options["dry_run"]:
            failed = self._dry_run(now, tenant)
        else:
            failed = self._archive(now, tenant)
        self._blocked(now)
        if failed:
            raise CommandError(failed)

    def _dry_run(self, now: Any, tenant: Tenant | None) -> str:
        due = due_months(now, tenant)
        for month in due:
            self.stdout.write(f"{month.tenant.slug} {month.month:%Y-%m}: would archive {month.runs} runs")
        if not due:
            self.stdout.write("nothing is due")
        for partition in droppable_months(now):
            self.stdout.write(
                f"month {partition.month:%Y-%m}: would drop {partition.intents}, {partition.events} "
                f"({partition.bytes} bytes; every run of it archived)"
            )
        return ""

    def _archive(self, now: Any, tenant: Tenant | None) -> str:
        done = retention_apply(now, tenant)
        outcomes = done.archived
        for outcome in outcomes:
            self.stdout.write(self._said(outcome))
        if not outcomes:
            self.stdout.write("nothing was due")
        for dropped in done.dropped:
            self.stdout.write(self._dropped(dropped))
        failed = [outcome for outcome in outcomes if outcome.unmarked]
        return f"{len(failed)} archives did not verify; their runs were left as they were" if failed else ""

    def _said(self, outcome: ArchiveOutcome) -> str:
        archive = outcome.archive
        where = f"{archive.file_name} ({archive.bytes} bytes, sha256 {archive.sha256})"
        said = f"{outcome.tenant.slug} {outcome.month:%Y-%m}: {len(outcome.marked)} runs archived to {where}"
        if outcome.unmarked:
            said += f"; {len(outcome.unmarked)} runs NOT archived: {archive.problem}"
        return said

    def _dropped(self, dropped: DroppedMonth) -> str:
        runs = ", ".join(f"{slug} {count}" for slug, count in dropped.runs_by_tenant.items()) or "no run"
        return (
            f"month {dropped.month:%Y-%m}: dropped {', '.join(dropped.tables)} ({dropped.bytes} bytes; "
            f"archived runs: {runs})"
        )

    def _verify(self) -> str:
        mismatched = 0
        for archive in Archive.objects.select_related("tenant").order_by("month", "id"):
            if archive.verified_at is None:
                self.stdout.write(
                    f"{archive.file_name}: never verified, no run archived in it ({archive.problem})"
                )
                continue
            problems = verify_archive(archive)
            mismatched += bool(problems)
            for found in problems:
                self.stderr.write(f"{found.archive}: {found.problem}")
            if not problems:
                self.stdout.write(
                    f"{archive.file_name}: intact ({archive.runs} runs, sha256 {archive.sha256})"
                )
        return f"{mismatched} archives do not match" if mismatched else ""

    def _blocked(self, now: Any) -> None:
        for blocked in blocked_months(now):
            self.stdout.write(
                f"month {blocked.month:%Y-%m} cannot be dropped: {blocked.total} runs not archived"
            )
            for run in blocked.runs:
                reasons = ", ".join(str(reason.label) for reason in run.reasons)
                self.stdout.write(f"  {run.tenant} {run.ticket_id or run.run_id} ({run.run_id}): {reasons}")
