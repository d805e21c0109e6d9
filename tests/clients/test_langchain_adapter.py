"""seam_client.adapters.langchain as LangGraph and LangChain users write agents today: langchain
1.x's create_agent (whose ToolNode runs the tools), sync tools under agent.invoke and
`@tool async def` tools under agent.ainvoke, journaled in a sync Run or an AsyncRun. Against a
live Seam (pytest-django's live server) and the giftdesk's points ledger, a real process that
books every request it is sent, so its own state counts the calls that reached it."""

from __future__ import annotations

import asyncio
import io
import signal
import time
import uuid
import warnings
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from seam_client import SeamClient
from seam_client.adapters import UNKNOWN_TEXT
from seam_client.adapters.langchain import journaled_tools

from devtools.processes import free_port
from journal.models import Intent, IntentStatus, Run, RunStatus, Tenant
from tests.clients.agent_support import AWARDS, FINAL_ANSWER, doc_module
from tests.clients.langgraph_agent import PAGE, VERSIONS, ScriptedModel, run_async_agent, script
from tests.clients.mcp_support import agent_token
from tests.clients.test_framework_adapters import agent_process, booked, giftdesk
from tests.examples.giftdesk_support import Provider
from tests.support import recovery_figure
from tests.support.in_flight import open_calls_past_in_flight
from tools import registry as tool_registry

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["giftdesk"]  # the ledger fixture, shared with test_framework_adapters.py

TWICE = [("award_points", AWARDS[0]), ("award_points", AWARDS[0])]


class RecordingModel(ScriptedModel):
    """The page's scripted model, keeping what it was shown each time it was asked."""

    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@pytest.fixture
