"""Replay a scripted ticket in a child process, optionally killed at a kill point, and report
what the journal and the world look like afterwards.

    python manage.py replay_ticket T-40912 --kill-after 2
    python manage.py replay_ticket T-40912 --kill-between-intent-and-call 2
    python manage.py replay_ticket T-40912 --kill-between-accept-and-record 2
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal.models import Run, Tenant
from scenarios.invariants import check_run
from scenarios.registry import all_tickets
from scenarios.runner import InProcessJournal, KillPlan, RestJournal, run_ticket


class Command(BaseCommand):
    help = (
        "Run a scripted ticket through the journal and the sandbox in a child process, killing it if asked."
    )
    # This is an agent runtime, not an operator's tool: a catalogue problem (a system check) must
    # not stop it from running, any more than it would stop a real agent.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ticket", choices=sorted(all_tickets()))
        parser.add_argument(
            "--kill-after", type=int, default=None, help="SIGKILL after the Nth write is recorded"
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
        parser.add_argument("--tenant", default="sundry")
        parser.add_argument("--via", choices=["inprocess", "rest"], default="inprocess")
        parser.add_argument("--seam-url", default=os.environ.get("SEAM_URL", "http://127.0.0.1:8000"))
        parser.add_argument("--token", default=os.environ.get("SEAM_TOKEN", ""))
        parser.add_argument("--external-id", default="")
        parser.add_argument("--child", action="store_true", help="(internal) run the ticket in this process")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["child"]:
            self._child(options)
            return
        external_id = options["external_id"] or f"replay-{options['ticket']}-{uuid.uuid4().hex[:8]}"
        command = [
            sys.executable,
            str(settings.BASE_DIR / "manage.py"),
            "replay_ticket",
            options["ticket"],
            "--child",
            "--tenant",
            options["tenant"],
            "--via",
            options["via"],
            "--external-id",
            external_id,
            "--seam-url",
            options["seam_url"],
            "--token",
            options["token"],
        ]
        for flag in ("kill_after", "kill_between_intent_and_call", "kill_between_accept_and_record"):
            if options[flag] is not None:
                command += [f"--{flag.replace('_', '-')}", str(options[flag])]
        child = subprocess.run(command, check=False, capture_output=True, text=True, cwd=settings.BASE_DIR)
        how = "was killed (SIGKILL)" if child.returncode == -9 else f"exited with {child.returncode}"
        self.stdout.write(f"{options['ticket']}: the runner {how}")
        if child.returncode not in (0, -9):
            raise CommandError(child.stderr[-2000:])
        run = Run.objects.filter(tenant__slug=options["tenant"], external_id=external_id).first()
        if run is None:
            self.stdout.write("  no run was recorded")
            return
        for intent in run.intents.order_by("intended_at"):
            self.stdout.write(f"  {intent.tool:<20} {intent.status:<10} key {intent.idempotency_key[:16]}…")
        world = check_run(run, world_is_this_run=False)
        self.stdout.write(
            f"  world: {world.effects} effect(s); journal: {world.performed} performed, {world.open} open"
        )
        for problem in world.violations:
            self.stdout.write(self.style.ERROR(f"  VIOLATION: {problem}"))
        for call in world.unconfirmed:
            self.stdout.write(self.style.WARNING(f"  unconfirmed: {call}"))
        self.stdout.write(f"  run {run.pk} status {run.status}")

    def _child(self, options: dict[str, Any]) -> None:
        if options["via"] == "rest":
            writer: Any = RestJournal(options["seam_url"], options["token"])
        else:
            tenant, _ = Tenant.objects.get_or_create(
                slug=options["tenant"], defaults={"name": options["tenant"]}
            )
            writer = InProcessJournal(tenant)
        kill = KillPlan(
            after_writes=options["kill_after"],
            between_intent_and_call=options["kill_between_intent_and_call"],
            between_accept_and_record=options["kill_between_accept_and_record"],
        )
        run_ticket(options["ticket"], journal_writer=writer, kill=kill, external_id=options["external_id"])
