"""Acting on a run nobody had makes it the acting person's (issue 32, "Triage"; console.claiming):
the run's assignee, an audit row in the action's transaction, the page saying so, and the assign
action handing it on afterwards. A run someone has stays theirs; a refused action assigns
nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditAction, AuditEntry
from handover import run_state_token, words
from journal.models import CustomerMessage, Run
from tests.support.stuck_runs import escalated_run

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _state(run: Run) -> str:
    return run_state_token(Run.objects.get(pk=run.pk))


def _tell(client: Client, run: Run, **headers: str) -> Any:
    return client.post(
        reverse("handover:run_act", args=[run.pk, "customer-told"]),
        {"state": _state(run), "channel": "email", "body": "We are looking into it."},
        headers=headers,
    )


def _actions(run: Run) -> list[tuple[str, str, Any, Any]]:
    return [
        (entry.action, entry.username, entry.old_state.get("assignee"), entry.new_state.get("assignee"))
        for entry in AuditEntry.objects.filter(run=run).order_by("seq")
    ]


def test_acting_on_a_run_nobody_had_assigns_it_to_the_person_acting(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = escalated_run(make_run, ticket_id="T-1")
    sam = persona("support_staff", run.tenant, "sam")
    client = _client(sam)

    response = _tell(client, run, **HTMX)

    assert response.status_code == 200, response.content[:500]
    assert Run.objects.get(pk=run.pk).assignee == sam
    assert CustomerMessage.objects.filter(run=run).count() == 1
    assert _actions(run) == [
        (AuditAction.CUSTOMER_TOLD, "sam", None, None),
        (AuditAction.ASSIGN, "sam", None, "sam"),
    ]
    assert AuditEntry.objects.get(run=run, action=AuditAction.ASSIGN).note == str(words.ASSIGNED_ON_ACTING)
    body = response.content.decode()
    assert str(words.NOW_YOURS) in body
    assert "<dt>Assignee</dt><dd>sam" in body


def test_a_run_someone_has_stays_theirs(make_run: Callable[..., Run], persona: Any) -> None:
    run = escalated_run(make_run, ticket_id="T-1")
    kim = persona("support_staff", run.tenant, "kim")
    Run.objects.filter(pk=run.pk).update(assignee=kim)
    client = _client(persona("support_staff", run.tenant, "sam"))

    response = _tell(client, run, **HTMX)

    assert response.status_code == 200
    assert Run.objects.get(pk=run.pk).assignee == kim
    assert [action for action, *_ in _actions(run)] == [AuditAction.CUSTOMER_TOLD]
    assert str(words.NOW_YOURS) not in response.content.decode()


def test_the_assignment_is_undone_by_assigning_the_run_to_someone_else(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = escalated_run(make_run, ticket_id="T-1")
    kim = persona("support_staff", run.tenant, "kim")
    client = _client(persona("support_staff", run.tenant, "sam"))
    assert _tell(client, run).status_code == 302

    handed = client.post(
        reverse("handover:run_act", args=[run.pk, "assign-to"]), {"state": _state(run), "assignee": kim.pk}
    )

    assert handed.status_code == 302
    assert Run.objects.get(pk=run.pk).assignee == kim
    assert [row[2:] for row in _actions(run) if row[0] == AuditAction.ASSIGN] == [
        (None, "sam"),
        ("sam", "kim"),
    ]


def test_assigning_a_run_nobody_had_to_a_colleague_gives_it_to_them_alone(
    make_run: Callable[..., Run], persona: Any
) -> None:
    run = escalated_run(make_run, ticket_id="T-1")
    kim = persona("support_staff", run.tenant, "kim")
    client = _client(persona("team_lead", run.tenant, "lee"))

    response = client.post(
        reverse("handover:run_act", args=[run.pk, "assign-to"]),
        {"state": _state(run), "assignee": kim.pk},
        headers=HTMX,
    )

    assert response.status_code == 200
    assert Run.objects.get(pk=run.pk).assignee == kim
    assert _actions(run) == [(AuditAction.ASSIGN, "lee", None, "kim")]
    assert str(words.NOW_YOURS) not in response.content.decode()


def test_a_refused_action_assigns_nothing(make_run: Callable[..., Run], persona: Any) -> None:
    run = escalated_run(make_run, ticket_id="T-1")
    client = _client(persona("support_staff", run.tenant, "sam"))

    stale = client.post(
        reverse("handover:run_act", args=[run.pk, "customer-told"]),
        {"state": "1.0.0", "channel": "email", "body": "We are looking into it."},
        headers=HTMX,
    )

    assert stale.status_code == 409
    assert Run.objects.get(pk=run.pk).assignee is None
    assert not AuditEntry.objects.filter(run=run).exists()


def test_bulk_resolve_assigns_each_run_nobody_had_to_the_person_resolving(
    make_run: Callable[..., Run], persona: Any
) -> None:
    first = escalated_run(make_run, ticket_id="T-1")
    second = escalated_run(make_run, ticket_id="T-2")
    kim = persona("support_staff", first.tenant, "kim")
    Run.objects.filter(pk=second.pk).update(assignee=kim)
    sam = persona("support_staff", first.tenant, "sam")

    response = _client(sam).post(
        reverse("handover:run_bulk"),
        {
            "action": "resolve",
            "note": "settled with the customer",
            "run": [
                f"{first.pk}:{_state(first)}",
                f"{second.pk}:{_state(second)}",
            ],
        },
        headers=HTMX,
    )

    assert response.status_code == 200, response.content[:500]
    assert Run.objects.get(pk=first.pk).assignee == sam
    assert Run.objects.get(pk=second.pk).assignee == kim
    assert [row[0] for row in _actions(first)] == [AuditAction.RESOLVE, AuditAction.ASSIGN]
    assert [row[0] for row in _actions(second)] == [AuditAction.RESOLVE]