def seam_env(giftdesk: Provider, live_server: Any, tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> str:
    token = agent_token(tenant)
    monkeypatch.setenv("SEAM_URL", live_server.url)
    monkeypatch.setenv("SEAM_TOKEN", token)
    return token


def ticket() -> str:
    return f"lc-{uuid.uuid4().hex[:10]}"


def intents(ticket_id: str) -> list[tuple[int, int, str, str]]:
    run = Run.objects.get(external_id=ticket_id)
    return [
        (i.turn, i.occurrence, i.status, i.error_class)
        for i in Intent.objects.filter(run=run).order_by("turn", "occurrence")
    ]


def test_the_pages_agent_runs_under_create_agent_without_a_deprecation_warning(
    seam_env: str, giftdesk: Provider
) -> None:
    page = doc_module(PAGE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answer = page.run_agent(page.scripted_model(), ticket())

    assert answer == FINAL_ANSWER
    assert [w for w in caught if issubclass(w.category, DeprecationWarning)] == []
    assert [len(booked(giftdesk, award["reference"])) for award in AWARDS] == [1, 1]


@pytest.mark.parametrize("mode", ["sync tools, invoke", "async tools, ainvoke"])
def test_the_same_call_made_twice_runs_the_tool_twice(seam_env: str, giftdesk: Provider, mode: str) -> None:
    run_id = ticket()
    if mode.startswith("sync"):
        doc_module(PAGE).run_agent(ScriptedModel(messages=iter(script(TWICE))), run_id)
    else:
        asyncio.run(run_async_agent(ScriptedModel(messages=iter(script(TWICE))), run_id))

    assert len(booked(giftdesk, AWARDS[0]["reference"])) == 2
    assert intents(run_id) == [(1, 0, IntentStatus.PERFORMED, ""), (2, 1, IntentStatus.PERFORMED, "")]
    receipts = (
        Intent.objects.filter(run__external_id=run_id).order_by("turn").values_list("receipt", flat=True)
    )
    assert [receipt["_call_id"] for receipt in receipts] == ["call-0", "call-1"]


def test_an_async_tool_under_a_sync_invoke_is_refused_before_anything_is_journaled(
    seam_env: str, giftdesk: Provider, live_server: Any
) -> None:
    from tests.clients.langgraph_agent import award_points

    run = SeamClient(live_server.url, seam_env).start_run(task_type="points_agent", versions=VERSIONS)
    agent = create_agent(
        ScriptedModel(messages=iter(script(TWICE[:1]))), journaled_tools([award_points], run)
    )

    with pytest.raises(NotImplementedError, match="award_points is an async tool"):
        agent.invoke({"messages": [("user", "Award the points.")]})

    assert Intent.objects.filter(run_id=run.id).count() == 0  # nothing to check: it never ran
    assert booked(giftdesk, AWARDS[0]["reference"]) == []
    assert run.handover().uncertain == []


@tool("award_points")
def refused_award(customer: str, points: int, reference: str) -> str:
    """Award loyalty points to a customer under a reference."""
    raise ToolException(f"the ledger refused {reference}: account {customer} is closed")


refused_award.handle_tool_error = True  # the tool answers its ToolException as status="error"


@pytest.mark.parametrize("declared", [False, True])
def test_an_error_answer_is_evidence_unless_the_tool_declares_its_errors_mean_not_performed(
    seam_env: str, live_server: Any, declared: bool
) -> None:
    run = SeamClient(live_server.url, seam_env).start_run(task_type="points_agent", versions=VERSIONS)
    declarations = {"award_points"} if declared else set()
    tools = journaled_tools([refused_award], run, errors_mean_not_performed=declarations)
    model = RecordingModel(messages=iter(script(TWICE[:1])))
    model.seen.clear()

    create_agent(model, tools).invoke({"messages": [("user", "Award the points.")]})
    said = f"the ledger refused {AWARDS[0]['reference']}: account C-7 is closed"

    row = Intent.objects.get(run_id=run.id)
    expected = (IntentStatus.FAILED, "permanent") if declared else (IntentStatus.INTENDED, "ambiguous")
    assert (row.status, row.error_class, row.outcome_summary) == (*expected, said)
    (answer,) = [m for m in model.seen[-1] if isinstance(m, ToolMessage)]
    assert (answer.content, answer.status) == (said, "error")  # the tool's own


def settle_unknown(run: Run) -> None:
    """Reconciliation settles the run's open calls `unknown`: the ledger cannot be asked (its
    address answers nothing) and one attempt is the whole budget."""
    open_calls_past_in_flight(run=run)
    with pytest.MonkeyPatch.context() as patch, override_settings(SEAM_LOOKUP_MAX_ATTEMPTS=1):
        patch.setenv("GIFTDESK_URL", f"http://127.0.0.1:{free_port()}")
        tool_registry.reset_registry()  # the connectors are built with the ledger's address
        call_command("reconcile", older_than=0, stdout=io.StringIO())
    tool_registry.reset_registry()


def test_a_replayed_unknown_outcome_reaches_the_model_as_a_sentence(
    seam_env: str, giftdesk: Provider, live_server: Any
) -> None:
    client = SeamClient(live_server.url, seam_env)
    run = client.start_run(task_type="points_agent", versions=VERSIONS, external_id=ticket())
    run.record_intent("award_points", AWARDS[0], turn=1)  # an agent died inside this call
    settle_unknown(Run.objects.get(pk=run.id))
    assert intents(run.data["external_id"])[0][2] == IntentStatus.UNKNOWN

    page = doc_module(PAGE)
    again = client.run(run.id)  # the agent started again
    model = RecordingModel(messages=iter(script(TWICE[:1])))
    model.seen.clear()
    create_agent(model, journaled_tools([page.award_points], again)).invoke({"messages": [("user", "Go.")]})

    (answer,) = [m for m in model.seen[-1] if isinstance(m, ToolMessage)]
    assert (answer.content, answer.status) == (UNKNOWN_TEXT, "error")
    assert booked(giftdesk, AWARDS[0]["reference"]) == []  # not sent again


@pytest.mark.parametrize("handle", ["sync", "async"])
def test_an_async_tool_agent_killed_after_the_ledger_booked_is_reconciled_and_replayed(
    handle: str, seam_env: str, giftdesk: Provider, live_server: Any
) -> None:
    env = {
        "SEAM_URL": live_server.url,
        "SEAM_TOKEN": seam_env,
        "RUN_EXTERNAL_ID": ticket(),
        "GIFTDESK_URL": giftdesk.url,
        "AGENT_TOOLS": "async",
        "SEAM_HANDLE": handle,
    }
    second = AWARDS[1]["reference"]
    agent = agent_process("tests.clients.langgraph_agent", {**env, "HOLD_AFTER_REFERENCE": second})
    try:
        deadline = time.monotonic() + 60
        while not booked(giftdesk, second):
            assert agent.poll() is None, agent.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the ledger never booked the second award"
            time.sleep(0.05)
        agent.send_signal(signal.SIGKILL)
    finally:
        agent.kill()
        agent.communicate(timeout=30)

    run = Run.objects.get(external_id=env["RUN_EXTERNAL_ID"])
    assert intents(run.external_id) == [(1, 0, IntentStatus.PERFORMED, ""), (2, 0, IntentStatus.INTENDED, "")]

    early = agent_process("tests.clients.langgraph_agent", env)
    _, err = early.communicate(timeout=120)
    assert early.returncode != 0 and "IntentInDoubt" in err, err[-3000:]

    open_calls_past_in_flight(run=run)
    call_command("reconcile", older_than=0, stdout=io.StringIO())
    again = agent_process("tests.clients.langgraph_agent", env)
    out, err = again.communicate(timeout=120)

    run.refresh_from_db()
    recovery_figure.record(
        "adapter: langgraph",
        run,
        point=f"async tools, {handle} handle, killed after the ledger booked the 2nd award",
        doubled_or_lost=recovery_figure.counted_once(
            {award["reference"]: len(booked(giftdesk, award["reference"])) for award in AWARDS}
        ),
        false_statements=recovery_figure.handover_against(
            run, [i.step_id for i in run.intents.all() if booked(giftdesk, i.args["reference"])]
        ),
    )
    assert again.returncode == 0, err[-3000:]
    assert out.strip().endswith(FINAL_ANSWER)
    assert [len(booked(giftdesk, award["reference"])) for award in AWARDS] == [1, 1]
    assert run.status == RunStatus.COMPLETED
    assert intents(run.external_id) == [
        (1, 0, IntentStatus.PERFORMED, ""),
        (2, 0, IntentStatus.PERFORMED, ""),
    ]
