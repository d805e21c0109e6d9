"""Bounded work through the API and the journal (issue 20, "Bounded work"): a plan longer than
SEAM_MAX_PLAN_STEPS, an intent beyond SEAM_MAX_INTENTS_PER_RUN, a body over
DATA_UPLOAD_MAX_MEMORY_SIZE and a time outside the sane range are each refused with a 4xx naming
the field (or the limit), and nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from journal import services
from journal.models import Intent, JournalEvent, Run
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

PLAN_STEP = {"tool": "issue_refund", "args": {"amount": "1.00"}}


def _counts() -> tuple[int, int, int]:
    return Run.objects.count(), Intent.objects.count(), JournalEvent.objects.count()


def _create(client: APIClient, **fields: Any) -> Any:
    body = {"task_type": "returns", "versions": dict(factories.VERSIONS), **fields}
    return client.post("/api/v1/runs/", body, format="json")


@override_settings(SEAM_MAX_PLAN_STEPS=5)
def test_a_plan_longer_than_the_limit_is_refused_naming_plan_and_the_setting(
    agent_client: APIClient, tenant: Any, agent_actor: services.Actor
) -> None:
    before = _counts()
    response = _create(agent_client, plan=[{**PLAN_STEP, "occurrence": i} for i in range(6)])
    assert response.status_code == 400, response.content
    assert "SEAM_MAX_PLAN_STEPS" in response.json()["plan"][0]
    with pytest.raises(services.LimitExceeded) as refused:
        factories.run_via_service(tenant=tenant, actor=agent_actor, plan=[PLAN_STEP] * 6)
    assert (refused.value.field, refused.value.limit) == ("plan", 5)
    assert _counts() == before
    assert _create(agent_client, plan=[{**PLAN_STEP, "occurrence": i} for i in range(5)]).status_code == 201


def test_intents_beyond_the_limit_are_refused_but_replays_and_undos_are_admitted(
    agent_client: APIClient, tenant: Any, agent_actor: services.Actor
) -> None:
    with override_settings(SEAM_MAX_INTENTS_PER_RUN=3):
        run = factories.run_via_service(tenant=tenant, actor=agent_actor, plan=[])
        url = f"/api/v1/runs/{run.pk}/intents/"
        for turn in range(3):
            body = {"tool": "issue_refund", "args": {"amount": f"{turn + 1}.00"}, "turn": turn}
            assert agent_client.post(url, body, format="json").status_code == 201
        before = _counts()
        response = agent_client.post(
            url, {"tool": "issue_refund", "args": {"amount": "4.00"}, "turn": 3}, format="json"
        )
        assert response.status_code == 409, response.content
        assert "SEAM_MAX_INTENTS_PER_RUN" in response.json()["run"][0]
        assert _counts() == before
        # The same intent again is the row already recorded, not a new one.
        replay = {"tool": "issue_refund", "args": {"amount": "1.00"}, "turn": 0}
        assert agent_client.post(url, replay, format="json").status_code == 200
        with pytest.raises(services.IntentLimitReached):
            services.intent_record(
                run=run, tool="issue_refund", args={"amount": "2"}, turn=9, actor=agent_actor
            )
        undo = services.intent_record(
            run=run,
            tool="reverse_refund",
            args={"refund_id": "R-1"},
            turn=9,
            actor=agent_actor,
            compensation=True,
        )
        assert undo.created


def test_a_body_over_the_upload_limit_is_answered_in_json_naming_the_limit(agent_client: APIClient) -> None:
    huge = json.dumps({"task_type": "returns", "ticket_id": "x" * (3 * 1024 * 1024)})
    before = _counts()
    response = agent_client.post("/api/v1/runs/", huge, content_type="application/json")
    assert response.status_code == 413, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.json()["detail"]
    assert len(response.content) < 1000
    assert _counts() == before


def test_times_outside_the_sane_range_are_refused_naming_the_field(
    agent_client: APIClient, tenant: Any, agent_actor: services.Actor
) -> None:
    before = _counts()
    response = _create(agent_client, deadline="9999-12-31T00:00:00Z")
    assert response.status_code == 400 and "deadline" in response.json(), response.content
    response = _create(agent_client, deadline="1970-01-01T00:00:00Z")
    assert response.status_code == 400 and "deadline" in response.json(), response.content
    assert _counts() == before
    run = factories.run_via_service(tenant=tenant, actor=agent_actor)
    url = f"/api/v1/runs/{run.pk}/customer-messages/"
    before = _counts()
    told = {"channel": "email", "body": "Your refund is on its way.", "told_at": "9999-01-01T00:00:00Z"}
    response = agent_client.post(url, told, format="json")
    assert response.status_code == 400 and "told_at" in response.json(), response.content
    assert _counts() == before
    assert (
        agent_client.post(url, {**told, "told_at": "2026-01-01T00:00:00Z"}, format="json").status_code == 201
    )
