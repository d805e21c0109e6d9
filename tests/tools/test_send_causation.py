"""Causation on the send path (issue 29, finding 7): a provider without idempotency keys answers
a cancellation of a subscription the customer had already cancelled with success. The send is
settled `already_so` (the state predates the intent), listed as such in the handover, never
undone (the customer's own change stands) and never sent again; the same rule as lookups'
(journal.tool_errors.predates_intent), on the engine's send, its re-send, and the agent's
outcome over REST."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from compensations.models import CatalogueEntry, Reversibility
from compensations.services import compensation_request, run_compensate
from handover import handover_for
from handover.why_words import call_verdict_words
from journal import services as journal
from journal.models import Intent, IntentStatus, JournalEvent, Run, Tenant
from journal.why import CallVerdict
from tests.agent_api.test_agent_lane import RUN_BODY
from tests.agent_api.test_api_journal import new_agent_client
from tests.support.plugins import declaring
from tests.tools.subscriptions import Subscriptions
from tools import registry
from tools.services import tool_perform, tool_resend

pytestmark = pytest.mark.django_db(transaction=True)

WITHOUT_LANE = [m for m in settings.MIDDLEWARE if m != "agent_api.lane.AgentLaneMiddleware"]
YESTERDAY = datetime.now(UTC) - timedelta(days=1)


@pytest.fixture
def provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tenant: Tenant) -> Iterator[Subscriptions]:
    """The subscription provider (a SQLite file), its tools registered, and the catalogue saying
    a cancellation is undone by reactivating."""
    monkeypatch.setenv("SUBSCRIPTIONS_DB", str(tmp_path / "subscriptions.sqlite"))
    with declaring("tests.tools.subscriptions"):
        CatalogueEntry.objects.create(
            tool="cancel_subscription",
            description="Reactivate the subscription.",
            compensating_tool="reactivate_subscription",
            argument_mapping={"subscription": "args.subscription"},
            reversibility=Reversibility.REVERSIBLE,
        )
        yield Subscriptions(tmp_path / "subscriptions.sqlite")
    registry.reset_registry()


def _cancel(run: Run, agent_actor: journal.Actor, *, turn: int = 1) -> journal.Performed:
    return tool_perform(
        run=run, tool="cancel_subscription", args={"subscription": "SUB-1"}, turn=turn, actor=agent_actor
    )


def test_a_send_answered_for_a_state_older_than_the_intent_is_already_so_and_never_undone(
    provider: Subscriptions, make_run: Callable[..., Run], agent_actor: journal.Actor
) -> None:
    provider.put("SUB-1", "cancelled", YESTERDAY)  # the customer cancelled it before the run
    run = make_run()

    sent = _cancel(run, agent_actor)

    row = Intent.objects.get(pk=sent.intent.pk)
    assert sent.intent.status == row.status == IntentStatus.ALREADY_SO
    assert row.receipt == {}  # the customer's record is evidence, not this call's receipt
    assert row.verdict["code"] == CallVerdict.ANSWER_PREDATES_INTENT
    assert "not the run's work" in call_verdict_words(row)
    event = JournalEvent.objects.get(intent=row, kind=JournalEvent.Kind.OUTCOME_RECORDED)
    assert event.data["evidence"]["at"] == YESTERDAY.isoformat()

    handover = handover_for(Run.objects.select_related("tenant").get(pk=run.pk))
    [already] = handover.already_so
    assert (already.step_id, already.evidence_at) == (row.step_id, YESTERDAY)
    assert row.step_id not in {step.step_id for step in handover.completed}

    # Never undone: no compensation is offered, and undoing the run leaves the customer's
    # cancellation standing.
    with pytest.raises(journal.Conflict):
        compensation_request(original=row, actor=agent_actor)
    assert run_compensate(run=run, actor=agent_actor).undone == []
    assert provider.get("SUB-1") == ("cancelled", YESTERDAY)
    # Never sent again: the same call is answered from the journal.
    assert _cancel(run, agent_actor).replayed


def test_a_send_the_run_caused_is_performed_and_undone(
    provider: Subscriptions, make_run: Callable[..., Run], agent_actor: journal.Actor
) -> None:
    """The control: the same tool, a subscription still active, is the run's work."""
    provider.put("SUB-1", "active", YESTERDAY)
    run = make_run()

    sent = _cancel(run, agent_actor)

    assert Intent.objects.get(pk=sent.intent.pk).status == IntentStatus.PERFORMED
    assert provider.get("SUB-1")[0] == "cancelled"  # type: ignore[index]
    assert run_compensate(run=run, actor=agent_actor).undone == ["cancel_subscription"]
    assert provider.get("SUB-1")[0] == "active"  # type: ignore[index]


