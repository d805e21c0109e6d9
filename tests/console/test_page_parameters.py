"""Every query and form parameter of the staff pages is parsed by a form (console.forms): bad
input is a 400 naming the parameter, never a 500, and an action refused for any of its
parameters writes nothing (issue 20, "Input that never breaks a page")."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditEntry
from compensations.models import Compensation, CompensationStatus, DeadLetter
from handover import run_state_token
from journal import services
from journal.models import Run
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def people(persona: Any, tenant: Any) -> dict[str, Any]:
    return {
        "support": persona("support_staff", tenant),
        "lead": persona("team_lead", tenant),
    }


@pytest.fixture
def run(tenant: Any) -> Run:
    actor = services.Actor.agent("returns-bot")
    run = factories.run_via_service(tenant=tenant, actor=actor)
    services.intent_record(run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=actor)
    return run


@pytest.fixture
def letter(run: Run, people: dict[str, Any]) -> DeadLetter:
    actor = services.Actor.agent("returns-bot")
    done = services.intent_record(run=run, tool="reserve", args={"sku": "B-1"}, turn=2, actor=actor).intent
    services.outcome_record(intent=done, ok=True, receipt={"reservation": "R-1"}, actor=actor)
    compensation = Compensation.objects.create(original=done, status=CompensationStatus.DEAD_LETTERED)
    return DeadLetter.objects.create(
        compensation=compensation, error_class="permanent", error="refused", attempts=5, owner=people["lead"]
    )


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _refused(response: Any, name: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert name in response.content.decode(), response.content[:600]


def test_an_impossible_date_on_the_audit_trail_is_a_400_naming_it(people: dict[str, Any]) -> None:
    lead = _client(people["lead"])
    for page in ("handover:audit", "handover:audit_csv"):
        _refused(lead.get(reverse(page), {"since": "2026-02-30"}), "since")
        _refused(lead.get(reverse(page), {"until": "2026-13-01"}), "until")
    assert lead.get(reverse("handover:audit"), {"since": "2026-02-28"}).status_code == 200


@pytest.mark.parametrize("name", ["q", "assignee", "task_type", "sort", "status", "reason", "page"])
def test_a_nul_in_a_queue_parameter_is_a_400_naming_it(people: dict[str, Any], name: str) -> None:
    _refused(_client(people["support"]).get(reverse("handover:queue"), {name: "a\x00b"}), name)


@pytest.mark.parametrize("name", ["run", "person", "action", "page"])
def test_a_nul_in_an_audit_parameter_is_a_400_naming_it(people: dict[str, Any], name: str) -> None:
    _refused(_client(people["lead"]).get(reverse("handover:audit"), {name: "a\x00b"}), name)


def test_the_queue_refuses_values_it_does_not_know(people: dict[str, Any]) -> None:
    support = _client(people["support"])
    _refused(support.get(reverse("handover:queue"), {"sort": "sideways"}), "sort")
    _refused(support.get(reverse("handover:queue"), {"status": "exploded"}), "status")
    _refused(support.get(reverse("handover:queue"), {"page": "٣"}), "page")
    assert (
        support.get(reverse("handover:queue"), {"sort": "oldest", "status": "escalated"}).status_code == 200
    )


@pytest.mark.parametrize("action", ["compensate-step", "retry-lookup", "mark-performed"])
def test_a_step_id_with_a_nul_is_a_400_on_the_confirmation_and_the_action(
    people: dict[str, Any], run: Run, action: str
) -> None:
    support = _client(people["support"])
    _refused(support.get(reverse("handover:run_confirm", args=[run.pk, action]), {"step": "x\x00"}), "step")
    before = (AuditEntry.objects.count(), Run.objects.get(pk=run.pk).version)
    response = support.post(
        reverse("handover:run_act", args=[run.pk, action]),
        {"state": run_state_token(run), "step_id": f"{run.pk}:1:start_return\x00", "note": "checked"},
    )
    _refused(response, "step_id")
    assert (AuditEntry.objects.count(), Run.objects.get(pk=run.pk).version) == before


def test_the_panel_poll_refuses_a_malformed_state(people: dict[str, Any], run: Run) -> None:
    _refused(
        _client(people["support"]).get(reverse("handover:run_panel", args=[run.pk]), {"state": "\x00"}),
        "state",
    )


@pytest.mark.parametrize("owner", ["²", "٣", "3\x00", "-1", "99999999999999999999999"])
def test_a_dead_letter_owner_in_other_digits_is_refused_not_read_as_a_number(
    people: dict[str, Any], letter: DeadLetter, owner: str
) -> None:
    # Users 1..n exist: '٣' must not be taken as user 3.
    response = _client(people["lead"]).post(
        reverse("handover:dead_letter_act", args=[letter.pk, "assign"]), {"owner": owner}
    )
    _refused(response, "owner")
    assert DeadLetter.objects.get(pk=letter.pk).owner == people["lead"]
    assert not AuditEntry.objects.exists()


def test_the_dead_letter_page_refuses_an_unknown_show(people: dict[str, Any], letter: DeadLetter) -> None:
    _refused(_client(people["support"]).get(reverse("handover:dead_letters"), {"show": "\x00"}), "show")


def test_assigning_from_the_queue_with_a_bad_filter_writes_nothing(people: dict[str, Any], run: Run) -> None:
    """The queue's filters ride along with its assign (hx-include); a bad one used to be found
    only when the queue was drawn again, after the assignment had been committed (a 500)."""
    response = _client(people["support"]).post(
        reverse("handover:run_act", args=[run.pk, "assign"]),
        {"state": run_state_token(run), "from": "queue", "q": "\x00"},
        headers={"HX-Request": "true"},
    )
    _refused(response, "q")
    run.refresh_from_db()
    assert run.assignee_id is None
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("username", ["x" * 20_000, "a\x00b"])
def test_a_login_with_a_huge_or_nul_username_is_refused_not_a_500(username: str) -> None:
    """Login throttling records the username of a failed login; one longer than its column (or
    with a NUL) used to be a DataError."""
    response = Client(raise_request_exception=False).post(
        reverse("login"), {"username": username, "password": "wrong"}
    )
    assert response.status_code == 200  # the form again, with its error
    assert "Please enter a correct username and password" in response.content.decode() or (
        "username" in response.content.decode()
    )
