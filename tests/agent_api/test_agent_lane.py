"""The agent lane (agent_api/lane.py) and the journal views' lean handlers (agent_api.views).

An agent-token call to /api/v1/ skips the console's middleware, and a plain intent or outcome
call skips DRF's machinery too. Neither may change an answer: the same requests, sent with the
lane and without it, get the same status, body and headers, and leave the same rows."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agent_api import views as api_views
from agent_api.serializers import (
    MAX_DB_INT,
    CancelSerializer,
    CountSerializer,
    CustomerMessageCreateSerializer,
    IntentCreateSerializer,
    OutcomeSerializer,
    plainly_valid,
)
from journal.models import CustomerMessage, ErrorClass, Intent, JournalEvent, Tenant
from journal.services import COUNTERS
from tests.agent_api.test_api_journal import new_agent_client

pytestmark = pytest.mark.django_db(transaction=True)

WITHOUT_LANE = [m for m in settings.MIDDLEWARE if m != "agent_api.lane.AgentLaneMiddleware"]
HEADERS = ("Content-Type", "Allow", "Vary", "X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy")


# --- plain bodies -----------------------------------------------------------------------------

TEXT = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", " ", " x", "x ", "\x00", "\ud800", "é", "x" * 100, "x" * 101, "x" * 201, "\t"]),
)
VALUE = st.one_of(
    TEXT,
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([MAX_DB_INT, MAX_DB_INT + 1, 2.0, 2.5, "2", "1.0"]),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.integers(), max_size=2),
    st.sampled_from(ErrorClass.values),
    st.sampled_from([*CustomerMessage.Channel.values, *sorted(COUNTERS)]),
)


def bodies(fields: list[str]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.dictionaries(st.sampled_from([*fields, "extra"]), VALUE, max_size=len(fields) + 1),
        st.lists(st.integers(), max_size=1),
        st.none(),
    )


@pytest.mark.parametrize(
    ("serializer", "fields"),
    [
        (IntentCreateSerializer, ["tool", "args", "turn", "occurrence"]),
        (OutcomeSerializer, ["ok", "summary", "receipt", "error_class", "request_id", "evidence_at"]),
        # Every write view validates through the same check (agent_api.serializers.validated).
        (CustomerMessageCreateSerializer, ["channel", "body", "told_at", "about_steps"]),
        (CancelSerializer, ["reason"]),
        (CountSerializer, ["kind"]),
    ],
)
def test_a_plainly_valid_body_is_one_the_serializer_accepts_with_the_same_data(
    serializer: Any, fields: list[str]
) -> None:
    @hypothesis_settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(bodies(fields))
    def check(body: Any) -> None:
        plain = plainly_valid(serializer, body)
        if plain is None:
            return
        drf = serializer(data=body)
        assert drf.is_valid(), (body, drf.errors)
        assert plain == dict(drf.validated_data)
        assert {k: type(v) for k, v in plain.items()} == {k: type(v) for k, v in drf.validated_data.items()}

    check()


def test_an_agents_usual_bodies_are_plain() -> None:
    assert plainly_valid(IntentCreateSerializer, {"tool": "issue_refund", "args": {"a": 1}, "turn": 0}) == {
        "tool": "issue_refund",
        "args": {"a": 1},
        "turn": 0,
        "occurrence": 0,
    }
    assert plainly_valid(
        OutcomeSerializer,
        {"ok": False, "summary": "délai dépassé", "error_class": "transient", "request_id": "r-1"},
    ) == {
        "ok": False,
        "summary": "délai dépassé",
        "receipt": {},
        "error_class": "transient",
        "request_id": "r-1",
        "evidence_at": None,
    }


# --- the same answers with and without the lane -----------------------------------------------


RUN_BODY = {
    "task_type": "returns",
    "versions": {"schema": "1", "flow": "returns-v3", "policy": "p-7", "capability": "c-2"},
}
STAMP = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
KEY = re.compile(r"\b[0-9a-f]{64}\b")


def _conversation(client: APIClient, revoked: APIClient) -> Iterator[tuple[str, Any]]:
    """An agent's calls, plain and otherwise, each answer normalised (ids, keys and times
    replaced) so that two runs' conversations compare."""
    created = client.post("/api/v1/runs/", RUN_BODY, format="json")
    assert created.status_code == 201, created.content
    run = created.json()["id"]
    intents = f"/api/v1/runs/{run}/intents/"
    calls: list[tuple[str, APIClient, str, Any, dict[str, str]]] = [
        (
            "plain intent",
            client,
            intents,
            {"tool": "issue_refund", "args": {"amount": "9.50"}, "turn": 1},
            {},
        ),
        (
            "the same intent again",
            client,
            intents,
            {"tool": "issue_refund", "args": {"amount": "9.50"}, "turn": 1},
            {},
        ),
        (
            "same step, other args",
            client,
            intents,
            {"tool": "issue_refund", "args": {"amount": "1"}, "turn": 1},
            {},
        ),
        ("turn as text", client, intents, {"tool": "issue_refund", "args": {}, "turn": "2"}, {}),
        ("turn negative", client, intents, {"tool": "issue_refund", "args": {}, "turn": -1}, {}),
        ("tool with spaces", client, intents, {"tool": " email_seller ", "args": {}, "turn": 3}, {}),
        ("args a list", client, intents, {"tool": "issue_refund", "args": [], "turn": 4}, {}),
        ("revoked token", revoked, intents, {"tool": "issue_refund", "args": {}, "turn": 5}, {}),
        (
            "unknown run",
            client,
            "/api/v1/runs/00000000-0000-0000-0000-000000000000/intents/",
            {"tool": "issue_refund", "args": {}, "turn": 5},
            {},
        ),
        (
            "not a uuid",
            client,
            "/api/v1/runs/nope/intents/",
            {"tool": "issue_refund", "args": {}, "turn": 5},
            {},
        ),
        (
            "Accept text/html",
            client,
            intents,
            {"tool": "issue_refund", "args": {}, "turn": 6},
            {"HTTP_ACCEPT": "text/html"},
        ),
        (
            "Accept with indent",
            client,
            intents,
            {"tool": "issue_refund", "args": {}, "turn": 7},
            {"HTTP_ACCEPT": "application/json; indent=2"},
        ),
        (
            "no trailing slash",
            client,
            intents.rstrip("/"),
            {"tool": "issue_refund", "args": {}, "turn": 8},
            {},
        ),
    ]
    for label, who, url, body, extra in calls:
        yield label, _answer(who.post(url, body, format="json", **extra))  # type: ignore[arg-type]
    raw = [
        ("NaN", b'{"tool": "issue_refund", "args": {}, "turn": NaN}', "application/json"),
        ("empty body", b"", "application/json"),
        (
            "latin-1",
            '{"tool": "café", "args": {}, "turn": 9}'.encode("latin-1"),
            "application/json; charset=latin-1",
        ),
        ("bad JSON", b'{"tool": ', "application/json"),
        ("form", b"tool=issue_refund&turn=10", "application/x-www-form-urlencoded"),
    ]
    for label, data, content_type in raw:
        yield label, _answer(client.generic("POST", intents, data, content_type=content_type))  # type: ignore[arg-type]

    step = Intent.objects.get(run_id=run, turn=1).step_id
    outcome = f"{intents}{step}/outcome/"
    settles: list[tuple[str, str, Any]] = [
        ("outcome ok not a bool", outcome, {"ok": "yes"}),
        ("unknown error class", outcome, {"ok": False, "error_class": "gremlins"}),
        ("plain outcome", outcome, {"ok": True, "summary": "refunded", "receipt": {"id": "re_1"}}),
        ("the same outcome again", outcome, {"ok": True, "summary": "refunded", "receipt": {"id": "re_1"}}),
        ("a different outcome", outcome, {"ok": False, "error_class": "transient"}),
        ("unknown step", f"{intents}nope/outcome/", {"ok": True}),
    ]
    for label, url, body in settles:
        yield label, _answer(client.post(url, body, format="json"))
    yield (
        "journal",
        {
            "intents": sorted(
                (i.tool, i.turn, i.status, i.outcome_summary) for i in Intent.objects.filter(run_id=run)
            ),
            "events": sorted(JournalEvent.objects.filter(run_id=run).values_list("kind", flat=True)),
        },
    )


