"""An ambiguous failure is evidence, not a settlement (issue 29, finding 2).

An agent whose tool answered with an error that may not mean nothing happened (an MCP isError
from a write tool, a framework tool's exception) reports it as ok=false, error_class=ambiguous
with the tool's error text. The intent stays open, keeps the text and the class, and a
dispatch_ambiguous event records the report; a repeat writes nothing; a later real outcome or
reconciliation settles it. Every write path answers alike: the lean handler with a remembered
caller (journal.sql's *_AS_CALLER statement), the lean handler reading the token, and the DRF
view."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from console.timeline import timeline_of
from handover import handover_for, handover_rows
from journal.models import Intent, IntentStatus, JournalEvent, Run, Tenant
from journal.services import Actor
from journal.why import CallVerdict
from reconciliation.services import reconcile_sweep
from tests.agent_api.test_agent_lane import RUN_BODY
from tests.agent_api.test_api_journal import new_agent_client
from tests.support.in_flight import open_calls_past_in_flight

pytestmark = pytest.mark.django_db(transaction=True)

WITHOUT_LANE = [m for m in settings.MIDDLEWARE if m != "agent_api.lane.AgentLaneMiddleware"]
ERROR_TEXT = "fatal: could not write index; HEAD may have moved"
AMBIGUOUS = {"ok": False, "error_class": "ambiguous", "summary": ERROR_TEXT, "receipt": {"_mcp": "isError"}}
STAMP = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
KEY = re.compile(r"\b[0-9a-f]{64}\b")

PATHS = [pytest.param(True, id="agent lane"), pytest.param(False, id="DRF view")]


def _normalised(value: Any) -> str:
    text = repr(value)
    for pattern, placeholder in ((UUID, "<uuid>"), (KEY, "<key>"), (STAMP, "<time>")):
        text = pattern.sub(placeholder, text)
    return text


def _conversation(client: APIClient) -> list[tuple[str, int, Any]]:
    """Two steps: the first reported ambiguous twice (the second report a retried request), then
    performed; the second reported ambiguous and left open. Each answer and the rows after."""
    run = client.post("/api/v1/runs/", RUN_BODY, format="json").json()["id"]
    intents = f"/api/v1/runs/{run}/intents/"
    steps = [
        client.post(intents, {"tool": "git_commit", "args": {"message": m}, "turn": t}, format="json").json()[
            "step_id"
        ]
        for t, m in ((1, "first"), (2, "second"))
    ]
    answers: list[tuple[str, int, Any]] = []
    calls = [
        ("ambiguous", steps[0], AMBIGUOUS),
        ("the same report again", steps[0], AMBIGUOUS),
        ("a later real outcome", steps[0], {"ok": True, "summary": "committed abc123"}),
        ("ambiguous after the outcome", steps[0], AMBIGUOUS),
        ("ambiguous, other step", steps[1], {**AMBIGUOUS, "request_id": "req-7"}),
    ]
    for label, step, body in calls:
        response = client.post(f"{intents}{step}/outcome/", body, format="json")
        answers.append((label, response.status_code, _normalised(response.json())))
    rows = [
        (i.status, i.error_class, i.outcome_summary, i.receipt, i.request_id, i.settled_at is None)
        for i in Intent.objects.filter(run_id=run).order_by("turn")
    ]
    events = list(
        JournalEvent.objects.filter(run_id=run, intent__isnull=False)
        .exclude(kind=JournalEvent.Kind.INTENT_RECORDED)
        .order_by("pk")
        .values_list("kind", "actor_name", "data")
    )
    answers.append(("rows", 0, rows))
    answers.append(("events", 0, events))
    return answers


@pytest.mark.parametrize("lane", PATHS)
def test_an_ambiguous_report_keeps_the_intent_open_with_the_tools_error_on_every_path(
    tenant: Tenant, lane: bool
) -> None:
    middleware = settings.MIDDLEWARE if lane else WITHOUT_LANE
    with override_settings(MIDDLEWARE=middleware):
        answers = _conversation(new_agent_client(tenant, "bot"))
    by_label = {label: (status, body) for label, status, body in answers}

    assert by_label["ambiguous"][0] == 200
    assert "'status': 'intended'" in by_label["ambiguous"][1]
    assert "'error_class': 'ambiguous'" in by_label["ambiguous"][1]
    # A retried report is the same answer, and writes nothing more.
    assert by_label["the same report again"] == by_label["ambiguous"]
    assert by_label["a later real outcome"][0] == 200
    assert "'status': 'performed'" in by_label["a later real outcome"][1]
    # Evidence after a settlement is no conflict: the answer is the row as settled.
    assert by_label["ambiguous after the outcome"] == by_label["a later real outcome"]
    assert by_label["rows"][1] == [
        ("performed", "", "committed abc123", {}, "", False),
        ("intended", "ambiguous", ERROR_TEXT, {"_mcp": "isError"}, "req-7", True),
    ]
    evidence = {"error_class": "ambiguous", "message": ERROR_TEXT, "answered": True}
    assert by_label["events"][1] == [
        ("dispatch_ambiguous", "bot", {**evidence, "request_id": ""}),
        ("outcome_recorded", "bot", {"status": "performed", "error_class": "", "receipt": {}}),
        ("dispatch_ambiguous", "bot", {**evidence, "request_id": "req-7"}),
    ]


def test_every_path_answers_the_same_bodies_alike(tenant: Tenant) -> None:
    conversations = []
    for n, (lane,) in enumerate(p.values for p in PATHS):
        middleware = settings.MIDDLEWARE if lane else WITHOUT_LANE
        with override_settings(MIDDLEWARE=middleware):
            conversations.append(_conversation(new_agent_client(tenant, f"bot-{n}")))
    first = [(label, status, body) for label, status, body in conversations[0] if label != "events"]
    for other in conversations[1:]:
        assert [(label, status, body) for label, status, body in other if label != "events"] == first
        assert [
            (kind, data) for kind, _, data in dict((label, body) for label, _, body in other)["events"]
        ] == [
            (kind, data)
            for kind, _, data in dict((label, body) for label, _, body in conversations[0])["events"]
        ]


def _stale(run_id: str) -> Run:
    Run.objects.filter(pk=run_id).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    open_calls_past_in_flight(run_id=run_id)
    return Run.objects.select_related("tenant").get(pk=run_id)


def test_the_handover_and_reconciliation_show_the_tools_error_text(tenant: Tenant) -> None:
    """A step reported ambiguous on a run that went quiet is uncertain, with the tool's error
    text; reconciliation, with no lookup to ask, hands it to a person saying why."""
    client = new_agent_client(tenant, "bot")
    run_id = client.post("/api/v1/runs/", RUN_BODY, format="json").json()["id"]
    intents = f"/api/v1/runs/{run_id}/intents/"
    step = client.post(intents, {"tool": "git_commit", "args": {"m": "x"}, "turn": 1}, format="json").json()[
        "step_id"
    ]
    assert client.post(f"{intents}{step}/outcome/", AMBIGUOUS, format="json").status_code == 200
    run = _stale(run_id)

    [uncertain] = handover_for(run).uncertain
    assert uncertain.step_id == step
    assert f"the tool answered with an error: {ERROR_TEXT}; whether it acted is unknown" in uncertain.why
    api = client.get(f"/api/v1/runs/{run_id}/handover/").json()
    assert ERROR_TEXT in api["uncertain"][0]["why"]
    timeline = " ".join(entry.text for entry in timeline_of(handover_rows(run)))
    assert f"the tool answered with an error, whether it acted is unknown ({ERROR_TEXT})" in timeline

    # Reconciliation treats the row as any open row: it is stale, so it is asked about.
    report = reconcile_sweep(older_than=timedelta(0), run_id=run_id, actor=Actor.system("test"))
    assert report.counts["unknown"] == 1
    row = Intent.objects.get(step_id=step)
    assert row.status == IntentStatus.UNKNOWN
    assert (row.verdict["code"], row.verdict["ambiguous"], row.verdict["tool_said"]) == (
        CallVerdict.NO_LOOKUP,
        True,
        ERROR_TEXT,
    )
    [uncertain] = handover_for(Run.objects.select_related("tenant").get(pk=run_id)).uncertain
    assert ERROR_TEXT in uncertain.why
