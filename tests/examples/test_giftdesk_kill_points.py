"""The giftdesk example (examples/giftdesk), an integration that lives outside the built-in apps:
its own provider process with its own state, and a Django app whose seam.py declares its tools,
catalogue, policy, flow and ticket, turned on by installing the app alone. Its ticket is killed (SIGKILL, a real child process) at a
kill point, over the in-process and the REST transport; one reconciliation sweep follows, and
then the world check finds nothing wrong, the provider's own state holds each effect once, and
the handover's `completed` is exactly what the provider confirms. Then the run's policy
(`reconcile --decide`) finishes it or undoes it, and the provider still holds each call once.

A sample of kill points runs in the default suite; the whole matrix is `chaos`."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import modify_settings

from compensations.models import CatalogueEntry
from examples.giftdesk.seam import TICKET_ID, flows
from handover import handover_for
from journal.models import AgentToken, Intent, IntentStatus, Run, RunStatus, Tenant
from journal.selectors import compensation_intent_ids
from reconciliation.models import TaskPolicy
from scenarios.invariants import check_run
from scenarios.registry import all_flows, all_tickets
from tests.examples.giftdesk_support import APP, Provider, replay_in_child, running_provider
from tests.support import recovery_figure
from tests.support.in_flight import open_calls_past_in_flight
from tools.discovery import seam_modules
from tools.registry import all_tools

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = len(flows()[0].writes)
KILL_FLAGS = {
    "after": "--kill-after",
    "intent": "--kill-between-intent-and-call",
    "between": "--kill-between-accept-and-record",
}
# Every kill point of the ticket: after each of 0..3 writes, and around each write's call.
MATRIX = [
    *(("after", n) for n in range(WRITES + 1)),
    *((mode, n) for mode in ("intent", "between") for n in range(1, WRITES + 1)),
]
# The default suite's sample: each kind of kill point once per transport, and each of the
# provider's three endpoints (keyed load, keyless points, email) caught in doubt.
SAMPLE = {
    "inprocess": [("after", 1), ("between", 2), ("intent", 3)],
    "rest": [("between", 1), ("intent", 2), ("between", 3)],
}
# The tool's id field in its receipt, and where the provider keeps its records.
RECEIPT_IDS = {"load_gift_card": "load_id", "award_points": "entry_id", "send_goodwill_email": "message_id"}


def matrix_params(transport: str) -> list[Any]:
    sample = SAMPLE[transport]
    return [
        pytest.param(
            mode,
            n,
            id=f"{transport}-{mode}-{n}",
            marks=() if (mode, n) in sample else (pytest.mark.chaos,),
        )
        for mode, n in MATRIX
    ]


@pytest.fixture
def giftdesk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Provider]:
    """The example's provider (a real process, its own state file) and the example's app
    installed, seeded with `seam_seed`."""
    with running_provider(tmp_path / "giftdesk.json") as provider:
        monkeypatch.setenv("GIFTDESK_URL", provider.url)
        with modify_settings(INSTALLED_APPS={"append": APP}):
            call_command("seam_seed", stdout=io.StringIO())
            yield provider


def provider_records(provider: Provider, run: Run) -> dict[str, dict[str, Any]]:
    """Each of the run's intents whose effect the provider's own state holds, by step id, with
    that record. A keyed effect is found by the intent's key; a points entry (no keys) by what the
    call carried."""
    state = provider.state()
    records: dict[str, dict[str, Any]] = {}
    for intent in Intent.objects.filter(run=run):
        if intent.tool == "award_points":
            matches = [
                entry
                for entry in state["points"]
                if (entry["customer"], entry["points"], entry["reference"])
                == (intent.args["customer"], intent.args["points"], intent.args["reference"])
            ]
            assert len(matches) <= 1, f"points awarded {len(matches)} times"
            record = matches[0] if matches else None
        else:
            table = "loads" if intent.tool == "load_gift_card" else "emails"
            record = state[table].get(intent.idempotency_key)
        if record is not None:
            records[intent.step_id] = record
    return records


def assert_recovered_truthfully(provider: Provider, run: Run, effects: int) -> None:
    """After the sweep: nothing open, the world check clean, every effect in the provider once,
    and the handover's completed steps exactly what the provider confirms."""
    assert not run.intents.filter(status=IntentStatus.INTENDED).exists()
    world = check_run(run)
    assert world.violations == ()
    assert world.unconfirmed == ()
    assert (world.performed, world.open, world.effects) == (effects, 0, effects)

    # No effect doubled, and none without an intent in front of it: the provider's own state.
    state = provider.state()
    assert len(state["loads"]) + len(state["points"]) + len(state["emails"]) == effects
    confirmed = provider_records(provider, run)
    assert len(confirmed) == effects

    handover = handover_for(run)
    completed = {step.step_id: step for step in handover.completed}
    assert set(completed) == set(confirmed)
    for step_id, step in completed.items():
        field = RECEIPT_IDS[step.tool]
        assert step.receipt[field] == confirmed[step_id][field]
    assert len(handover.not_done) == WRITES - effects
    # Only the email reaches the customer, and only once it was sent.
    assert len(handover.customer_told) == (1 if effects == WRITES else 0)


