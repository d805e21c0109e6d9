"""The framework adapters (seam_client.adapters) under each framework's own tool-execution path:
a LangGraph agent (create_agent, whose ToolNode runs the tools), an OpenAI Agents SDK
agent (agents.Runner) and a Pydantic AI agent (Agent.run, through a WrapperToolset), each with a
scripted fake model (no network) and plain tools on the giftdesk's keyless points ledger. The
agent's process is SIGKILLed after the ledger booked its second award and before the outcome was
recorded; Seam's reconciliation finds the entry by its reference; the handover, read through
Seam's API, shows both awards done and nothing in doubt; and the agent started again on the same
run replays both awards from the journal (the ledger, which books every request, still holds
each once) and finishes. Started again before the reconciliation, it stops at the call in doubt
without running the tool."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import modify_settings
from seam_client import SeamClient

from devtools.processes import ROOT
from examples.giftdesk.seam import provider_url
from journal.models import Intent, IntentStatus, Run, RunStatus, Tenant
from tests.clients.agent_support import AWARDS, FINAL_ANSWER
from tests.clients.mcp_support import CLIENT_SRC, agent_token
from tests.examples.giftdesk_support import APP, Provider, running_provider
from tests.support import recovery_figure
from tests.support.in_flight import open_calls_past_in_flight

pytestmark = pytest.mark.django_db(transaction=True)

# Each kill takes 6-10 s, so all three run in `make chaos`, where the recovery figure counts the
# three adapters' kill points side by side. `make test` still kills a LangGraph agent, with async
# tools (test_langchain_adapter.py), on the same ToolNode path.
AGENTS = [
    pytest.param("tests.clients.langgraph_agent", marks=pytest.mark.chaos),
    pytest.param("tests.clients.openai_agent", marks=pytest.mark.chaos),
    pytest.param("tests.clients.pydantic_agent", marks=pytest.mark.chaos),
]


@pytest.fixture
def giftdesk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Provider]:
    with running_provider(tmp_path / "giftdesk.json") as provider:
        monkeypatch.setenv("GIFTDESK_URL", provider.url)
        with modify_settings(INSTALLED_APPS={"append": APP}):
            call_command("seam_seed", stdout=io.StringIO())
            assert provider_url() == provider.url
            yield provider


def agent_process(module: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", module],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(CLIENT_SRC), str(ROOT), os.environ.get("PYTHONPATH")])
            ),
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def booked(provider: Provider, reference: str) -> list[dict[str, Any]]:
    return [entry for entry in provider.state()["points"] if entry["reference"] == reference]


@pytest.mark.parametrize("module", AGENTS)
def test_an_agent_killed_after_the_ledger_booked_is_reconciled_handed_over_and_replayed(
    module: str, giftdesk: Provider, live_server: Any, tenant: Tenant
) -> None:
    token = agent_token(tenant)
    env = {
        "SEAM_URL": live_server.url,
        "SEAM_TOKEN": token,
        "RUN_EXTERNAL_ID": f"agent-{uuid.uuid4().hex[:10]}",
        "GIFTDESK_URL": giftdesk.url,
    }
    second = AWARDS[1]["reference"]

    agent = agent_process(module, {**env, "HOLD_AFTER_REFERENCE": second})
    try:
        deadline = time.monotonic() + 60
        while not booked(giftdesk, second):
            if agent.poll() is not None:
                raise AssertionError(
                    f"the agent exited ({agent.returncode}): {agent.communicate()[1][-3000:]}"
                )
            assert time.monotonic() < deadline, "the ledger never booked the second award"
            time.sleep(0.05)
        agent.send_signal(signal.SIGKILL)
    finally:
        agent.kill()
        agent.communicate(timeout=30)
    assert agent.returncode == -signal.SIGKILL

    run = Run.objects.get(tenant=tenant, external_id=env["RUN_EXTERNAL_ID"])
    assert run.status == RunStatus.RUNNING
    intents = list(Intent.objects.filter(run=run).order_by("turn"))
    # Only the writes were journaled (the balance lookup is read-only), the second left open.
    assert [(i.turn, i.tool, i.args["reference"], i.status) for i in intents] == [
        (1, "award_points", AWARDS[0]["reference"], IntentStatus.PERFORMED),
        (2, "award_points", second, IntentStatus.INTENDED),
    ]
    assert intents[0].receipt["entry_id"] == booked(giftdesk, AWARDS[0]["reference"])[0]["entry_id"]

    # Started again before reconciliation: the open call is in doubt, so the tool is not run again
    # and the agent stops there.
    early = agent_process(module, env)
    _, err = early.communicate(timeout=120)
    assert early.returncode != 0 and "IntentInDoubt" in err, err[-3000:]
    assert [len(booked(giftdesk, award["reference"])) for award in AWARDS] == [1, 1]

    open_calls_past_in_flight(run=run)
    call_command("reconcile", older_than=0, stdout=io.StringIO())

    held = intents[1]
    held.refresh_from_db()
    assert held.status == IntentStatus.PERFORMED
    assert held.receipt["entry_id"] == booked(giftdesk, second)[0]["entry_id"]

    handover = SeamClient(live_server.url, token).run(str(run.id)).handover()
    assert sorted(step["receipt"]["entry_id"] for step in handover.completed) == sorted(
        entry["entry_id"] for entry in giftdesk.state()["points"]
    )
    assert handover.uncertain == [] and handover.not_done == []

    # Started again on the same run: both awards answer from the journal, none is booked again.
    again = agent_process(module, env)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err[-3000:]
    assert out.strip().endswith(FINAL_ANSWER)
    run.refresh_from_db()
    recovery_figure.record(
        f"adapter: {module.rsplit('.', 1)[-1].removesuffix('_agent')}",
        run,
        point="killed after the ledger booked the 2nd award",
        doubled_or_lost=recovery_figure.counted_once(
            {award["reference"]: len(booked(giftdesk, award["reference"])) for award in AWARDS}
        ),
        false_statements=recovery_figure.handover_against(
            run, [i.step_id for i in Intent.objects.filter(run=run) if booked(giftdesk, i.args["reference"])]
        ),
    )
    assert [len(booked(giftdesk, award["reference"])) for award in AWARDS] == [1, 1]
    assert run.status == RunStatus.COMPLETED
    assert Intent.objects.filter(run=run).count() == 2
