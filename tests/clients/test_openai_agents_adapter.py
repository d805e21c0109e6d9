"""seam_client.adapters.openai_agents under the SDK's own execution path: agents.Runner.run with
agents.testing's ScriptedModel (no network), the ledger's tool on the giftdesk's points ledger,
and a real Seam. Checked against the ledger's own entries and the journal's rows: two identical
calls are two effects, a restarted agent replays without running, a call in doubt stops
Runner.run with seam_client.IntentInDoubt (and Seam's refusals and an outcome it did not take
as themselves, never in the SDK's UserError), an unknown outcome reaches the model as a
sentence, and a tool's error is recorded as evidence unless declared a refusal."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Collection
from typing import Any

import pytest
from agents import Agent, Runner, RunResult, ToolCallOutputItem, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from django.core.management import call_command
from pydantic import PositiveInt
from seam_client import AsyncSeamClient, IntentInDoubt, OutcomeNotRecorded, SeamRefused
from seam_client.adapters.openai_agents import journaled_tools

from journal.models import IntentStatus, Run, RunStatus
from reconciliation.models import TaskPolicy
from tests.clients.adapter_support import (
    LOST_ANSWER,
    TASK_TYPE,
    VERSIONS,
    Desk,
    award_points,
    desk,  # noqa: F401 - the fixture
    points_balance,
    ticket,
)
from tests.clients.test_framework_adapters import giftdesk  # noqa: F401 - the fixture
from tests.clients.transports import AsyncBreakingTransport, Breaks, posts_to

pytestmark = pytest.mark.django_db(transaction=True)

AWARD = {"customer": "C-7", "points": 100, "reference": "GD-OA-1"}
SDK_FAILURE_MESSAGE = "An error occurred while running the tool. Please try again."
UNKNOWN = "The outcome of this call is unknown; a person is checking it. Do not call it again."


@pytest.fixture(autouse=True)
def no_traces() -> None:
    set_tracing_disabled(True)  # nothing leaves the process


def run_agent(
    on: Desk,
    work: str,
    calls: list[dict[str, Any]],
    *,
    errors_mean_not_performed: Collection[str] = (),
    tool: str = "award_points",
    seam_client: AsyncSeamClient | None = None,
) -> RunResult:
    """Runner.run over a model that asks for each award of `calls` in turn (through the tool named
    `tool`), then answers."""
    steps = [[function_call(tool, args, call_id=f"call-{n}")] for n, args in enumerate(calls)]
    model = ScriptedModel([*steps, [assistant_message("Done.")]])

    async def agent_run() -> RunResult:
        async with seam_client or on.client() as seam:
            run = await seam.start_run(task_type=TASK_TYPE, versions=VERSIONS, external_id=work)
            tools = journaled_tools(
                [function_tool(award_points), function_tool(points_balance), award_bonus],
                run,
                read_only={"points_balance"},
                errors_mean_not_performed=errors_mean_not_performed,
            )
            agent = Agent(name="points desk", tools=tools, model=model)
            return await Runner.run(agent, "Award the points.")

    return asyncio.run(agent_run())


# The ledger's tool under a name the giftdesk does not declare: Seam refuses its intents.
award_bonus = function_tool(award_points, name_override="award_bonus")


def told(result: RunResult) -> dict[str, Any]:
    """What each tool call answered the model, by the model's call id."""
    return {
        item.raw_item["call_id"]: item.output  # type: ignore[index]
        for item in result.new_items
        if isinstance(item, ToolCallOutputItem)
    }


