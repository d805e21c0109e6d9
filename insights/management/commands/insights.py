"""Print insights panels as text tables, for operators and for notes: the same numbers the
insights page and its CSV show (insights.views.PANELS), for one tenant and period."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from journal.models import Tenant

from ...selectors import Breakdown, InsightsFilters, default_period
from ...views import PANELS


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
        for key in options["panel"] or sorted(PANELS):
            spec = PANELS[key]
            breakdown = spec.select(tenant, filters)
            self.stdout.write(f"{spec.title} ({key}, {filters.since} to {filters.until})")
            self.stdout.write("\n".join(_table(breakdown)) + "\n\n")
