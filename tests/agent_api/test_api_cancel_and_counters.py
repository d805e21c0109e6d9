"""Cancelling a run and counting retries, repairs, replans and reflections, over REST."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from journal import services
from journal.models import JournalEvent, Run, RunStatus
from journal.services import Actor

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancelling_stops_new_intents_and_states_what_happened(
    agent_client: APIClient, make_run: Any, agent_actor: Actor
) -> None:
    run = make_run()
    done = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=agent_actor
    )
    services.outcome_record(intent=done.intent, ok=True, receipt={"label": "RL-1"}, actor=agent_actor)
    in_flight = services.intent_record(
        run=run, tool="offer_replacement", args={"qty": 1}, turn=2, actor=agent_actor
    )

    response = agent_client.post(
        f"/api/v1/runs/{run.pk}/cancel/", {"reason": "buyer withdrew"}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert body["run"]["status"] == "cancelled"
    assert [i["tool"] for i in body["completed"]] == ["start_return"]
    assert [i["step_id"] for i in body["uncertain"]] == [in_flight.intent.step_id]
    # Nothing completed is undone; the call in flight is reconciled once quiet, by its key.
    [cleanup] = body["cleanup_scheduled"]
    assert cleanup.startswith(
        f"reconcile step {in_flight.intent.turn}, “Offer replacement”: once the call has been quiet"
    )
    # The sentence names the step by its label; its key is the typed cleanup's (below).
    assert in_flight.intent.idempotency_key not in cleanup
    [typed] = body["cleanup"]
    assert (typed["code"], typed["step_id"], typed["key"]) == (
        "reconcile_when_quiet",
        in_flight.intent.step_id,
        in_flight.intent.idempotency_key,
    )
    refused = agent_client.post(
        f"/api/v1/runs/{run.pk}/intents/", {"tool": "issue_refund", "args": {}, "turn": 3}, format="json"
    )
    assert refused.status_code == 409 and "run" in refused.json()
    again = agent_client.post(f"/api/v1/runs/{run.pk}/cancel/", {"reason": "twice"}, format="json")
    assert again.status_code == 200
    assert JournalEvent.objects.filter(run=run, kind="run_cancelled").count() == 1


def test_cancel_needs_a_reason_and_a_running_run(
    agent_client: APIClient, make_run: Any, agent_actor: Actor
) -> None:
    run = make_run()
    missing = agent_client.post(f"/api/v1/runs/{run.pk}/cancel/", {}, format="json")
    assert missing.status_code == 400 and "reason" in missing.json()
    services.run_complete(run=run, actor=agent_actor)
    ended = agent_client.post(f"/api/v1/runs/{run.pk}/cancel/", {"reason": "late"}, format="json")
    assert ended.status_code == 409
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED


def test_each_kind_of_second_attempt_is_counted_apart(agent_client: APIClient, make_run: Any) -> None:
    run = make_run()
    for kind in ["reflection"] * 10 + ["retry", "repair", "replan"]:
        assert (
            agent_client.post(f"/api/v1/runs/{run.pk}/counters/", {"kind": kind}, format="json").status_code
            == 200
        )
    body = agent_client.get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["reflections"], body["retries"], body["repairs"], body["replans"], body["escalations"]) == (
        10,
        1,
        1,
        1,
        0,
    )
    bad = agent_client.post(f"/api/v1/runs/{run.pk}/counters/", {"kind": "escalation"}, format="json")
    assert bad.status_code == 400 and "kind" in bad.json()
    assert JournalEvent.objects.filter(run=run, kind="counted").count() == 13


def test_another_tenant_cannot_cancel(other_agent_client: APIClient, make_run: Any) -> None:
    run = make_run()
    response = other_agent_client.post(f"/api/v1/runs/{run.pk}/cancel/", {"reason": "x"}, format="json")
    assert response.status_code == 404
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