def test_a_resend_answered_for_a_state_older_than_its_readmission_is_already_so(
    provider: Subscriptions, make_run: Callable[..., Run], agent_actor: journal.Actor
) -> None:
    """A call reconciliation proved never happened is re-sent; meanwhile the customer
    cancelled it themselves: the re-send's success is not the run's work."""
    provider.put("SUB-1", "active", YESTERDAY)
    run = make_run()
    intent = journal.intent_record(
        run=run, tool="cancel_subscription", args={"subscription": "SUB-1"}, turn=1, actor=agent_actor
    ).intent
    Intent.objects.filter(pk=intent.pk).update(status=IntentStatus.NOT_PERFORMED)  # as reconciled
    provider.put("SUB-1", "cancelled", datetime.now(UTC) - timedelta(minutes=1))

    resent = tool_resend(intent=Intent.objects.get(pk=intent.pk), actor=agent_actor)

    assert resent.status == Intent.objects.get(pk=intent.pk).status == IntentStatus.ALREADY_SO


def _recorded(client: APIClient) -> tuple[str, Intent]:
    run = client.post("/api/v1/runs/", RUN_BODY, format="json").json()["id"]
    body = {"tool": "cancel_subscription", "args": {"subscription": "SUB-1"}, "turn": 1}
    step = client.post(f"/api/v1/runs/{run}/intents/", body, format="json").json()["step_id"]
    return f"/api/v1/runs/{run}/intents/{step}/outcome/", Intent.objects.get(step_id=step)


@pytest.mark.parametrize("lane", [True, False], ids=["agent lane", "DRF view"])
def test_an_agents_outcome_with_evidence_older_than_the_intent_is_already_so(
    provider: Subscriptions, tenant: Tenant, lane: bool
) -> None:
    client = new_agent_client(tenant, "bot")
    with override_settings(MIDDLEWARE=settings.MIDDLEWARE if lane else WITHOUT_LANE):
        url, intent = _recorded(client)
        older = (intent.intended_at - timedelta(seconds=5)).isoformat()
        body = {"ok": True, "summary": "cancelled", "receipt": {"id": "SUB-1"}, "evidence_at": older}
        answer = client.post(url, body, format="json")
        again = client.post(url, body, format="json")

        later_url, later = _recorded(client)
        newer = (later.intended_at + timedelta(seconds=1)).isoformat()
        performed = client.post(later_url, {"ok": True, "evidence_at": newer}, format="json")

    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == IntentStatus.ALREADY_SO
    assert (again.status_code, again.json()) == (200, answer.json())
    assert performed.json()["status"] == IntentStatus.PERFORMED
    handover = client.get(f"/api/v1/runs/{intent.run_id}/handover/").json()
    assert [step["step_id"] for step in handover["already_so"]] == [intent.step_id]
    assert handover["completed"] == []


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"evidence_at": "yesterday"}, id="not a time"),
        pytest.param({"evidence_at": "2026-11-29T10:00:00"}, id="no zone"),
        pytest.param({"evidence_at": 1764410400}, id="a number"),
        pytest.param(
            {"ok": False, "error_class": "permanent", "evidence_at": "2026-11-29T10:00:00Z"},
            id="on a failure",
        ),
    ],
)
def test_a_bad_evidence_at_is_400_naming_it_and_leaves_the_intent_open(
    provider: Subscriptions, tenant: Tenant, changes: dict[str, Any]
) -> None:
    client = new_agent_client(tenant, "bot")
    url, intent = _recorded(client)

    response = client.post(url, {"ok": True, **changes}, format="json")

    assert response.status_code == 400, response.content
    assert "evidence_at" in response.json()
    assert Intent.objects.get(pk=intent.pk).status == IntentStatus.INTENDED


def test_a_naive_evidence_at_in_process_is_refused(
    provider: Subscriptions, make_run: Callable[..., Run], agent_actor: journal.Actor
) -> None:
    run = make_run()
    intent = journal.intent_record(
        run=run, tool="cancel_subscription", args={"subscription": "SUB-1"}, turn=1, actor=agent_actor
    ).intent
    with pytest.raises(journal.InvalidInput) as refused:
        journal.outcome_record(intent=intent, ok=True, evidence_at=datetime(2026, 1, 1), actor=agent_actor)
    assert refused.value.field == "evidence_at"
