"""Print insights panels as text tables, for operators and for notes: the same numbers the
insights page and its CSV show (insights.views.PANELS), for one tenant and period. `--fold`
brings the error panels' rollup up to date first (the first fold backfills it); `--recount`
checks each error panel's numbers against a recount of the period from the journal's rows, and
that every escalation and compensation still carries its run's tenant, task type and tool (the
copies the other panels count by), and fails naming what differs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from journal.models import Tenant

from ... import errors
from ...error_counts import errors_fold
from ...selectors import Breakdown, InsightsFilters, copies_differing, default_period
from ...views import PANELS

# The panels drawn from the rollup, each with its recount (the reference).
RECOUNTED: dict[str, Callable[..., Breakdown]] = {
    "errors": errors.errors_per_task_type,
    "errors-per-tool": errors.errors_per_tool,
    "error-classes": errors.error_classes,
}


def _table(breakdown: Breakdown) -> list[str]:
    heading = (breakdown.row_heading, *(column.label for column in breakdown.columns))
    rows = [heading, *((row.label, *row.cells) for row in breakdown.rows)]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(heading))]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows
    ]


class Command(BaseCommand):
    help = "Print insights panels (errors, why, recoveries, ...) of a tenant as text tables."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="the tenant's slug")
        parser.add_argument("--panel", action="append", choices=sorted(PANELS), help="repeat for several")
        parser.add_argument("--since", type=date.fromisoformat, help="first day (default: the page's)")
        parser.add_argument("--until", type=date.fromisoformat, help="last day (default: today)")
        parser.add_argument("--task-type", default="")
        parser.add_argument("--fold", action="store_true", help="fold the error rollup first")
        parser.add_argument(
            "--recount", action="store_true", help="check the error panels against a full recount"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant with the slug {options['tenant']!r}")
        default_since, default_until = default_period(today=timezone.localdate())
        filters = InsightsFilters(
            since=options["since"] or default_since,
            until=options["until"] or default_until,
            task_type=options["task_type"],
        )
        if options["fold"]:
            folded = errors_fold()
            self.stdout.write(f"folded {folded.hours} hours into {folded.rows} rows\n")
        if options["recount"]:
            self._recount(tenant, filters, options["panel"] or sorted(RECOUNTED))
            return
        for key in options["panel"] or sorted(PANELS):
            spec = PANELS[key]
            breakdown = spec.select(tenant, filters)
            self.stdout.write(f"{spec.title} ({key}, {filters.since} to {filters.until})")
            self.stdout.write("\n".join(_table(breakdown)) + "\n\n")

    def _recount(self, tenant: Tenant, filters: InsightsFilters, keys: list[str]) -> None:
        differ = []
        for key in keys:
            if key not in RECOUNTED:
                raise CommandError(f"{key} is not drawn from the rollup; choose from {', '.join(RECOUNTED)}")
            select = RECOUNTED[key]
            same = select(tenant=tenant, filters=filters) == select(
                tenant=tenant, filters=filters, recount=True
            )
            self.stdout.write(f"{key}: {'equals the recount' if same else 'DIFFERS from the recount'}\n")
            if not same:
                differ.append(key)
        for table, n in copies_differing().items():
            self.stdout.write(f"{table}: {n} with a tenant, task type or tool other than their run's\n")
            if n:
                differ.append(f"the copied columns of {n} {table}")
        if differ:
            raise CommandError(f"the rollup differs from the recount in {', '.join(differ)}")