def test_two_identical_calls_in_one_run_are_two_effects(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    result = run_agent(desk, work, [AWARD, AWARD])

    entries = desk.booked(AWARD["reference"])
    assert len(entries) == 2
    assert [
        (i.turn, i.occurrence, i.status, i.receipt["entry_id"], i.receipt["_call_id"])
        for i in desk.intents(work)
    ] == [
        (1, 0, IntentStatus.PERFORMED, entries[0]["entry_id"], "call-0"),
        (2, 1, IntentStatus.PERFORMED, entries[1]["entry_id"], "call-1"),
    ]
    assert [answer["entry_id"] for answer in told(result).values()] == [e["entry_id"] for e in entries]


def test_an_agent_started_again_replays_its_settled_calls_without_running_them(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    second = {**AWARD, "reference": "GD-OA-2"}
    first_run = told(run_agent(desk, work, [AWARD, second]))

    again = told(run_agent(desk, work, [AWARD, second]))

    assert [len(desk.booked(award["reference"])) for award in (AWARD, second)] == [1, 1]
    # The journal's answer: the recorded summary, without the journal's own notes.
    assert [json.loads(answer) for answer in again.values()] == list(first_run.values())
    assert all("_call_id" not in answer for answer in again.values())


def test_a_call_found_open_stops_runner_run_with_intent_in_doubt(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    desk.open_call(work, AWARD)

    with pytest.raises(IntentInDoubt) as raised:
        run_agent(desk, work, [AWARD])

    assert raised.value.intent.args == AWARD
    assert desk.booked(AWARD["reference"]) == []
    assert [i.status for i in desk.intents(work)] == [IntentStatus.INTENDED]


@pytest.mark.parametrize(
    ("tool", "args", "refused_field"),
    [
        ("award_points", {**AWARD, "points": "a hundred"}, "args.points"),  # not Seam's schema: a 400
        ("award_bonus", AWARD, "tool"),  # a tool the deployment does not declare: a 400
    ],
)
def test_seams_refusal_stops_runner_run_as_itself(
    desk: Desk,  # noqa: F811
    tool: str,
    args: dict[str, Any],
    refused_field: str,
) -> None:
    work = ticket()

    with pytest.raises(SeamRefused) as raised:
        run_agent(desk, work, [args], tool=tool)

    assert (raised.value.status, list(raised.value.fields)) == (400, [refused_field])
    assert desk.intents(work) == []  # Seam wrote nothing
    assert desk.booked(AWARD["reference"]) == []  # and the tool never ran


def test_an_outcome_seam_did_not_take_stops_runner_run_as_outcome_not_recorded(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    # Every outcome POST is answered 503 by what stands between the agent and Seam.
    unreachable = Breaks(posts_to("/outcome/"), times=100, how="refused", status=503)
    seam = AsyncSeamClient(
        desk.seam_url, desk.token, retries=1, transport=AsyncBreakingTransport(unreachable)
    )

    with pytest.raises(OutcomeNotRecorded) as raised:
        run_agent(desk, work, [AWARD], seam_client=seam)

    assert raised.value.intent.args == AWARD
    assert len(desk.booked(AWARD["reference"])) == 1  # the ledger booked it, once
    # The call stays open, for reconciliation to find by its reference.
    assert [i.status for i in desk.intents(work)] == [IntentStatus.INTENDED]


def test_an_unknown_outcome_replayed_reaches_the_model_as_an_explicit_sentence(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    desk.open_call(work, AWARD)
    desk.settle_unknown(work)
    assert [i.status for i in desk.intents(work)] == [IntentStatus.UNKNOWN]

    result = run_agent(desk, work, [AWARD])

    assert told(result) == {"call-0": UNKNOWN}
    assert desk.booked(AWARD["reference"]) == []


def test_a_tool_error_is_evidence_unless_the_tool_declares_its_errors_refusals(desk: Desk) -> None:  # noqa: F811
    lost = {**AWARD, "reference": f"{LOST_ANSWER}1"}
    refused = {**AWARD, "reference": ""}  # the ledger refuses it (422) before booking anything
    work = ticket()
    result = run_agent(desk, work, [lost, refused])

    # Booked, then failed: the intent stays open with the tool's error, and the model sees it.
    assert len(desk.booked(lost["reference"])) == 1
    first, second = desk.intents(work)
    assert (first.status, first.error_class) == (IntentStatus.INTENDED, "ambiguous")
    assert "the ledger's answer was lost" in first.outcome_summary
    assert told(result)["call-0"] == SDK_FAILURE_MESSAGE  # the SDK's own answer, as without Seam
    # Not declared a refusal, the ledger's 422 is evidence too.
    assert (second.status, second.error_class) == (IntentStatus.INTENDED, "ambiguous")

    declared = ticket()
    run_agent(desk, declared, [refused], errors_mean_not_performed={"award_points"})
    assert [(i.status, i.error_class) for i in desk.intents(declared)] == [(IntentStatus.FAILED, "permanent")]
    assert desk.booked("") == []


@function_tool(name_override="award_points")
def award_positive_points(customer: str, points: PositiveInt, reference: str) -> dict[str, Any]:
    """The ledger's tool, with a stricter schema than Seam's (which takes negative points back)."""
    return award_points(customer, points, reference)


def test_arguments_the_sdk_refuses_are_recorded_as_invalid_input(desk: Desk) -> None:  # noqa: F811
    negative = {**AWARD, "points": -5}
    work = ticket()
    model = ScriptedModel(
        [[function_call("award_points", negative, call_id="call-0")], [assistant_message(".")]]
    )

    async def work_on() -> RunResult:
        async with desk.client() as seam:
            run = await seam.start_run(task_type=TASK_TYPE, versions=VERSIONS, external_id=work)
            agent = Agent(
                name="points desk", tools=journaled_tools([award_positive_points], run), model=model
            )
            return await Runner.run(agent, "Award the points.")

    result = asyncio.run(work_on())

    assert [(i.status, i.error_class) for i in desk.intents(work)] == [(IntentStatus.FAILED, "invalid_input")]
    assert desk.booked(AWARD["reference"]) == []
    assert told(result)["call-0"] == SDK_FAILURE_MESSAGE


def test_a_dead_points_agent_run_goes_to_a_person_with_nothing_undone(desk: Desk) -> None:  # noqa: F811
    # examples/giftdesk/policies.py's points_agent policy, which the guide's agent pages name.
    work = ticket()
    run_agent(desk, work, [AWARD])  # the agent stops before run.complete(): its process died

    out = io.StringIO()
    call_command("reconcile", older_than=0, decide=True, stdout=out)

    run = Run.objects.get(tenant=desk.tenant, external_id=work)
    assert f"run {run.id} (): escalated" in out.getvalue()
    assert "no recovery policy" not in out.getvalue()
    policy = TaskPolicy.objects.get(task_type=TASK_TYPE)
    assert (policy.strategy, policy.undo_before_escalating) == ("compensate_and_escalate", False)
    assert run.status == RunStatus.ESCALATED
    assert [entry["points"] for entry in desk.ledger.state()["points"]] == [AWARD["points"]]
    assert [i.status for i in desk.intents(work)] == [IntentStatus.PERFORMED]
