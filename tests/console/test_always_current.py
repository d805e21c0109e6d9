"""The run page says what is true now, after every action and every poll (issue 19, item 1), on
the demo's own runs (the tickets `seed_demo` seeds, replayed and killed as it kills them):

- T-41402 resolved: the header no longer shows "Escalated" and its reason as if still open;
- T-41518's uncertain refund marked: "A call's outcome is unknown" is shown as what it was;
- T-41207's dead letter resolved: the next action stops sending people to it;
- a worker finishing an undo, or a dead letter opened or answered, moves the run's version, so
  the page's poll (which answers 204 while the state token is unchanged) redraws it."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from django.test import Client
from django.urls import reverse

from audit.models import AuditAction, AuditEntry
from compensations.models import CompensationStatus, DeadLetter
from compensations.services import compensation_execute, compensation_request
from handover import NextActionCode, handover_for, run_state_token
from journal import services as journal
from journal.models import Run
from sandbox.catalogue import catalogue_seed_defaults
from tests.support.stuck_runs import demo_ticket
from tools import services as tools

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
WORKER = journal.Actor.system("test-worker")


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _act(client: Client, run: Run, action: str, **data: Any) -> Any:
    data = {"state": run_state_token(run), **data}
    return client.post(reverse("handover:run_act", args=[run.pk, action]), data, headers=HTMX)


def _h1(body: str) -> str:
    return body.split("<h1>", 1)[1].split("</h1>", 1)[0]


def test_resolving_t41402_redraws_its_header_as_resolved_and_it_leaves_the_queue(
    sandbox_tools: str, persona: Any
) -> None:
    run = demo_ticket(sandbox_tools, "T-41402")
    client = _client(persona("support_staff", run.tenant, "sam"))
    before = _h1(client.get(reverse("handover:run_detail", args=[run.pk])).content.decode())
    assert "status-escalated" in before and "Policy says a person decides" in before

    response = _act(client, run, "resolve", note="told the buyer the credit was reversed")

    assert response.status_code == 200
    body = response.content.decode()
    header = _h1(body)
    assert "status-escalated" not in header and ">Escalated<" not in header
    assert 'class="pill status-resolved"' in header
    assert "was: Policy says a person decides" in header
    assert "Resolved by sam at " in body and "told the buyer the credit was reversed" in body
    handover = handover_for(Run.objects.get(pk=run.pk))
    assert (handover.reason_holds, handover.awaiting_person) == (False, False)
    assert handover.next_action.code == NextActionCode.NOTHING_WAITING
    assert AuditEntry.objects.filter(run=run, action=AuditAction.RESOLVE, username="sam").count() == 1
    queue = client.get(reverse("handover:queue")).content.decode()
    assert 'data-ticket="T-41402"' not in queue


def test_marking_t41518s_refund_answers_its_unknown_outcome_on_the_page(
    sandbox_tools: str, persona: Any
) -> None:
    run = demo_ticket(sandbox_tools, "T-41518")
    client = _client(persona("support_staff", run.tenant, "sam"))
    step = handover_for(run).uncertain[0].step_id

    response = _act(client, run, "mark-performed", step_id=step, note="payments portal shows it")

    assert response.status_code == 200
    header = _h1(response.content.decode())
    assert "was: A call&#x27;s outcome is unknown" in header
    handover = handover_for(Run.objects.get(pk=run.pk))
    assert handover.uncertain == []
    assert handover.reason_holds is False
    assert handover.reason_answered.startswith("“Refund the buyer” marked performed by sam at ")
    assert handover.next_action.code != NextActionCode.SETTLE_UNCERTAIN
    assert AuditEntry.objects.get(run=run, action=AuditAction.MARK_PERFORMED).username == "sam"


def test_resolving_t41207s_dead_letter_changes_its_next_action_and_moves_the_state(
    sandbox_tools: str, persona: Any
) -> None:
    run = demo_ticket(sandbox_tools, "T-41207")
    lead = persona("team_lead", run.tenant, "lead")
    client = _client(lead)
    letter = DeadLetter.objects.get(compensation__original__run=run)
    page = client.get(reverse("handover:run_detail", args=[run.pk]))
    state = page.context["state"]
    assert handover_for(run).next_action.code == NextActionCode.FINISH_FAILED_UNDO
    assert "take its dead letter" in page.content.decode()

    resolved = client.post(
        reverse("handover:dead_letter_act", args=[letter.pk, "resolve"]),
        {"note": "the accounting desk had reversed the memo by hand", "state": letter.state_token},
        headers=HTMX,
    )

    assert resolved.status_code == 200
    assert f'id="dl-{letter.pk}"' not in resolved.content.decode()  # gone from the open letters
    assert DeadLetter.objects.get(pk=letter.pk).resolved_by == lead
    # The open page's poll sees the change and redraws.
    panel = client.get(reverse("handover:run_panel", args=[run.pk]), {"state": state}, headers=HTMX)
    assert panel.status_code == 200
    body = panel.content.decode()
    assert "take its dead letter" not in body
    assert "was: Compensation failed" in _h1(body)
    handover = handover_for(Run.objects.get(pk=run.pk))
    assert handover.next_action.code == NextActionCode.TELL_CUSTOMER_SETTLED
    assert "resolved by lead: the accounting desk had reversed the memo by hand" in handover.next_action.text
    assert handover.reason_holds is False
    # Still waiting on a person: the customer has heard nothing of the reship undone.
    assert handover.next_action.waiting and handover.awaiting_person
    entry = AuditEntry.objects.get(run=run, action=AuditAction.DEAD_LETTER_RESOLVE)
    assert (entry.username, entry.new_state) == ("lead", {"dead_letter": letter.pk, "resolved": True})


@pytest.fixture
def pickup(sandbox_tools: str, make_run: Any) -> Any:
    catalogue_seed_defaults()
    run = make_run()
    return tools.tool_perform(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=WORKER
    ).intent


def test_a_worker_finishing_an_undo_moves_the_runs_version(pickup: Any) -> None:
    compensation = compensation_request(original=pickup, actor=WORKER)
    version = Run.objects.get(pk=pickup.run_id).version

    done = compensation_execute(compensation=compensation, actor=WORKER)

    assert done.status == CompensationStatus.DONE
    assert Run.objects.get(pk=pickup.run_id).version > version


def test_a_worker_opening_a_dead_letter_on_a_cancelled_run_moves_its_version(
    pickup: Any, sandbox_tools: str
) -> None:
    run = Run.objects.get(pk=pickup.run_id)
    journal.run_cancel(run=run, actor=WORKER, reason="the customer withdrew")
    requests.post(
        f"{sandbox_tools}/sandbox/api/returns/collect", json={"label": pickup.receipt["label"]}, timeout=5
    ).raise_for_status()
    compensation = compensation_request(original=pickup, actor=WORKER)
    version = Run.objects.get(pk=run.pk).version

    failed = compensation_execute(compensation=compensation, actor=WORKER)

    assert failed.status == CompensationStatus.DEAD_LETTERED
    assert DeadLetter.objects.filter(compensation=failed, resolved_at__isnull=True).exists()
    assert Run.objects.get(pk=run.pk).version > version
