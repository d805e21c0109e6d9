"""What the in-process tests of the OpenAI Agents and Pydantic AI adapters share: a Seam (pytest-
django's live server) and the giftdesk's points ledger (a real provider process), the ledger's
tool as an agent writes it, and the states a restarted agent meets: a call left open by a
process that died, and one that reconciliation settled `unknown`. Each test drives its
framework's own execution path (Runner.run, Agent.run) with a scripted model."""

from __future__ import annotations

import asyncio
import io
import os
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from django.core.management import call_command
from django.test import override_settings
from seam_client import AsyncSeamClient

from devtools.processes import free_port
from journal.models import Intent, Run, Tenant
from tests.clients.mcp_support import agent_token
from tests.examples.giftdesk_support import Provider
from tests.support.in_flight import open_calls_past_in_flight
from tools import registry as tool_registry

TASK_TYPE = "points_agent"
VERSIONS = {"schema": "1", "flow": "agent", "policy": "1", "capability": "points"}
# A reference whose award the tool books and then fails to read the answer of: the error comes
# after the downstream acted.
LOST_ANSWER = "GD-LOST-"


def award_points(customer: str, points: int, reference: str) -> dict[str, Any]:
    """Award loyalty points to a customer under a reference."""
    response = requests.post(
        f"{os.environ['GIFTDESK_URL']}/points",
        json={"customer": customer, "points": points, "reference": reference},
        timeout=5,
    )
    response.raise_for_status()
    if reference.startswith(LOST_ANSWER):
        raise ConnectionError("the ledger's answer was lost")
    return dict(response.json())


def points_balance(customer: str) -> str:
    """How many points a customer holds."""
    state = requests.get(f"{os.environ['GIFTDESK_URL']}/state", timeout=5).json()
    return str(sum(entry["points"] for entry in state["points"] if entry["customer"] == customer))


@dataclass
class Desk:
    """A Seam, an agent token on it, and the giftdesk's ledger, for one test."""

    seam_url: str
    token: str
    ledger: Provider
    tenant: Tenant

    def client(self) -> AsyncSeamClient:
        return AsyncSeamClient(self.seam_url, self.token)

    def booked(self, reference: str) -> list[dict[str, Any]]:
        """The ledger's own entries under `reference` (it books every request it is sent)."""
        return [entry for entry in self.ledger.state()["points"] if entry["reference"] == reference]

    def intents(self, ticket: str) -> list[Intent]:
        run = Run.objects.get(tenant=self.tenant, external_id=ticket)
        return list(Intent.objects.filter(run=run).order_by("turn", "occurrence"))

    def open_call(self, ticket: str, args: dict[str, Any]) -> None:
        """The first award_points call of `ticket`'s run, recorded and left open: its agent died
        after committing the intent (the ledger never heard of it)."""

        async def record() -> None:
            async with self.client() as seam:
                run = await seam.start_run(task_type=TASK_TYPE, versions=VERSIONS, external_id=ticket)
                await run.record_intent("award_points", args, turn=1)

        asyncio.run(record())

    def settle_unknown(self, ticket: str) -> None:
        """Reconciliation settles `ticket`'s open calls `unknown`: the ledger cannot be asked (its
        address answers nothing) and one attempt is the whole budget."""
        run = Run.objects.get(tenant=self.tenant, external_id=ticket)
        open_calls_past_in_flight(run=run)
        with pytest.MonkeyPatch.context() as patch, override_settings(SEAM_LOOKUP_MAX_ATTEMPTS=1):
            patch.setenv("GIFTDESK_URL", f"http://127.0.0.1:{free_port()}")
            tool_registry.reset_registry()  # the connectors are built with the ledger's address
            call_command("reconcile", older_than=0, stdout=io.StringIO())
        tool_registry.reset_registry()


@pytest.fixture
def desk(giftdesk: Provider, live_server: Any, tenant: Tenant) -> Desk:
    """Needs the `giftdesk` fixture of test_framework_adapters.py imported beside it."""
    return Desk(live_server.url, agent_token(tenant, name="framework-agent"), giftdesk, tenant)


def ticket() -> str:
    return f"GD-T-{uuid.uuid4().hex[:10]}"
