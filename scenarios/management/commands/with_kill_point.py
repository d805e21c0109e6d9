"""Run another management command in this process with the runner's kill points put into every
call it sends through the journal, so a resumption or a compensation can be SIGKILLed mid-way:

    python manage.py with_kill_point --kill-after 2 reconcile --older-than 0 --decide
    python manage.py with_kill_point --kill-between-accept-and-record 1 compensate_run RUN_ID
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from scenarios.runner import KillPlan, writes_killed


class Command(BaseCommand):
    help = "Run a management command, SIGKILLing this process after (or inside) its Nth journaled write."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--kill-after", type=int, default=None, help="SIGKILL after the Nth write's outcome is committed"
        )
        parser.add_argument(
            "--kill-between-intent-and-call",
            type=int,
            default=None,
            help="SIGKILL after the Nth write's intent is committed, before its call is sent",
        )
        parser.add_argument(
            "--kill-between-accept-and-record",
            type=int,
            default=None,
            help="SIGKILL after the Nth write was accepted by the provider, before its outcome is committed",
        )
        parser.add_argument("command_name", help="the management command to run")
        parser.add_argument("command_args", nargs=argparse.REMAINDER, help="its arguments")

    def handle(self, *args: Any, **options: Any) -> None:
        kill = KillPlan(
            after_writes=options["kill_after"],
            between_intent_and_call=options["kill_between_intent_and_call"],
            between_accept_and_record=options["kill_between_accept_and_record"],
        )
        if (kill.after_writes, kill.between_intent_and_call, kill.between_accept_and_record) == (
            None,
            None,
            None,
        ):
            raise CommandError(
                "give --kill-after, --kill-between-intent-and-call or --kill-between-accept-and-record"
            )
        with writes_killed(kill):
            call_command(options["command_name"], *options["command_args"], stdout=self.stdout)
