"""The occurrence a run handle derives (seam_client._common.Occurrences), against a live Seam and
a real downstream: the giftdesk's points ledger, which books every request it is sent (it takes
no key), so its own state counts the calls that reached it. Two identical calls at different
turns are two intents and two entries; the same turn again is the same intent; a new handle on
the run making the same calls in the same order (an agent started again) books nothing more."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from seam_client import AsyncSeamClient, Outcome, SeamClient

from journal.models import Intent, IntentStatus
from tests.examples.giftdesk_support import Provider, running_provider
from tests.factories import VERSIONS

pytestmark = pytest.mark.django_db(transaction=True)

AWARD = {"customer": "C-7", "points": 100, "reference": "GD-OCC-1"}


@pytest.fixture
def giftdesk(tmp_path: Path) -> Iterator[Provider]:
    with running_provider(tmp_path / "giftdesk.json") as provider:
        yield provider


def award_points(provider: Provider) -> Any:
    def call(args: dict[str, Any], key: str) -> Outcome:
        response = requests.post(f"{provider.url}/points", json=args, timeout=5)
        response.raise_for_status()
        entry = response.json()
        return Outcome(summary=f"booked {entry['entry_id']}", receipt=entry)

    return call


def booked(provider: Provider) -> list[str]:
    return [entry["entry_id"] for entry in provider.state()["points"]]


def rows(run_id: str) -> list[tuple[int, int, str]]:
    return [
        (row.turn, row.occurrence, row.status)
        for row in Intent.objects.filter(run_id=run_id).order_by("turn", "occurrence")
    ]


def test_identical_calls_at_two_turns_are_two_intents_and_two_effects(
    seam: SeamClient, giftdesk: Provider
) -> None:
    run = seam.start_run(task_type="points", versions=VERSIONS)
    call = award_points(giftdesk)

    first = run.perform("award_points", AWARD, call, turn=1)
    second = run.perform("award_points", AWARD, call, turn=2)
    retried = run.perform("award_points", AWARD, call, turn=2)

    assert (first.occurrence, second.occurrence) == (0, 1)
    assert first.idempotency_key != second.idempotency_key
    assert (retried.replayed, retried.step_id) == (True, second.step_id)
    assert booked(giftdesk) == ["pt_1", "pt_2"]
    assert [second.receipt["entry_id"], retried.receipt["entry_id"]] == ["pt_2", "pt_2"]
    assert rows(run.id) == [(1, 0, IntentStatus.PERFORMED), (2, 1, IntentStatus.PERFORMED)]


def test_a_new_handle_making_the_same_calls_in_order_replays_them(
    seam: SeamClient, giftdesk: Provider
) -> None:
    run = seam.start_run(task_type="points", versions=VERSIONS)
    call = award_points(giftdesk)
    done = [run.perform("award_points", AWARD, call, turn=turn) for turn in (1, 2)]

    again = seam.run(run.id)  # the agent started again on the same run
    replayed = [again.perform("award_points", AWARD, call, turn=turn) for turn in (1, 2)]
    third = again.perform("award_points", AWARD, call, turn=3)

    assert [intent.replayed for intent in replayed] == [True, True]
    assert [intent.step_id for intent in replayed] == [intent.step_id for intent in done]
    assert third.occurrence == 2 and not third.replayed
    assert booked(giftdesk) == ["pt_1", "pt_2", "pt_3"]


def test_arguments_are_counted_as_seam_keys_them(seam: SeamClient) -> None:
    run = seam.start_run(task_type="points", versions=VERSIONS)

    whole = run.record_intent("award_points", {"points": 2, "customer": "C-7"}, turn=1)
    same_number = run.record_intent("award_points", {"customer": "C-7", "points": 2.0}, turn=2)
    same_call = run.record_intent("award_points", {"customer": "C-7", "points": 2.0}, turn=1)
    other_args = run.record_intent("award_points", {"customer": "C-8", "points": 2}, turn=3)
    explicit = run.record_intent("award_points", {"customer": "C-7", "points": 2}, turn=4, occurrence=7)

    assert (whole.occurrence, same_number.occurrence) == (0, 1)
    assert (same_call.replayed, same_call.step_id) == (True, whole.step_id)
    assert other_args.occurrence == 0
    assert explicit.occurrence == 7
    assert Intent.objects.filter(run_id=run.id).count() == 4


def test_async_identical_calls_are_two_effects_and_a_new_handle_replays_them(
    seam_server: str, agent_token: str, giftdesk: Provider
) -> None:
    sync_call = award_points(giftdesk)

    async def call(args: dict[str, Any], key: str) -> Outcome:
        return await asyncio.to_thread(sync_call, args, key)

    async def scenario() -> tuple[str, list[Any], list[Any], Any]:
        async with AsyncSeamClient(seam_server, agent_token, retries=3, backoff=0.01) as client:
            run = await client.start_run(task_type="points", versions=VERSIONS)
            done = [await run.perform("award_points", AWARD, call, turn=turn) for turn in (1, 2)]
            retried = await run.perform("award_points", AWARD, call, turn=2)
            again = client.run(run.id)
            replayed = [await again.perform("award_points", AWARD, call, turn=turn) for turn in (1, 2)]
            return run.id, done, replayed, retried

    run_id, done, replayed, retried = asyncio.run(scenario())

    assert [intent.occurrence for intent in done] == [0, 1]
    assert (retried.replayed, retried.step_id) == (True, done[1].step_id)
    assert [intent.replayed for intent in replayed] == [True, True]
    assert booked(giftdesk) == ["pt_1", "pt_2"]
    assert rows(run_id) == [(1, 0, IntentStatus.PERFORMED), (2, 1, IntentStatus.PERFORMED)]
