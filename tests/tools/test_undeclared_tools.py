"""A misspelt tool name is refused when the deployment declares its tools (issue 29, finding 6):
otherwise it is journaled under a name no connector knows, and can never be reconciled. The
refusal is a 400 naming `tool` and the declared tools (the close matches first), on both REST
paths and in process, and writes nothing. SEAM_UNDECLARED_TOOLS=accept keeps journaling them for
agents that run tools Seam never calls."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from journal import services as journal
from journal.models import Intent, JournalEvent, Run, Tenant
from tests.agent_api.test_agent_lane import RUN_BODY
from tests.agent_api.test_api_journal import new_agent_client
from tests.support.plugins import declaring
from tools.services import tool_perform

pytestmark = pytest.mark.django_db(transaction=True)

WITHOUT_LANE = [m for m in settings.MIDDLEWARE if m != "agent_api.lane.AgentLaneMiddleware"]
MISSPELT = {"tool": "cancel_subscriptoin", "args": {"subscription": "SUB-1"}, "turn": 1}


@pytest.fixture
def declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SUBSCRIPTIONS_DB", str(tmp_path / "subscriptions.sqlite"))
    with declaring("tests.tools.subscriptions"):
        yield


def _journal() -> tuple[int, int]:
    return Intent.objects.count(), JournalEvent.objects.count()


@pytest.mark.parametrize("lane", [True, False], ids=["agent lane", "DRF view"])
def test_an_undeclared_tool_is_400_naming_tool_and_the_declared_tools(
    declared: None, tenant: Tenant, lane: bool
) -> None:
    client = new_agent_client(tenant, "bot")
    middleware = settings.MIDDLEWARE if lane else WITHOUT_LANE
    with override_settings(MIDDLEWARE=middleware):
        run = client.post("/api/v1/runs/", RUN_BODY, format="json").json()["id"]
        url = f"/api/v1/runs/{run}/intents/"
        # The same caller's earlier call about the run makes the lane assert it (one statement).
        assert (
            client.post(url, {**MISSPELT, "tool": "reactivate_subscription"}, format="json").status_code
            == 201
        )
        before = _journal()
        refused = client.post(url, MISSPELT, format="json")
        accepted = client.post(url, {**MISSPELT, "tool": "cancel_subscription", "turn": 2}, format="json")

    assert refused.status_code == 400, refused.content
    [message] = refused.json()["tool"]
    assert "no tool named 'cancel_subscriptoin' is declared" in message
    assert "did you mean cancel_subscription?" in message
    assert message.endswith("the declared tools are cancel_subscription, reactivate_subscription")
    assert accepted.status_code == 201
    assert _journal() == (before[0] + 1, before[1] + 1)  # the accepted intent alone


def test_an_undeclared_tool_is_refused_in_process_and_by_tool_perform(
    declared: None, make_run: Callable[..., Run], agent_actor: journal.Actor
) -> None:
    run = make_run()
    before = _journal()
    with pytest.raises(journal.InvalidInput) as refused:
        journal.intent_record(run=run, tool="cancel_subscriptoin", args={}, turn=1, actor=agent_actor)
    assert refused.value.field == "tool"
    assert "did you mean cancel_subscription?" in refused.value.message
    with pytest.raises(journal.InvalidInput) as performed:
        tool_perform(run=run, tool="cancel_subscriptoin", args={}, turn=1, actor=agent_actor)
    assert performed.value.field == "tool"
    assert "did you mean cancel_subscription?" in performed.value.message
    assert _journal() == before


@pytest.mark.parametrize(
    ("declares", "overrides", "why"),
    [
        pytest.param(True, {"SEAM_UNDECLARED_TOOLS": "accept"}, "accepted by the setting", id="accept"),
        # The suite's installed apps declare no tool (no sandbox is running: sandbox/seam.py).
        pytest.param(False, {}, "no tool is declared", id="nothing declared"),
    ],
)
def test_an_undeclared_tool_is_journaled_where_the_deployment_accepts_them(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tenant: Tenant,
    declares: bool,
    overrides: dict[str, Any],
    why: str,
) -> None:
    monkeypatch.setenv("SUBSCRIPTIONS_DB", str(tmp_path / "subscriptions.sqlite"))
    client = new_agent_client(tenant, "bot")
    declared = declaring("tests.tools.subscriptions") if declares else contextlib.nullcontext()
    with declared, override_settings(**overrides):
        run = client.post("/api/v1/runs/", RUN_BODY, format="json").json()["id"]
        response = client.post(f"/api/v1/runs/{run}/intents/", MISSPELT, format="json")
    assert response.status_code == 201, (why, response.content)


def test_a_setting_outside_refuse_and_accept_is_a_configuration_error(
    declared: None, make_run: Callable[..., Run], agent_actor: journal.Actor
) -> None:
    run = make_run()
    with (
        override_settings(SEAM_UNDECLARED_TOOLS="warn"),
        pytest.raises(Exception, match="SEAM_UNDECLARED_TOOLS"),
    ):
        journal.intent_record(run=run, tool="cancel_subscriptoin", args={}, turn=1, actor=agent_actor)
