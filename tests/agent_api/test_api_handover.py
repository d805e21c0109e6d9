"""GET /api/v1/runs/{id}/handover/: the same object the run page shows, for the run's own tenant,
and exactly the object /api/schema/ describes."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import jsonschema
import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from agent_api.handover_schema import HandoverSerializer
from handover import handover_for
from journal.models import AgentToken, Run
from tests import factories
from tests.support.demo_runs import seed_the_demo

pytestmark = pytest.mark.django_db(transaction=True)

# A run stopped for looping, with the facts its reason carries (journal.why's looping).
LOOPING_WHY = {
    "code": "looping",
    "refusals": 5,
    "minutes": 10,
    "calls": [{"tool": "refund", "error_class": "permanent", "attempts": 3}],
}


def _agent(tenant: Any) -> APIClient:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="bot", digest=AgentToken.digest_of(secret))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_the_api_returns_the_handover_the_page_shows(escalated_bench: Run, persona: Any) -> None:
    response = _agent(escalated_bench.tenant).get(f"/api/v1/runs/{escalated_bench.pk}/handover/")

    assert response.status_code == 200
    body = response.json()
    assert body == HandoverSerializer(handover_for(escalated_bench)).data
    assert body["next_action"]["code"] == "resume"
    assert [c["tool"] for c in body["completed"]] == ["start_return", "offer_replacement"]
    assert body["not_done"][0]["detail"] == "$14.95 expedited delivery fee"

    staff = Client()
    staff.force_login(persona("support_staff", escalated_bench.tenant))
    page = staff.get(f"/runs/{escalated_bench.pk}/").content.decode()
    for item in body["completed"]:
        assert item["detail"] in page
        assert re.search(rf"reversible:\s*{re.escape(item['reversibility']['sentence'])}</div>", page)
    assert 'data-code="resume"' in page


def test_another_tenants_handover_is_not_found(escalated_bench: Run) -> None:
    outsider = _agent(factories.TenantFactory(slug="acme"))
    assert outsider.get(f"/api/v1/runs/{escalated_bench.pk}/handover/").status_code == 404
    assert APIClient().get(f"/api/v1/runs/{escalated_bench.pk}/handover/").status_code == 401


# --- the published schema is the contract ------------------------------------------------------


def _strict(node: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema, made strict: `nullable` becomes a union with null, and
    an object with listed properties admits no others, so a field the handover has and the schema
    does not describe fails, as does a described field the handover lacks (`required`)."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    strict = {key: _strict(value) for key, value in node.items() if key != "nullable"}
    if "properties" in strict and "additionalProperties" not in strict:
        strict["additionalProperties"] = False
    if node.get("nullable"):
        return {"anyOf": [strict, {"type": "null"}]}
    return strict


def _handover_validator() -> jsonschema.Draft202012Validator:
    published = APIClient().get("/api/schema/", {"format": "json"}).json()
    response = published["paths"]["/api/v1/runs/{run_id}/handover/"]["get"]["responses"]["200"]
    root = {
        **_strict(response["content"]["application/json"]["schema"]),
        "components": _strict(published["components"]),
    }
    jsonschema.Draft202012Validator.check_schema(root)
    return jsonschema.Draft202012Validator(
        root, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def test_every_handover_the_demo_shows_is_exactly_what_the_schema_publishes(
    sandbox_tools: str, persona: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = seed_the_demo(sandbox_tools, monkeypatch)
    validator = _handover_validator()
    agent = _agent(runs[0].tenant)
    runs[0].assignee = persona("support_staff", runs[0].tenant, "ana")
    runs[0].save(update_fields=["assignee"])

    handovers = []
    for run in runs:
        response = agent.get(f"/api/v1/runs/{run.pk}/handover/")
        assert response.status_code == 200
        body = response.json()
        problems = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(body)
        ]
        assert not problems, f"{run.ticket_id}: {problems}"
        handovers.append(body)

    # Every part of the object was there to check in at least one of them, in its fuller form.
    steps = [step for h in handovers for step in h["completed"]]
    assert any(h["assignee"] for h in handovers)
    assert any(h["not_done"] for h in handovers)
    assert any(h["uncertain"] for h in handovers)
    assert any(h["customer_told"] for h in handovers)
    assert any(h["next_action"]["compensations_available"] for h in handovers)
    assert any(isinstance(s["reversible"], str) for s in steps)
    assert {s["reversibility"]["kind"] for s in steps} >= {"yes", "until"}
    assert len({h["next_action"]["code"] for h in handovers}) > 1
    assert any(s["compensation"] and s["compensation"]["dead_letter"] for s in steps)
    coverage = [h["coverage"] for h in handovers if h["coverage"]]
    assert coverage and coverage[0]["checked"] and coverage[0]["decision"]["rests_on"]
    assert all(h["attempts"]["attempts"] >= len(h["completed"]) for h in handovers)
    assert any(h["attempts"]["by_tool"] for h in handovers)


def test_the_schema_refuses_a_handover_with_a_field_it_does_not_describe(escalated_bench: Run) -> None:
    """The contract test above can fail: an undescribed field, a missing one, a wrong type."""
    validator = _handover_validator()
    body = _agent(escalated_bench.tenant).get(f"/api/v1/runs/{escalated_bench.pk}/handover/").json()
    assert validator.is_valid(body)

    assert not validator.is_valid({**body, "surprise": 1})
    assert not validator.is_valid({k: v for k, v in body.items() if k != "state"})
    first = body["completed"][0]
    assert not validator.is_valid({**body, "completed": [{**first, "reversible": 3}]})
    unheard_of = {**first["reversibility"], "kind": "maybe"}
    assert not validator.is_valid({**body, "completed": [{**first, "reversibility": unheard_of}]})
    assert not validator.is_valid({**body, "next_action": {**body["next_action"], "code": "panic"}})
    assert not validator.is_valid({**body, "attempts": {**body["attempts"], "looping": "yes"}})
    assert not validator.is_valid({k: v for k, v in body.items() if k != "attempts"})


def test_the_handover_carries_the_attempts_counted_apart_and_the_loop_flag(
    tenant: Any, agent_actor: Any
) -> None:
    run = factories.run_via_service(tenant=tenant, actor=agent_actor)
    started = timezone.now() - timedelta(minutes=5)
    calls = [("refund", {"n": 1}, "failed", "permanent")] * 3 + [
        ("credit", {"a": -1}, "failed", "invalid_input"),
        ("credit", {"a": 5}, "performed", ""),
    ]
    for n, (tool, args, status, error_class) in enumerate(calls):
        factories.call_row(
            run, tool, args, status, n=n, at=started + timedelta(seconds=n), error_class=error_class
        )
    Run.objects.filter(pk=run.pk).update(reflections=4, replans=2, outcome_why=LOOPING_WHY)

    body = _agent(tenant).get(f"/api/v1/runs/{run.pk}/handover/").json()

    assert _handover_validator().is_valid(body)
    assert body["attempts"] == {
        "attempts": 5,
        "retries": 2,
        "repairs": 1,
        "replans": 2,
        "reflections": 4,
        "escalations": 0,
        "derived": {"retries": 2, "repairs": 1, "replans": 0},
        "reported": {"retries": 0, "repairs": 0, "replans": 2, "reflections": 4, "escalations": 0},
        "by_tool": [
            {"tool": "refund", "attempts": 3, "outcomes": {"permanent": 3}},
            {"tool": "credit", "attempts": 2, "outcomes": {"invalid_input": 1, "ok": 1}},
        ],
        "error_classes": {"permanent": 3, "invalid_input": 1},
        "looping": True,
    }