def _normalised(text: str) -> str:
    for pattern, placeholder in ((UUID, "<uuid>"), (KEY, "<key>"), (STAMP, "<time>")):
        text = pattern.sub(placeholder, text)
    return text


def _answer(response: Any) -> dict[str, Any]:
    return {
        "status": response.status_code,
        "body": _normalised(response.content.decode()),
        "headers": {name: response.get(name) for name in HEADERS},
        "location": _normalised(response.get("Location", "")),
    }


def test_every_call_is_answered_alike_with_the_lane_and_without_it(tenant: Tenant) -> None:
    with_lane = list(
        _conversation(new_agent_client(tenant, "bot-a"), new_agent_client(tenant, "old-a", revoked=True))
    )
    with override_settings(MIDDLEWARE=WITHOUT_LANE):
        without = list(
            _conversation(new_agent_client(tenant, "bot-b"), new_agent_client(tenant, "old-b", revoked=True))
        )

    assert [label for label, _ in with_lane] == [label for label, _ in without]
    for (label, lane_answer), (_, full_answer) in zip(with_lane, without, strict=True):
        assert lane_answer == full_answer, label
    answers = dict(with_lane)
    assert answers["plain intent"]["status"] == 201
    assert answers["the same intent again"]["status"] == 200
    assert answers["plain outcome"]["status"] == 200
    assert answers["a different outcome"]["status"] == 409
    assert answers["revoked token"]["status"] == 401
    assert answers["Accept text/html"]["status"] == 406


def test_plain_calls_are_answered_by_the_lean_handlers(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the views' own handlers made to fail, plain calls still succeed; one that is not
    plain (a turn sent as text) reaches the view."""
    client = new_agent_client(tenant, "bot")
    run = client.post("/api/v1/runs/", RUN_BODY, format="json").json()["id"]
    intents = f"/api/v1/runs/{run}/intents/"

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the DRF view answered a plain call")

    monkeypatch.setattr(api_views.IntentCreateApi, "post", refuse)
    monkeypatch.setattr(api_views.OutcomeApi, "post", refuse)
    created = client.post(intents, {"tool": "issue_refund", "args": {}, "turn": 1}, format="json")
    assert created.status_code == 201
    settled = client.post(f"{intents}{created.json()['step_id']}/outcome/", {"ok": True}, format="json")
    assert settled.status_code == 200
    assert json.loads(settled.content)["status"] == "performed"
    assert Intent.objects.get(run_id=run).status == "performed"

    with pytest.raises(AssertionError, match="the DRF view answered"):
        client.post(intents, {"tool": "issue_refund", "args": {}, "turn": "2"}, format="json")
