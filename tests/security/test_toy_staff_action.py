"""A staff action added in one place — this file's `TOY`, registered for the test and nowhere
else (no URL, view, template, form of the product, access row or CSRF list edited) — is offered on
the run page and in the queue, says what it will do, does its work by its own service (a change
to the run and an audit row, in one transaction), once or to many runs, and is covered by the
access matrix (read-only 403, outsiders 404) and the CSRF tests, which read the registry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django import forms
from django.db.models import F
from django.template import Template
from django.test import Client
from django.urls import reverse

from audit.chain import audit_record
from audit.models import AuditEntry
from console import staff_actions
from console.actions import ACT, RunChanged, StaffContext, changes_since
from console.confirmations import Confirmation
from console.forms import NoteField, RunActionForm
from handover import run_state_token
from journal import services
from journal.models import Run
from tests.security import test_access_matrix as matrix
from tests.security import test_csrf as csrf

# The fixtures of the access-matrix and CSRF tests, used here as they are.
world = matrix.world
run, dead_letter, lead = csrf.run, csrf.dead_letter, csrf.lead

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}


# --- the toy action, whole ----------------------------------------------------------------------


class FlagForm(RunActionForm):
    note = NoteField(max_length=200, strip=False, widget=forms.TextInput(attrs={"required": True}))


def run_flag(ctx: StaffContext, *, run_id: Any, state: str, note: str) -> Run:
    """The toy's service: put the run back in front of a person, with the note, audited."""
    with services.durable():
        run = Run.objects.select_for_update().filter(pk=run_id, tenant=ctx.tenant).first()
        if run is None:
            raise services.NotFound("no such run", field="run_id")
        if state != run_state_token(run):
            raise RunChanged(run, changes_since(run, state))
        Run.objects.filter(pk=run.pk).update(
            awaiting_person=True, outcome_detail=f"flagged: {note}", version=F("version") + 1
        )
        audit_record(
            user=ctx.user,
            tenant=ctx.tenant,
            action="flag_for_review",
            run=run,
            old={"awaiting_person": run.awaiting_person},
            new={"awaiting_person": True},
            note=note,
            request_id=ctx.request_id,
        )
    return run


TOY = staff_actions.StaffAction(
    kind=staff_actions.Kind.RUN,
    name="flag-for-review",
    label="Flag for review",
    permission=ACT,
    form_class=FlagForm,
    perform=lambda ctx, run, data: run_flag(ctx, run_id=run.pk, state=data["state"], note=data["note"]),
    done_message="Flagged for review.",
    offer=staff_actions.offer_on_run(staff_actions.Place.NEXT),
    confirm=lambda run, rows, step_id: Confirmation(
        "Flag the run for review", ["the run goes back in front of a person"], button="Flag"
    ),
    template=Template('{{ form.state }}<p class="toy-snippet">Why? {{ form.note }}</p>'),
    on_queue_row=lambda run, user: True,
    bulk=staff_actions.Bulk(
        label="Flag for review",
        done="flagged",
        act=lambda ctx, run_id, state, data: run_flag(ctx, run_id=run_id, state=state, note=data["note"]),
        needs_note=True,
    ),
)


@pytest.fixture
def toy() -> Iterator[staff_actions.StaffAction]:
    with staff_actions.registered(TOY):
        yield TOY
    assert staff_actions.action_get(staff_actions.Kind.RUN, TOY.name) is None


