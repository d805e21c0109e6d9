"""Seed the demo with realistic half-finished runs: scripted tickets replayed through the real
journal and the real connectors against the sandbox, each runner hard-killed at a chosen point,
so a newcomer sees at once what Seam is for. Needs `runsandbox` listening at SEAM_SANDBOX_URL."""

from __future__ import annotations

from typing import Any

import requests
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from handover.models import Run

# (ticket, replay_ticket options): where each demo runner dies.
DEMO_REPLAYS: list[tuple[str, dict[str, int]]] = [
    ("T-40912", {"kill_after": 2}),  # seed 000: return started, bench reserved, the $14.95 never refunded
    ("T-41207", {"kill_between_accept_and_record": 2}),  # the pallet left; our record of it did not
    ("T-41311", {}),  # an order-status run that finished
    ("T-41402", {"kill_after": 1}),  # damage credit issued, nobody told
    ("T-41518", {"kill_between_accept_and_record": 1}),  # a refund in doubt
    ("T-41844", {"kill_after": 1}),  # the legacy ERP adjusted, the seller not told
]


class Command(BaseCommand):
    help = "Replay scripted tickets against the sandbox, killing each runner at a chosen point (skips ones already seeded)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", default="sundry")

    def handle(self, *args: Any, tenant: str, **options: Any) -> None:
        try:
            requests.get(settings.SEAM_SANDBOX_URL + "/sandbox/api/ledger/", timeout=5).raise_for_status()
        except requests.RequestException as exc:
            raise CommandError(
                f"the sandbox is not answering at {settings.SEAM_SANDBOX_URL}: start it with "
                "`python manage.py runsandbox`"
            ) from exc
        for ticket, kill in DEMO_REPLAYS:
            external_id = f"demo-{ticket}"
            if Run.objects.filter(tenant__slug=tenant, external_id=external_id).exists():
                continue
            call_command(
                "replay_ticket", ticket, tenant=tenant, external_id=external_id, stdout=self.stdout, **kill
            )
