"""`python manage.py journal_months [--ahead N]`: make the journal's monthly partitions for this
month and the next N (default 2) where missing, and list every month's partitions with their
size. The daily beat task `journal.create_months` does the same; run this after a long stop of
beat, or to see what the months hold."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from journal import partitions


class Command(BaseCommand):
    help = "Make the journal's monthly partitions ahead, and list the months with their size."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--ahead",
            type=int,
            default=partitions.MONTHS_AHEAD,
            help=f"Months after this one to make (default {partitions.MONTHS_AHEAD}).",
        )

    def handle(self, *args: Any, ahead: int, **options: Any) -> None:
        made = partitions.create_months(ahead=ahead)
        for month in made:
            self.stdout.write(f"made {month:%Y-%m}")
        for kept in partitions.existing_months():
            self.stdout.write(
                f"{kept.month:%Y-%m}  {kept.bytes / 1_048_576:,.1f} MiB  ({kept.intents}, {kept.events})"
            )
        default = partitions.default_rows()
        if default:
            self.stdout.write(
                self.style.WARNING(
                    f"{default} rows lie in the default partitions (a month that had no partition when "
                    "they were written): their month cannot be made until they are moved."
                )
            )
