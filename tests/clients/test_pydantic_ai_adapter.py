"""seam_client.adapters.pydantic_ai under Pydantic AI's own execution path: Agent.run with a
scripted FunctionModel (no network), the ledger's tool in a FunctionToolset wrapped by
journaled_toolset, and a real Seam. Checked against the ledger's own entries and the journal's
rows: two identical calls are two effects, a restarted agent replays without running, a call in
doubt stops Agent.run with IntentInDoubt, an unknown outcome reaches the model as a sentence, and
a tool's error is recorded as evidence unless declared a refusal, then goes on as without Seam."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from typing import Any

import pytest
from pydantic_ai import Agent, FunctionToolset, ModelRetry, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from seam_client import IntentInDoubt, SeamRefused
from seam_client.adapters.pydantic_ai import journaled_toolset

from journal.models import IntentStatus
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

pytestmark = pytest.mark.django_db(transaction=True)

AWARD = {"customer": "C-7", "points": 100, "reference": "GD-PA-1"}
UNKNOWN = "The outcome of this call is unknown; a person is checking it. Do not call it again."


def award_points_with_a_reference(customer: str, points: int, reference: str) -> dict[str, Any]:
    """The ledger's tool, refusing an award without a reference before it books anything."""
    if not reference:
        raise ModelRetry("a reference is required")
    return award_points(customer, points, reference)


def run_agent(
    on: Desk,
    work: str,
    calls: list[dict[str, Any]],
    *,
    errors_mean_not_performed: Collection[str] = (),
    tool: Any = award_points,
    name: str = "award_points",
) -> dict[str, ToolReturnPart | RetryPromptPart]:
    """Agent.run over a model that asks for each award of `calls` in turn, then answers; what each
    call answered the model (a tool's return, or its retry prompt), by the model's call id."""
    script = [
        ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{n}")])
        for n, args in enumerate(calls)
    ]
    script.append(ModelResponse(parts=[TextPart("Done.")]))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return script.pop(0)

    async def agent_run() -> list[ModelMessage]:
        async with on.client() as seam:
            run = await seam.start_run(task_type=TASK_TYPE, versions=VERSIONS, external_id=work)
            tools = journaled_toolset(
                FunctionToolset([Tool(tool, name=name), points_balance]),
                run,
                read_only={"points_balance"},
                errors_mean_not_performed=errors_mean_not_performed,
            )
            return (
                await Agent(FunctionModel(model), toolsets=[tools]).run("Award the points.")
            ).all_messages()

    return {
        part.tool_call_id: part
        for message in asyncio.run(agent_run())
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    }


def test_two_identical_calls_in_one_run_are_two_effects(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    told = run_agent(desk, work, [AWARD, AWARD])

    entries = desk.booked(AWARD["reference"])
    assert len(entries) == 2
    assert [
        (i.turn, i.occurrence, i.status, i.receipt["entry_id"], i.receipt["_call_id"])
        for i in desk.intents(work)
    ] == [
        (1, 0, IntentStatus.PERFORMED, entries[0]["entry_id"], "call-0"),
        (2, 1, IntentStatus.PERFORMED, entries[1]["entry_id"], "call-1"),
    ]
    assert [answer.content["entry_id"] for answer in told.values()] == [e["entry_id"] for e in entries]


def test_an_agent_started_again_replays_its_settled_calls_without_running_them(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    second = {**AWARD, "reference": "GD-PA-2"}
    first_run = run_agent(desk, work, [AWARD, second])

    again = run_agent(desk, work, [AWARD, second])

    assert [len(desk.booked(award["reference"])) for award in (AWARD, second)] == [1, 1]
    # The journal's answer: the recorded summary, without the journal's own notes.
    assert [json.loads(answer.content) for answer in again.values()] == [
        answer.content for answer in first_run.values()
    ]
    assert all("_call_id" not in answer.content for answer in again.values())


def test_a_call_found_open_stops_agent_run_with_intent_in_doubt(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    desk.open_call(work, AWARD)

    with pytest.raises(IntentInDoubt) as raised:
        run_agent(desk, work, [AWARD])

    assert raised.value.intent.args == AWARD
    assert desk.booked(AWARD["reference"]) == []
    assert [i.status for i in desk.intents(work)] == [IntentStatus.INTENDED]


def test_seams_refusal_stops_agent_run_as_itself(desk: Desk) -> None:  # noqa: F811
    # Agent.run lets a toolset's exceptions through unwrapped (unlike the OpenAI Agents SDK's
    # Runner.run), so the adapter raises Seam's own: here a 400 for a tool Seam does not declare.
    work = ticket()

    with pytest.raises(SeamRefused) as raised:
        run_agent(desk, work, [AWARD], name="award_bonus")

    assert (type(raised.value), raised.value.status, list(raised.value.fields)) == (
        SeamRefused,
        400,
        ["tool"],
    )
    assert desk.intents(work) == []
    assert desk.booked(AWARD["reference"]) == []


def test_an_unknown_outcome_replayed_reaches_the_model_as_an_explicit_sentence(desk: Desk) -> None:  # noqa: F811
    work = ticket()
    desk.open_call(work, AWARD)
    desk.settle_unknown(work)
    assert [i.status for i in desk.intents(work)] == [IntentStatus.UNKNOWN]

    [(call_id, answer)] = run_agent(desk, work, [AWARD]).items()
    # A failed tool result (ToolFailed): the model is told, in words, not to call it again.
    assert (call_id, answer.content, answer.outcome) == ("call-0", UNKNOWN, "failed")
    assert desk.booked(AWARD["reference"]) == []


def test_a_tool_exception_after_acting_is_evidence_and_ends_the_run_as_without_seam(desk: Desk) -> None:  # noqa: F811
    lost = {**AWARD, "reference": f"{LOST_ANSWER}1"}
    work = ticket()

    with pytest.raises(ConnectionError, match="the ledger's answer was lost"):
        run_agent(desk, work, [lost])

    assert len(desk.booked(lost["reference"])) == 1
    [intent] = desk.intents(work)
    assert (intent.status, intent.error_class) == (IntentStatus.INTENDED, "ambiguous")
    assert "the ledger's answer was lost" in intent.outcome_summary


def test_a_model_retry_is_evidence_unless_the_tool_declares_its_errors_refusals(desk: Desk) -> None:  # noqa: F811
    refused = {**AWARD, "reference": ""}
    work = ticket()
    told = run_agent(desk, work, [refused], tool=award_points_with_a_reference)

    # The model is asked to retry, as without Seam; the intent keeps the tool's answer as evidence.
    assert {call_id: answer.content for call_id, answer in told.items()} == {
        "call-0": "a reference is required"
    }
    [intent] = desk.intents(work)
    assert (intent.status, intent.error_class) == (IntentStatus.INTENDED, "ambiguous")
    assert "a reference is required" in intent.outcome_summary

    declared = ticket()
    told = run_agent(
        desk,
        declared,
        [refused],
        tool=award_points_with_a_reference,
        errors_mean_not_performed={"award_points"},
    )
    assert {call_id: answer.content for call_id, answer in told.items()} == {
        "call-0": "a reference is required"
    }
    assert [(i.status, i.error_class) for i in desk.intents(declared)] == [(IntentStatus.FAILED, "permanent")]
    assert desk.booked("") == []