def kill_and_reconcile(provider: Provider, mode: str, n: int, *transport: str) -> Run:
    returncode, run = replay_in_child(TICKET_ID, provider, *transport, KILL_FLAGS[mode], str(n))
    assert returncode == -9, "the runner was not killed"
    assert run is not None and run.status == RunStatus.RUNNING
    open_calls_past_in_flight(run=run)
    call_command("reconcile", older_than=0, stdout=io.StringIO())
    return run


def expected_effects(mode: str, n: int) -> int:
    # Killed between the Nth intent and its call, the provider never heard of the Nth write.
    return n - 1 if mode == "intent" else n


def test_installing_the_example_declares_its_plug_ins_and_seeds_its_catalogue_and_policy(
    giftdesk: Provider,
) -> None:
    assert f"{APP}.seam" in [module.__name__ for module in seam_modules()]
    assert set(RECEIPT_IDS) <= set(all_tools())
    assert "goodwill_credit" in all_flows() and TICKET_ID in all_tickets()
    assert all_tools()["load_gift_card"].get_connector().base_url == giftdesk.url  # type: ignore[attr-defined]
    entries = dict(CatalogueEntry.objects.values_list("tool", "reversibility"))
    assert {tool: entries.get(tool) for tool in RECEIPT_IDS} == {
        "award_points": "reversible",
        "load_gift_card": "partial",
        "send_goodwill_email": "none",
    }
    assert CatalogueEntry.objects.get(tool="load_gift_card").loss
    assert TaskPolicy.objects.get(task_type="goodwill_credit").strategy == "resume_until_phase"


def test_an_unkilled_run_completes_with_each_effect_once_in_the_providers_state(giftdesk: Provider) -> None:
    returncode, run = replay_in_child(TICKET_ID, giftdesk)

    assert returncode == 0
    assert run is not None and run.status == RunStatus.COMPLETED
    assert_recovered_truthfully(giftdesk, run, WRITES)
    state = giftdesk.state()
    assert state["cards"] == {"GC-7781": "25.00"}


@pytest.mark.parametrize(("mode", "n"), matrix_params("inprocess"))
def test_a_run_killed_in_process_recovers_to_what_the_provider_confirms(
    giftdesk: Provider, mode: str, n: int
) -> None:
    run = kill_and_reconcile(giftdesk, mode, n)

    assert_recovered_truthfully(giftdesk, run, expected_effects(mode, n))


@pytest.mark.parametrize(("mode", "n"), matrix_params("rest"))
def test_a_rest_runtime_killed_recovers_to_what_the_provider_confirms(
    giftdesk: Provider, live_server: Any, tenant: Tenant, mode: str, n: int
) -> None:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="giftdesk-runtime", digest=AgentToken.digest_of(secret))

    run = kill_and_reconcile(
        giftdesk, mode, n, "--via", "rest", "--seam-url", live_server.url, "--token", secret
    )

    assert run.tenant == tenant
    assert_recovered_truthfully(giftdesk, run, expected_effects(mode, n))


def reached_notify(mode: str, n: int) -> bool:
    """Whether the run had entered its notify phase (the email's call may have been sent) when
    it died: from there goodwill_credit's policy undoes rather than resumes."""
    return n == WRITES and mode != "intent"


@pytest.mark.parametrize(("mode", "n"), matrix_params("inprocess"))
def test_the_policy_then_finishes_or_undoes_the_run_with_each_effect_once(
    giftdesk: Provider, mode: str, n: int
) -> None:
    run = kill_and_reconcile(giftdesk, mode, n)

    call_command("reconcile", older_than=0, decide=True, stdout=io.StringIO())

    run.refresh_from_db()
    held = giftdesk.state()
    recovery_figure.record(
        "giftdesk example",
        run,
        doubled_or_lost=[
            *check_run(run).violations,
            *recovery_figure.counted_once(
                {"the provider's effects": sum(len(held[table]) for table in ("loads", "points", "emails"))},
                {"the provider's effects": run.intents.filter(status=IntentStatus.PERFORMED).count()},
            ),
        ],
        false_statements=recovery_figure.handover_against(run, provider_records(giftdesk, run)),
    )
    assert not run.intents.filter(status=IntentStatus.INTENDED).exists()
    world = check_run(run)
    assert (world.violations, world.unconfirmed) == ((), ())
    performed = run.intents.filter(status=IntentStatus.PERFORMED)
    state = giftdesk.state()
    # Every performed call (the run's and its undos) is in the provider once, and nothing else is.
    assert len(state["loads"]) + len(state["points"]) + len(state["emails"]) == performed.count()
    assert set(provider_records(giftdesk, run)) == set(performed.values_list("step_id", flat=True))
    # The email went out exactly once, whichever way the run ended.
    assert len(state["emails"]) == 1
    points = sum(entry["points"] for entry in state["points"])
    if reached_notify(mode, n):
        # Undone as far as the catalogue allows, and handed to a person.
        assert run.status == RunStatus.ESCALATED
        assert (state["cards"], points) == ({"GC-7781": "0.00"}, 0)
    else:
        # Resumed: only what was never performed was sent.
        assert run.status == RunStatus.COMPLETED
        assert (state["cards"], points) == ({"GC-7781": "25.00"}, 500)
    undo_ids = compensation_intent_ids(run=run)
    completed = {step.step_id for step in handover_for(run).completed}
    assert completed == set(performed.exclude(pk__in=undo_ids).values_list("step_id", flat=True))
