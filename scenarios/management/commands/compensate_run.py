"""Undo a run's performed steps now, in this process, as a person's "compensate the run" does
through its task (compensations.compensate_run → run_undo). Each undo is idempotent by its key,
so running it again after a crash continues where the dead process stopped.

    python manage.py compensate_run RUN_ID
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from compensations.services import run_undo
from handover.why_words import undo_facts_words
from journal.models import Run
from journal.services import Actor


class Command(BaseCommand):
    help = "Compensate every performed step of a run, in reverse order, and print what came of it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run", help="the run's id")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run_id = uuid.UUID(str(options["run"]))
        except ValueError as exc:
            raise CommandError(f"the run must be a run id (a UUID); got {options['run']!r}") from exc
        run = Run.objects.select_related("tenant").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run {options['run']}")
        result = run_undo(run=run, actor=Actor.system("manage.py compensate_run"))
        self.stdout.write(f"run {run.pk} ({run.ticket_id}): {undo_facts_words(result.facts())}")
