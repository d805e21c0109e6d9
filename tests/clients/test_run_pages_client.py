"""The clients read a whole run though the detail API answers its first page (issue 34): fetch()
follows the detail's cursors page by page, sync and async, so callers still get every intent and
customer message, in order; a server that answers every row at once is read as before."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone
from seam_client import AsyncSeamClient, SeamClient

from journal.models import CustomerMessage, Intent
from tests import factories
from tests.factories import BENCH_PLAN, VERSIONS

pytestmark = pytest.mark.django_db(transaction=True)

INTENTS = 2300  # the detail's 100, then pages of 1000, 1000 and 200
MESSAGES = 130


def _fill(run_id: str) -> tuple[list[str], list[str]]:
    """Rows written straight to the database; their step ids and message bodies in order."""
    base = timezone.now() - timedelta(days=1)
    factories.bulk_call_rows(run_id, range(INTENTS), base=base, same_time_every=3)
    CustomerMessage.objects.bulk_create(
        [
            CustomerMessage(run_id=run_id, channel="email", body=f"m{n}", told_at=base + timedelta(seconds=n))
            for n in range(MESSAGES)
        ]
    )
    steps = (
        Intent.objects.filter(run_id=run_id).order_by("intended_at", "id").values_list("step_id", flat=True)
    )
    return list(steps), [f"m{n}" for n in range(MESSAGES)]


def _read(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    assert data["intents_next"] is None and data["customer_messages_next"] is None
    return [i["step_id"] for i in data["intents"]], [m["body"] for m in data["customer_messages"]]


def test_the_sync_client_fetches_every_intent_and_message_of_a_run_of_many_pages(seam: SeamClient) -> None:
    run = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN, external_id="many-pages")
    expected = _fill(run.id)

    assert _read(run.fetch()) == expected
    assert _read(seam.run(run.id).fetch()) == expected  # a new handle reads the same
    assert len(expected[0]) == INTENTS


def test_the_async_client_fetches_every_intent_and_message_too(seam_server: str, agent_token: str) -> None:
    async def main() -> tuple[str, dict[str, Any]]:
        async with AsyncSeamClient(seam_server, agent_token, retries=3, backoff=0.01) as client:
            run = await client.start_run(
                task_type="returns", versions=VERSIONS, plan=BENCH_PLAN, external_id="many-pages-async"
            )
            await asyncio.to_thread(_fill, run.id)
            return run.id, await client.run(run.id).fetch()

    run_id, data = asyncio.run(main())

    steps, bodies = _read(data)
    assert len(steps) == INTENTS and len(set(steps)) == INTENTS
    assert steps == list(
        Intent.objects.filter(run_id=run_id).order_by("intended_at", "id").values_list("step_id", flat=True)
    )
    assert bodies == [f"m{n}" for n in range(MESSAGES)]


def test_a_detail_without_cursors_is_read_as_it_is() -> None:
    """A server from before the pages answers every row and no cursor: one request, as before."""
    asked: list[str] = []
    detail = {"id": "r-1", "status": "running", "intents": [{"step_id": "r-1:1:a"}], "customer_messages": []}

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path}")
        return httpx.Response(200, content=json.dumps(detail), headers={"Content-Type": "application/json"})

    with SeamClient("http://seam.test", "secret", transport=httpx.MockTransport(answer)) as client:
        data = client.run("r-1").fetch()

    assert asked == ["GET /api/v1/runs/r-1/"]
    assert [i["step_id"] for i in data["intents"]] == ["r-1:1:a"]
