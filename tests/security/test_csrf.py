"""CSRF: every POST of the dashboard is refused without the token and writes nothing; with the
X-CSRFToken header the base template gives htmx (`hx-headers` on <body>) it gets through. The
REST API is CSRF-exempt for agent tokens (no cookie is involved) but not for staff sessions."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditEntry
from compensations.models import Compensation, CompensationStatus, DeadLetter
from console import staff_actions
from console.actions import ACT
from console.forms import DeadLetterTakeForm
from journal import services
from journal.models import AgentToken, CustomerMessage, Intent, JournalEvent, Run, Tenant
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}


# Every registered action, read when the test runs: a new action is covered without an edit here.
def run_action_names() -> list[str]:
    return [action.name for action in staff_actions.run_actions()]


def dead_letter_action_names() -> list[str]:
    return [action.name for action in staff_actions.dead_letter_actions()]


def world_state() -> dict[str, Any]:
    """Everything a dashboard action could change."""
    return {
        "counts": [m.objects.count() for m in (Run, Intent, CustomerMessage, JournalEvent, AuditEntry)],
        "runs": list(Run.objects.order_by("pk").values_list("pk", "version", "status", "assignee_id")),
        "letters": list(DeadLetter.objects.values_list("pk", "owner_id", "resolved_at")),
        "compensations": list(Compensation.objects.values_list("pk", "status", "retry_round")),
    }


@pytest.fixture
def lead(persona: Any, tenant: Tenant) -> Any:
    return persona("team_lead", tenant)


@pytest.fixture
def run(tenant: Tenant) -> Run:
    actor = services.Actor.agent("returns-bot")
    run = factories.run_via_service(tenant=tenant, actor=actor)
    done = services.intent_record(run=run, tool="reserve", args={"sku": "B-1"}, turn=1, actor=actor).intent
    services.outcome_record(intent=done, ok=True, receipt={"reservation": "R-1"}, actor=actor)
    return run


@pytest.fixture
def dead_letter(run: Run, lead: Any) -> DeadLetter:
    """An open dead letter owned by the lead: every action on it would change something."""
    compensation = Compensation.objects.create(
        original=run.intents.get(), status=CompensationStatus.DEAD_LETTERED
    )
    return DeadLetter.objects.create(
        compensation=compensation, error_class="permanent", error="refused", attempts=5, owner=lead
    )


def csrf_client(user: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def htmx_token(client: Client, run: Run) -> str:
    """The token as htmx sends it: from `hx-headers` on the page's <body>."""
    page = client.get(reverse("handover:run_detail", args=[run.pk]))
    assert page.status_code == 200
    match = re.search(r"<body hx-headers='([^']*)'", page.content.decode())
    assert match, "the base template sets hx-headers on <body>"
    headers = json.loads(match[1])
    return str(headers["X-CSRFToken"])


def dashboard_posts(run: Run, letter: DeadLetter, lead: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every POST endpoint of the dashboard, with a form that would be accepted."""
    step = run.intents.get()
    form = {
        "state": "",  # filled in below from the page
        "step_id": step.step_id,
        "note": "checked the carrier portal",
        "channel": "email",
        "body": "Your refund is on its way.",
    }
    posts = [(reverse("handover:run_act", args=[run.pk, action]), form) for action in run_action_names()]
    posts += [
        (
            reverse("handover:dead_letter_act", args=[letter.pk, action]),
            {"note": "undone by hand", "owner": str(lead.pk)},
        )
        for action in dead_letter_action_names()
    ]
    posts.append((reverse("handover:audit_verify"), {}))  # a lead's re-check of the audit chain
    return posts


def test_every_dashboard_post_without_the_csrf_token_is_refused_and_writes_nothing(
    run: Run, dead_letter: DeadLetter, lead: Any
) -> None:
    from handover import run_state_token

    client = csrf_client(lead)
    before = world_state()
    for url, form in dashboard_posts(run, dead_letter, lead):
        response = client.post(url, {**form, "state": run_state_token(run)}, headers=HTMX)
        assert response.status_code == 403, url
        assert world_state() == before, url
    response = client.post(reverse("logout"))
    assert response.status_code == 403
    assert client.get(reverse("handover:queue")).status_code == 200  # still logged in


def test_with_the_htmx_header_from_the_page_every_dashboard_post_gets_past_csrf(
    run: Run, dead_letter: DeadLetter, lead: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audit.tasks import verify_audit_chain
    from compensations.tasks import compensate_run, compensate_step
    from reconciliation.tasks import reconcile_intent, resume_run

    for task in (compensate_step, compensate_run, reconcile_intent, resume_run, verify_audit_chain):
        monkeypatch.setattr(task, "delay", lambda *args: None)  # no broker: queued work is not the point
    client = csrf_client(lead)
    token = htmx_token(client, run)
    for url, form in dashboard_posts(run, dead_letter, lead):
        response = client.post(url, form, headers={**HTMX, "X-CSRFToken": token})
        # Past CSRF, the action itself answers (often 400/409: the form's state is empty or stale).
        assert response.status_code != 403, (url, response.content[:300])
    response = client.post(reverse("logout"), headers={"X-CSRFToken": token})
    assert response.status_code == 302
    assert client.get(reverse("handover:queue")).status_code == 302  # logged out


def test_the_api_needs_no_csrf_token_with_an_agent_token(tenant: Tenant) -> None:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="returns-bot", digest=AgentToken.digest_of(secret))
    client = Client(enforce_csrf_checks=True, headers={"Authorization": f"Bearer {secret}"})
    body = {"task_type": "returns", "versions": dict(factories.VERSIONS), "plan": []}
    response = client.post("/api/v1/runs/", body, content_type="application/json")
    assert response.status_code == 201, response.content


def test_a_session_posting_to_the_api_without_the_csrf_token_is_refused_for_csrf(run: Run, lead: Any) -> None:
    client = csrf_client(lead)
    before = world_state()
    url = f"/api/v1/runs/{run.pk}/heartbeat/"
    response = client.post(url, {}, content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    # With the token the session is past CSRF, and refused for what it is: staff do not write.
    token = htmx_token(client, run)
    response = client.post(url, {}, content_type="application/json", headers={"X-CSRFToken": token})
    assert response.status_code == 403
    assert "agent token" in response.json()["detail"]
    assert world_state() == before


def test_an_action_added_to_the_registry_alone_is_refused_without_the_token(
    run: Run, dead_letter: DeadLetter, lead: Any
) -> None:
    performed: list[Any] = []
    poke = staff_actions.StaffAction(
        kind=staff_actions.Kind.DEAD_LETTER,
        name="dummy-poke",
        label="Poke",
        permission=ACT,
        form_class=DeadLetterTakeForm,
        perform=lambda ctx, letter_id, data: performed.append(letter_id),
        done_message="Poked.",
        offer=staff_actions.offer_on_open_letter(),
    )
    with staff_actions.registered(poke):
        url = reverse("handover:dead_letter_act", args=[dead_letter.pk, "dummy-poke"])
        assert url in [posted for posted, _form in dashboard_posts(run, dead_letter, lead)]
        assert csrf_client(lead).post(url, {}, headers=HTMX).status_code == 403
    assert performed == []