# --- on the pages, by its own service -------------------------------------------------------------


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_toy_is_offered_confirmed_and_done_by_its_own_service(run: Run, lead: Any, toy: Any) -> None:
    client = _client(lead)
    confirm_url = reverse("handover:run_confirm", args=[run.pk, toy.name])
    page = client.get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert confirm_url in page and "Flag for review…" in page

    dialog = client.get(confirm_url, headers=HTMX).content.decode()
    assert "Flag the run for review" in dialog and "the run goes back in front of a person" in dialog
    assert '<p class="toy-snippet">Why? <input type="text" name="note"' in dialog  # its own snippet

    url = reverse("handover:run_act", args=[run.pk, toy.name])
    refused = client.post(url, {"state": run_state_token(run), "note": ""}, headers=HTMX)
    assert refused.status_code == 400 and "note" in refused.content.decode()
    assert not AuditEntry.objects.exists()

    done = client.post(url, {"state": run_state_token(run), "note": "odd refund"}, headers=HTMX)
    assert done.status_code == 200 and "Flagged for review." in done.content.decode()
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.awaiting_person, fresh.outcome_detail, fresh.version) == (
        True,
        "flagged: odd refund",
        run.version + 1,
    )
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.username, entry.run_id, entry.note) == (
        "flag_for_review",
        lead.username,
        run.pk,
        "odd refund",
    )


def test_the_queue_offers_the_toy_and_does_it_to_the_runs_ticked_by_its_own_service(
    run: Run, lead: Any, toy: Any
) -> None:
    Run.objects.filter(pk=run.pk).update(awaiting_person=True)  # in the queue
    run.refresh_from_db()
    client = _client(lead)
    queue = client.get(reverse("handover:queue")).content.decode()
    assert f'<option value="{toy.name}">Flag for review</option>' in queue
    assert reverse("handover:run_act", args=[run.pk, toy.name]) in queue  # on its row

    ticked = f"{run.pk}:{run_state_token(run)}"
    bulk = reverse("handover:run_bulk")
    refused = client.post(bulk, {"action": toy.name, "run": [ticked], "note": " "}, headers=HTMX)
    assert refused.status_code == 400 and f"note is required to {toy.name}" in refused.content.decode()

    done = client.post(bulk, {"action": toy.name, "run": [ticked], "note": "batch"}, headers=HTMX)
    assert done.status_code == 200
    assert f"<strong>{run.ticket_id or run.pk}</strong>: flagged</li>" in done.content.decode()
    assert list(AuditEntry.objects.values_list("action", "note")) == [("flag_for_review", "batch")]


# --- in the access matrix and the CSRF tests, which read the registry -------------------------------


def test_the_toy_is_in_the_access_matrix(world: matrix.World, toy: Any) -> None:
    wrong, requests, requested = matrix.answer_the_table(world, only_action=toy.name)
    run_id = world.run.pk
    assert requested == [f"GET /runs/{run_id}/confirm/{toy.name}/", f"POST /runs/{run_id}/act/{toy.name}/"]
    assert requests == 2 * len(matrix.PERSONAS)
    assert not wrong, "\n".join(wrong)
    # Who may use it, as the table said: staff get past the role and tenant checks (the form
    # refuses what the table posts), a read-only person is refused, an outsider finds nothing.
    url = reverse("handover:run_act", args=[run_id, toy.name])
    answers = {
        name: world.clients[name]().post(url, {}).status_code for name in ("lead", "read_only", "outsider")
    }
    assert answers == {"lead": 400, "read_only": 403, "outsider": 404}
    assert not AuditEntry.objects.exists()


def test_the_toy_is_in_the_csrf_tests(run: Run, dead_letter: Any, lead: Any, toy: Any) -> None:
    url = reverse("handover:run_act", args=[run.pk, toy.name])
    posts = dict(csrf.dashboard_posts(run, dead_letter, lead))
    assert url in posts

    client = csrf.csrf_client(lead)
    before = csrf.world_state()
    form = {**posts[url], "state": run_state_token(run)}
    assert client.post(url, form, headers=HTMX).status_code == 403
    assert csrf.world_state() == before and not AuditEntry.objects.exists()

    token = csrf.htmx_token(client, run)
    assert client.post(url, form, headers={**HTMX, "X-CSRFToken": token}).status_code == 200
    assert AuditEntry.objects.filter(action="flag_for_review").count() == 1
