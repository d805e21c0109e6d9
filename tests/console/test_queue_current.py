"""The queue and All runs say what is true now (issue 32, item 3), on the demo's own runs:

- T-41518's unknown refund settled: the queue stops counting and filtering it as "A call's
  outcome is unknown" and says its reason was answered;
- T-41207's dead letter resolved: the same for "Compensation failed";
- T-41402 resolved: All runs and the queue's search call it "Resolved", never "Escalated", and
  the Escalated filter leaves it out."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from compensations.models import DeadLetter
from handover import handover_for, run_state_token
from journal.models import Run
from tests.support.stuck_runs import demo_ticket

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _row(body: str, ticket: str) -> str:
    match = re.search(rf'<tr[^>]*data-ticket="{ticket}".*?</tr>', body, re.S)
    assert match, f"{ticket} is not listed"
    return match.group(0)


def _counts(client: Client) -> dict[str, int]:
    return {reason: n for reason, _label, n in client.get(reverse("handover:queue")).context["counts"]}


def _tickets(client: Client, **params: str) -> set[str]:
    response = client.get(reverse("handover:queue"), params)
    assert response.status_code == 200, response.content[:300]
    return {run.ticket_id for run, _url, _offers in response.context["rows"]}


def test_a_settled_unknown_outcome_leaves_its_reason_chip_and_filter(
    sandbox_tools: str, persona: Any
) -> None:
    run = demo_ticket(sandbox_tools, "T-41518")
    client = _client(persona("support_staff", run.tenant, "sam"))
    assert _counts(client).get("unknown_outcome") == 1
    assert _tickets(client, reason="unknown_outcome") == {"T-41518"}
    step = handover_for(run).uncertain[0].step_id

    marked = client.post(
        reverse("handover:run_act", args=[run.pk, "mark-performed"]),
        {"state": run_state_token(run), "step_id": step, "note": "payments portal shows it"},
        headers=HTMX,
    )

    assert marked.status_code == 200
    assert handover_for(Run.objects.get(pk=run.pk)).reason_holds is False
    counts = _counts(client)
    assert "unknown_outcome" not in counts and counts["reason_answered"] == 1
    assert _tickets(client, reason="unknown_outcome") == set()
    assert _tickets(client, reason="reason_answered") == {"T-41518"}
    row = _row(client.get(reverse("handover:queue")).content.decode(), "T-41518")
    assert 'data-reason="reason_answered"' in row
    assert "was: A call&#x27;s outcome is unknown" in row and "answered since" in row


def test_a_resolved_dead_letter_leaves_the_compensation_failed_chip(sandbox_tools: str, persona: Any) -> None:
    run = demo_ticket(sandbox_tools, "T-41207")
    client = _client(persona("team_lead", run.tenant, "lead"))
    assert _counts(client).get("compensation_failed") == 1
    letter = DeadLetter.objects.get(compensation__original__run=run)

    resolved = client.post(
        reverse("handover:dead_letter_act", args=[letter.pk, "resolve"]),
        {"note": "the accounting desk had reversed the memo by hand", "state": letter.state_token},
        headers=HTMX,
    )

    assert resolved.status_code == 200
    # Still waiting on a person (the customer was told nothing), no longer for a failed undo.
    assert Run.objects.get(pk=run.pk).awaiting_person
    counts = _counts(client)
    assert "compensation_failed" not in counts and counts["reason_answered"] == 1
    assert _tickets(client, reason="compensation_failed") == set()
    body = client.get(reverse("handover:queue"), headers=HTMX).content.decode()
    assert "was: Compensation failed" in _row(body, "T-41207")


def test_a_resolved_run_is_never_shown_escalated(sandbox_tools: str, persona: Any) -> None:
    run = demo_ticket(sandbox_tools, "T-41402")
    client = _client(persona("support_staff", run.tenant, "sam"))
    before = _row(client.get(reverse("handover:run_list")).content.decode(), "T-41402")
    assert ">Escalated<" in before

    resolved = client.post(
        reverse("handover:run_act", args=[run.pk, "resolve"]),
        {"state": run_state_token(run), "note": "told the buyer the credit was reversed"},
        headers=HTMX,
    )

    assert resolved.status_code == 200
    assert Run.objects.get(pk=run.pk).status == "escalated"  # its stated outcome stays
    listed = _row(client.get(reverse("handover:run_list")).content.decode(), "T-41402")
    assert ">Resolved<" in listed and "Escalated" not in listed
    # The poll's redraw says the same.
    polled = client.get(reverse("handover:run_list"), headers=HTMX).content.decode()
    assert ">Resolved<" in _row(polled, "T-41402")
    # The queue's search finds it, as resolved; the Escalated filter leaves it out.
    assert _tickets(client, q="41402") == {"T-41402"}
    assert "Escalated" not in _row(
        client.get(reverse("handover:queue"), {"q": "41402"}).content.decode(), "T-41402"
    )
    assert _tickets(client, q="41402", status="escalated") == set()
    assert _tickets(client, q="41402", status="resolved") == {"T-41402"}
