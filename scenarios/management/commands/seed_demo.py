"""Seed the demo with realistic half-finished runs: scripted tickets replayed through the real
journal and the real connectors against the sandbox, each runner hard-killed at a chosen point,
so a newcomer sees at once what Seam is for. Needs `runsandbox` listening at SEAM_SANDBOX_URL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from journal.models import IntentStatus, Run


def payments_cannot_say_once(run: Run, sandbox: str) -> str:
    """Payments' next key lookup answers "unknown", and its next refund refuses the key (sandbox
    faults, each used once): reconciliation can neither find out nor send the refund again under
    its key, and hands the run to a person, whose "Retry the lookup" then finds it. The replay
    itself makes no lookup, so the faults wait for reconciliation."""
    for rule in (
        {"provider": "payments", "operation": "lookup", "fault": "unknown_lookup", "remaining": 1},
        {"provider": "payments", "operation": "refund", "fault": "key_conflict", "remaining": 1},
    ):
        requests.post(sandbox + "/faults/", json=rule, timeout=5).raise_for_status()
    return "armed unknown_lookup on payments/lookup x1, key_conflict on payments/refund x1"


def accounting_reverses_the_credit_by_hand(run: Run, sandbox: str) -> str:
    """Someone at the accounting desk reverses the run's credit memo directly, outside Seam: the
    reversal Seam's policy later sends is refused as a conflict (already reversed), which is not
    retried, so it lands in the dead-letter queue for a person to close."""
    credit = run.intents.get(tool="issue_credit", status=IntentStatus.PERFORMED)
    memo = credit.receipt["credit_memo_id"]
    response = requests.post(
        sandbox + "/accounting/reverse_credit",
        json={"credit_memo_id": memo},
        headers={"Idempotency-Key": f"accounting-desk-{run.ticket_id}"},
        timeout=5,
    )
    response.raise_for_status()
    return f"the accounting desk reversed credit memo {memo} by hand"


@dataclass(frozen=True)
class DemoReplay:
    ticket: str
    kill: dict[str, int]  # replay_ticket's options: where the runner dies
    # Something done to the world after the kill, outside Seam, so that what follows shows a
    # part of Seam a clean run never reaches; returns what, in words.
    afterwards: Callable[[Run, str], str] | None = None


DEMO_REPLAYS: list[DemoReplay] = [
    # Died mid-sequence: return started, bench reserved, the $14.95 never refunded.
    DemoReplay("T-40912", {"kill_after": 2}),
    # The pallet left and our record of it did not; the policy undoes the run, and the credit's
    # reversal is refused (accounting already reversed it by hand): a dead letter.
    DemoReplay(
        "T-41207", {"kill_between_accept_and_record": 2}, afterwards=accounting_reverses_the_credit_by_hand
    ),
    DemoReplay("T-41311", {}),  # an order-status run that finished
    DemoReplay("T-41402", {"kill_after": 1}),  # damage credit issued, nobody told
    # A refund in doubt that payments cannot settle when asked once: a person decides.
    DemoReplay("T-41518", {"kill_between_accept_and_record": 1}, afterwards=payments_cannot_say_once),
    DemoReplay("T-41844", {"kill_after": 1}),  # the legacy ERP adjusted, the seller not told
]


class Command(BaseCommand):
    help = "Replay scripted tickets against the sandbox, killing each runner at a chosen point (skips ones already seeded)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", default="sundry")

    def handle(self, *args: Any, tenant: str, **options: Any) -> None:
        sandbox = settings.SEAM_SANDBOX_URL + "/sandbox/api"
        try:
            requests.get(sandbox + "/ledger/", timeout=5).raise_for_status()
        except requests.RequestException as exc:
            raise CommandError(
                f"the sandbox is not answering at {settings.SEAM_SANDBOX_URL}: start it with "
                "`python manage.py runsandbox`"
            ) from exc
        for replay in DEMO_REPLAYS:
            external_id = f"demo-{replay.ticket}"
            if Run.objects.filter(tenant__slug=tenant, external_id=external_id).exists():
                continue
            call_command(
                "replay_ticket",
                replay.ticket,
                tenant=tenant,
                external_id=external_id,
                stdout=self.stdout,
                **replay.kill,
            )
            if replay.afterwards is not None:
                run = Run.objects.get(tenant__slug=tenant, external_id=external_id)
                self.stdout.write(f"{replay.ticket}: {replay.afterwards(run, sandbox)}")
