"""The API's edges (agent_api/edges.py), proved both ways an agent's call travels: each request
is sent once through the agent lane (agent_api.lane, which skips the console's middleware) and
once with the lane taken out of MIDDLEWARE, through Django's whole chain, and must be answered the
same: the same status, the same JSON, the same rows written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings

from journal.models import AgentToken, Run, Tenant
from tests.factories import BENCH_PLAN, VERSIONS

pytestmark = pytest.mark.django_db

HOST = "seam.test"
LANE = "agent_api.lane.AgentLaneMiddleware"
RUN_BODY = {"task_type": "returns", "versions": VERSIONS, "plan": BENCH_PLAN, "ticket_id": "T-1"}


def _answer(response: Any) -> tuple[int, Any, str]:
    kind = response.get("Content-Type", "")
    body = json.loads(response.content) if kind.startswith("application/json") else response.content
    return response.status_code, body, response.get("Location", "")


def _both_ways(tenant: Tenant, method: str, path: str, **extra: Any) -> tuple[Any, Any]:
    """The answer through the lane, then through the whole chain, each with the runs it wrote."""
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="edge-bot", digest=AgentToken.digest_of(secret))
    client = Client(HTTP_HOST=HOST, HTTP_AUTHORIZATION=f"Bearer {secret}")
    answers = []
    for middleware in (settings.MIDDLEWARE, [m for m in settings.MIDDLEWARE if m != LANE]):
        with override_settings(MIDDLEWARE=middleware, ALLOWED_HOSTS=[HOST]):
            before = Run.objects.count()
            answer = _answer(getattr(client, method)(path, **extra))
            answers.append((answer, Run.objects.count() - before))
    return answers[0], answers[1]


def test_the_lane_is_in_the_chain_these_tests_take_out() -> None:
    assert LANE in settings.MIDDLEWARE


@pytest.mark.parametrize(
    ("method", "path", "extra", "status", "code", "runs"),
    [
        # A Host the server does not answer for, with a token: the lane used to serve it.
        ("get", "/api/v1/runs/", {"HTTP_HOST": "evil.example"}, 400, "host_not_allowed", 0),
        (
            "post",
            "/api/v1/runs/",
            {"HTTP_HOST": "evil.example", "data": RUN_BODY, "content_type": "application/json"},
            400,
            "host_not_allowed",
            0,
        ),
        # A write without its trailing slash: never redirected (the body would be lost).
        (
            "post",
            "/api/v1/runs",
            {"data": RUN_BODY, "content_type": "application/json"},
            404,
            "trailing_slash",
            0,
        ),
        ("get", "/api/v1/nowhere/", {}, 404, "not_found", 0),
        ("get", "/api/v1/runs/not-a-run/", {}, 404, None, 0),
        ("put", "/api/v1/runs/", {"data": "{}", "content_type": "application/json"}, 405, None, 0),
        ("post", "/api/v1/runs/", {"data": "{bad", "content_type": "application/json"}, 400, None, 0),
        ("post", "/api/v1/runs/", {"data": RUN_BODY, "content_type": "application/json"}, 201, None, 1),
    ],
)
def test_each_edge_is_answered_the_same_both_ways_in_json(
    tenant: Tenant, method: str, path: str, extra: dict[str, Any], status: int, code: str | None, runs: int
) -> None:
    through_lane, through_chain = _both_ways(tenant, method, path, **extra)
    (lane_status, lane_body, _), lane_runs = through_lane

    assert lane_status == status, lane_body
    assert isinstance(lane_body, dict), "every answer of the API is JSON"
    if code is not None:
        assert lane_body["code"] == code and lane_body["detail"]
    assert lane_runs == runs
    if status == 201:  # a new run each way: its id and times differ, the rest does not
        assert through_chain[0][0] == 201 and through_chain[1] == 1
        chain_body = through_chain[0][1]
        assert set(lane_body) == set(chain_body)
        assert lane_body["ticket_id"] == chain_body["ticket_id"] == "T-1"
    else:
        assert through_lane == through_chain


def test_a_read_without_its_trailing_slash_is_redirected_both_ways(tenant: Tenant) -> None:
    through_lane, through_chain = _both_ways(tenant, "get", "/api/v1/runs?status=escalated")

    assert through_lane == through_chain
    (status, _, location), _ = through_lane
    assert (status, location) == (301, "/api/v1/runs/?status=escalated")


def test_a_write_without_its_trailing_slash_names_the_path_to_use(tenant: Tenant) -> None:
    through_lane, _ = _both_ways(
        tenant, "post", "/api/v1/runs", data=RUN_BODY, content_type="application/json"
    )
    (_, body, _), _ = through_lane
    assert "/api/v1/runs/" in body["detail"]
