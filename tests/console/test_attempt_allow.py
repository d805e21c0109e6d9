"""What the console does with the error taxonomy's refusals (journal.attempts): a person allows a
refused call again from the run page ("Allow this call again", offered only where it can work),
the allowance is journaled and audited together, and the agent's same call over REST is then
admitted once; the queue and All runs flag a run stopped for looping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from audit.models import AuditAction, AuditEntry
from handover import run_state_token
from journal.models import JournalEvent, Run, RunStatus
from journal.why import RunWhy
from tests.agent_api.test_api_journal import new_agent_client

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
REFUND = {"order_id": "SO-1", "amount": "9.99"}
BUDGETS = {"repairs": 2, "retries": 2, "retry_spacing_seconds": 0.0, "loop_refusals": 50, "loop_minutes": 10}
ALLOW = "allow-again"
BUTTON = "Allow this call again…"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


class Agent:
    """An agent runtime on one run over the REST API: each call at its own turn (a new intent)."""

    def __init__(self, run: Run) -> None:
        self.api: APIClient = new_agent_client(run.tenant, f"runtime-{run.pk}")
        self.url = f"/api/v1/runs/{run.pk}/intents/"
        self.turn = 0

    def intend(self, args: dict[str, Any] = REFUND) -> Any:
        self.turn += 1
        body = {"tool": "issue_refund", "args": args, "turn": self.turn, "occurrence": self.turn}
        return self.api.post(self.url, body, format="json")

    def fail(self, answer: Any, error_class: str) -> None:
        step = answer.json()["step_id"]
        outcome = {"ok": False, "summary": "403 forbidden", "error_class": error_class}
        assert self.api.post(f"{self.url}{step}/outcome/", outcome, format="json").status_code == 200

    def call_failing(self, error_class: str, args: dict[str, Any] = REFUND) -> str:
        answer = self.intend(args)
        assert answer.status_code == 201, answer.content
        self.fail(answer, error_class)
        return str(answer.json()["step_id"])


def _page(client: Client, run: Run) -> str:
    return client.get(reverse("handover:run_detail", args=[run.pk])).content.decode()


def _offered_on(body: str) -> list[str]:
    """The steps the page offers to allow again."""
    return [
        chunk.split('"')[0]
        for chunk in body.split('data-refused-step="')[1:]
        if BUTTON in chunk.split("</li>")[0]
    ]


def _allow(client: Client, run: Run, step: str, state: str = "") -> Any:
    data = {"state": state or run_state_token(Run.objects.get(pk=run.pk)), "step_id": step}
    return client.post(
        reverse("handover:run_act", args=[run.pk, ALLOW]), data, headers={**HTMX, "X-Request-ID": "req-allow"}
    )


@override_settings(SEAM_ERROR_BUDGETS={"*": BUDGETS})
def test_a_person_allows_a_refused_call_and_the_agent_s_same_call_is_admitted_once(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = make_run()
    agent = Agent(run)
    step = agent.call_failing("permanent")
    assert (refused := agent.intend()).status_code == 409 and refused.json()["code"] == "permanent_repeated"
    lead = persona("support_staff", run.tenant)
    client = _client(lead)

    assert _offered_on(_page(client, run)) == [step]
    confirm = client.get(reverse("handover:run_confirm", args=[run.pk, ALLOW]), {"step": step}, headers=HTMX)
    assert confirm.status_code == 200
    assert "Allow “Issue refund” again" in confirm.content.decode()
    assert "admitted once, though it failed for good" in confirm.content.decode()

    allowed = _allow(client, run, step)

    assert allowed.status_code == 200
    [entry] = AuditEntry.objects.filter(run=run, action=AuditAction.ALLOW_ATTEMPT)
    assert (entry.action, entry.username, entry.step_id, entry.request_id) == (
        AuditAction.ALLOW_ATTEMPT,
        lead.username,
        step,
        "req-allow",
    )
    assert entry.old_state == {
        "status": "failed",
        "error_class": "permanent",
        "refused": "permanent_repeated",
    }
    [event] = JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.ATTEMPT_ALLOWED)
    assert (event.intent_id, event.actor_name, event.data["tool"]) == (
        run.intents.get(step_id=step).pk,
        lead.username,
        "issue_refund",
    )
    assert _offered_on(_page(client, run)) == []  # allowed already: nothing left to allow

    again = agent.intend()
    assert again.status_code == 201, again.content
    agent.fail(again, "permanent")
    repeat = agent.intend()
    assert (repeat.status_code, repeat.json()["code"]) == (409, "permanent_repeated")
    assert run.intents.count() == 2
    # The new failure is refused again, so it is offered again: on the newest failure only.
    assert _offered_on(_page(client, run)) == [again.json()["step_id"]]


@override_settings(SEAM_ERROR_BUDGETS={"*": BUDGETS})
def test_allowing_from_a_stale_page_is_refused_and_writes_nothing(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = make_run()
    agent = Agent(run)
    step = agent.call_failing("permanent")
    seen = run_state_token(Run.objects.get(pk=run.pk))
    assert agent.intend().status_code == 409  # the agent tried again meanwhile: an event

    stale = _allow(_client(persona("support_staff", run.tenant)), run, step, state=seen)

    assert stale.status_code == 409
    assert "This run changed" in stale.content.decode()
    assert not AuditEntry.objects.filter(run=run).exists()
    assert not JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.ATTEMPT_ALLOWED).exists()
    assert agent.intend().status_code == 409  # still refused


@override_settings(SEAM_ERROR_BUDGETS={"*": BUDGETS})
def test_it_is_offered_only_on_a_failed_call_the_taxonomy_refuses_now(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = make_run()
    agent = Agent(run)
    transient = agent.call_failing("transient")  # its retry is admitted: nothing to allow
    agent.api.post(  # a performed call
        f"{agent.url}{agent.intend({'order_id': 'SO-2', 'amount': '1.00'}).json()['step_id']}/outcome/",
        {"ok": True, "summary": "refunded"},
        format="json",
    )
    client = _client(persona("support_staff", run.tenant))
    assert _offered_on(_page(client, run)) == []

    refused = _allow(client, run, transient)

    assert refused.status_code == 409
    assert "is not refused now" in refused.content.decode()
    assert not AuditEntry.objects.filter(run=run).exists()
    # Nor on a closed run, which sends nothing again.
    closed = make_run(ticket_id="T-closed")
    Agent(closed).call_failing("permanent")
    Run.objects.filter(pk=closed.pk).update(status=RunStatus.CANCELLED)
    assert _offered_on(_page(client, closed)) == []


@override_settings(SEAM_ERROR_BUDGETS={"*": {**BUDGETS, "loop_refusals": 2}})
def test_allowing_a_looping_run_s_call_leaves_the_run_for_a_person_to_resume(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = make_run()
    agent = Agent(run)
    step = agent.call_failing("permanent")
    for _ in range(2):
        assert agent.intend().status_code == 409
    run.refresh_from_db()
    assert (run.status, run.outcome_why["code"]) == (RunStatus.ESCALATED, RunWhy.LOOPING)
    client = _client(persona("support_staff", run.tenant))
    confirm = client.get(reverse("handover:run_confirm", args=[run.pk, ALLOW]), {"step": step}, headers=HTMX)
    assert "handed over as looping, so resume it" in confirm.content.decode()

    assert _allow(client, run, step).status_code == 200

    run.refresh_from_db()
    assert (run.status, run.awaiting_person, run.outcome_why["code"]) == (
        RunStatus.ESCALATED,
        True,
        RunWhy.LOOPING,
    )
    assert "Resume…" in _page(client, run)  # resumed the one way a handed-over run is


# --- the queue's flag -------------------------------------------------------------------------


def _row(body: str, ticket: str) -> str:
    return body.split(f'data-ticket="{ticket}"')[1].split("</tr>")[0]


@override_settings(SEAM_ERROR_BUDGETS={"*": {**BUDGETS, "loop_refusals": 2}})
def test_the_queue_and_all_runs_flag_a_looping_run(make_run: Callable[..., Run], persona: Any) -> None:
    other = make_run(ticket_id="T-other")
    Agent(other).call_failing("permanent")
    Run.objects.filter(pk=other.pk).update(
        status=RunStatus.ESCALATED, awaiting_person=True, outcome_reason="policy"
    )
    client = _client(persona("support_staff", other.tenant))
    client.get(reverse("handover:queue"))  # warm the session and permission caches
    with CaptureQueriesContext(connection) as without:
        client.get(reverse("handover:queue"))
    looping = make_run(ticket_id="T-loop")
    agent = Agent(looping)
    agent.call_failing("permanent")
    for _ in range(2):
        agent.intend()

    with CaptureQueriesContext(connection) as with_looping:
        queue = client.get(reverse("handover:queue")).content.decode()

    assert len(with_looping) == len(without)  # the flag is read from the row: no query of its own
    for page, body in (
        ("queue", queue),
        ("all runs", client.get(reverse("handover:run_list")).content.decode()),
    ):
        assert 'class="pill warn looping"' in _row(body, "T-loop"), page
        assert "looping" not in _row(body, "T-other"), page
