"""A dialog refused because the run changed while it was open comes back with what was typed
(issue 32, item 4): drawn for the run as it is now, with the new state, what changed said once,
and the note in its field, so a second try sends it without retyping."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditAction, AuditEntry
from handover import run_state_token
from journal.models import Run
from tests.support.stuck_runs import escalated_run

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
NOTE = "told the buyer <the credit> was reversed"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _post(client: Client, run: Run, action: str, **data: Any) -> Any:
    return client.post(reverse("handover:run_act", args=[run.pk, action]), data, headers=HTMX)


def test_a_stale_resolve_keeps_its_note_and_a_second_try_sends_it(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = escalated_run(make_run, ticket_id="T-50002")
    seen = run_state_token(run)
    assert (
        _post(_client(persona("team_lead", run.tenant, "lee")), run, "assign", state=seen).status_code == 200
    )
    sam = _client(persona("support_staff", run.tenant, "sam"))

    stale = _post(sam, run, "resolve", state=seen, note=NOTE)

    assert stale.status_code == 409
    assert stale["HX-Retarget"] == "#dialog"
    dialog = stale.content.decode().split('id="run-panel"', 1)[0]  # the redrawn run follows it
    assert dialog.lower().count("this run changed") == 1
    assert dialog.count("lee assigned") == 1
    assert "since you loaded it" not in dialog  # the refusal's sentence, which said it again
    # The note, in its field, escaped; the form carries the run's new state.
    assert re.search(r"<textarea[^>]*name=\"note\"[^>]*>\s*" + re.escape(html.escape(NOTE)), dialog)
    now = run_state_token(Run.objects.get(pk=run.pk))
    assert now != seen and f'name="state" value="{now}"' in dialog
    assert 'hx-swap-oob="true"' in stale.content.decode()
    assert not AuditEntry.objects.filter(action=AuditAction.RESOLVE).exists()

    again = _post(sam, run, "resolve", state=now, note=NOTE)

    assert again.status_code == 200
    assert AuditEntry.objects.get(action=AuditAction.RESOLVE).note == NOTE
    assert not Run.objects.get(pk=run.pk).awaiting_person


def test_a_stale_action_from_the_queue_says_what_changed_once_and_redraws_the_queue(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = escalated_run(make_run, ticket_id="T-50003")
    seen = run_state_token(run)
    assert (
        _post(_client(persona("team_lead", run.tenant, "lee")), run, "assign", state=seen).status_code == 200
    )
    sam = _client(persona("support_staff", run.tenant, "sam"))

    stale = _post(sam, run, "assign", state=seen, **{"from": "queue"})

    assert stale.status_code == 409
    assert stale["HX-Retarget"] == "#dialog"
    assert stale["HX-Trigger"] == "seam-queue-changed"  # the queue's results redraw at once
    body = stale.content.decode()
    assert body.lower().count("this run changed") == 1, body
    assert body.count("lee assigned") == 1, body
    assert Run.objects.filter(pk=run.pk, assignee__username="lee").exists()
