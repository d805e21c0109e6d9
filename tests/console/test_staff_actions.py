"""The staff-action registry (console.staff_actions) and the forms it names (console.forms):
which actions exist and who may take them, what a form refuses (a 400 naming the field, the form
kept, nothing written), and that a page or an action view loads the run's handover rows once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEntry
from compensations.models import Compensation, CompensationStatus, DeadLetter
from console import actions, confirmations, forms, staff_actions, step_edits, views
from console.actions import ACT
from console.dead_letters import ASSIGN
from handover import handover_rows, run_state_token
from journal import services
from journal.models import Run, Tenant
from journal.services import Actor
from reconciliation.decisions import run_decide
from tests import factories

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
ARABIC_INDIC = {str(d): chr(0x0660 + d) for d in range(10)}  # Arabic-Indic digits, which int() reads as 0..9


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def run(make_run: Callable[..., Run], agent_actor: Actor) -> Run:
    """An escalated run with one performed step and one open escalation (no sandbox needed)."""
    run = make_run(task_type="warranty", ticket_id="T-50001")
    recorded = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=agent_actor
    )
    services.outcome_record(intent=recorded.intent, ok=True, receipt={"label": "RL-1"}, actor=agent_actor)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    decision = run_decide(run=run, actor=Actor.system("test"), quiet_for=timedelta(0))
    assert decision.outcome == "escalated", decision
    return Run.objects.select_related("tenant").get(pk=run.pk)


@pytest.fixture
def support(run: Run, persona: Any) -> Any:
    return persona("support_staff", run.tenant)


def _nothing_written(run: Run) -> None:
    assert not AuditEntry.objects.exists()
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.version, fresh.assignee_id, fresh.status) == (run.version, None, run.status)
    assert run.customer_messages.count() == 0
    assert not Compensation.objects.exists()


# --- the registry -----------------------------------------------------------------------------


def test_the_registry_lists_exactly_the_console_actions_with_their_permissions_and_forms() -> None:
    assert [(a.name, a.permission, a.form_class) for a in staff_actions.run_actions()] == [
        ("assign", ACT, forms.AssignForm),
        ("assign-to", ACT, forms.AssignToForm),
        ("resume", ACT, forms.ResumeForm),
        ("compensate-run", ACT, forms.CompensateRunForm),
        ("customer-told", ACT, forms.CustomerToldForm),
        ("resolve", ACT, forms.ResolveRunForm),
        ("compensate-step", ACT, forms.CompensateStepForm),
        ("retry-lookup", ACT, forms.RetryLookupForm),
        ("mark-performed", ACT, forms.MarkStepForm),
        ("mark-not-performed", ACT, forms.MarkStepForm),
        ("allow-again", ACT, forms.StepActionForm),
        ("edit-step", ACT, step_edits.EditStepArgsForm),
    ]
    assert [(a.name, a.permission, a.form_class) for a in staff_actions.dead_letter_actions()] == [
        ("take", ACT, forms.DeadLetterTakeForm),
        ("assign", ASSIGN, forms.DeadLetterAssignForm),
        ("retry", ACT, forms.DeadLetterRetryForm),
        ("resolve", ACT, forms.DeadLetterResolveForm),
    ]
    every = [*staff_actions.run_actions(), *staff_actions.dead_letter_actions()]
    assert all(a.label and a.done_message for a in every)
    # Every run action says what it will do before the click.
    assert all(a.confirm is not None for a in staff_actions.run_actions())


def test_an_action_name_is_registered_once_per_kind() -> None:
    assign = staff_actions.action_get(staff_actions.Kind.RUN, "assign")
    assert assign is not None
    with pytest.raises(ValueError, match="already registered"):
        staff_actions.register(assign)
    # The same slug may name an action of another kind: each kind has its own URL.
    assert staff_actions.action_get(staff_actions.Kind.DEAD_LETTER, "assign") is not None


def test_an_unknown_action_is_not_found(run: Run, support: Any) -> None:
    client = _client(support)
    assert client.post(reverse("handover:run_act", args=[run.pk, "delete-run"]), {}).status_code == 404
    assert client.get(reverse("handover:run_confirm", args=[run.pk, "delete-run"])).status_code == 404
    _nothing_written(run)


@pytest.fixture
def dummy_action() -> Iterator[tuple[staff_actions.StaffAction, list[Any]]]:
    """An action added to the registry alone (offered under the run's next action, with a form
    that needs a note); `performed` records its calls."""
    performed: list[Any] = []
    action = staff_actions.StaffAction(
        kind=staff_actions.Kind.RUN,
        name="note-to-self",
        label="Note to self",
        permission=ACT,
        form_class=forms.ResolveRunForm,
        perform=lambda ctx, run, data: performed.append((ctx.user.username, run.pk, data["note"])),
        done_message="Noted.",
        offer=staff_actions.offer_on_run(staff_actions.Place.NEXT),
    )
    with staff_actions.registered(action):
        yield action, performed
    assert staff_actions.action_get(staff_actions.Kind.RUN, "note-to-self") is None


def test_an_action_registered_alone_is_offered_confirmed_checked_and_performed(
    run: Run, support: Any, dummy_action: Any
) -> None:
    _action, performed = dummy_action
    client = _client(support)

    page = client.get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert reverse("handover:run_confirm", args=[run.pk, "note-to-self"]) in page
    assert "Note to self…" in page

    dialog = client.get(reverse("handover:run_confirm", args=[run.pk, "note-to-self"]), headers=HTMX)
    assert dialog.status_code == 200
    assert 'name="note" required' in dialog.content.decode()

    url = reverse("handover:run_act", args=[run.pk, "note-to-self"])
    refused = client.post(url, {"state": run_state_token(run), "note": ""}, headers=HTMX)
    assert refused.status_code == 400 and "note is required" in refused.content.decode()
    assert performed == []

    done = client.post(url, {"state": run_state_token(run), "note": "called the buyer"}, headers=HTMX)
    assert done.status_code == 200 and "Noted." in done.content.decode()
    assert performed == [(support.username, run.pk, "called the buyer")]

    nobody = persona_without_role(run.tenant)
    assert _client(nobody).post(url, {"state": run_state_token(run), "note": "x"}).status_code == 403
    assert len(performed) == 1


def persona_without_role(tenant: Tenant) -> Any:
    return factories.StaffUserFactory(username="no-role", membership__tenant=tenant)


# --- what a run action's form refuses ---------------------------------------------------------


def _form(run: Run, **overrides: Any) -> dict[str, Any]:
    step = run.intents.get()
    return {"state": run_state_token(run), "step_id": step.step_id, **overrides}


@pytest.mark.parametrize(
    ("action", "overrides", "message"),
    [
        ("assign", {"state": "1.2.\x00"}, "state contains a NUL character (U+0000)"),
        ("resolve", {"note": "refunded\x00"}, "note contains a NUL character (U+0000)"),
        ("resolve", {"note": " \n "}, "note is required"),
        ("resolve", {"note": "x" * 4001}, "note is 4001 characters; the limit is 4000"),
        ("mark-performed", {"note": ""}, "note is required"),
        ("compensate-step", {"step_id": "s\x001"}, "step_id contains a NUL character (U+0000)"),
        ("compensate-step", {"step_id": ARABIC_INDIC["3"]}, "step_id must be printable ASCII without spaces"),
        ("retry-lookup", {"step_id": ""}, "step_id is required"),
        ("customer-told", {"channel": "fax", "body": "On it."}, "channel must be one of"),
        ("customer-told", {"channel": "email", "body": "x" * 10_001}, "body is 10001 characters"),
        ("customer-told", {"channel": "email", "body": "\x00"}, "body contains a NUL character"),
    ],
)
def test_a_bad_field_is_a_400_naming_it_with_the_dialog_kept_and_nothing_written(
    run: Run, support: Any, action: str, overrides: dict[str, Any], message: str
) -> None:
    url = reverse("handover:run_act", args=[run.pk, action])

    response = _client(support).post(url, _form(run, **overrides), headers=HTMX)

    assert response.status_code == 400
    body = response.content.decode()
    assert message in body
    # The dialog again, in the dialog's place, with the form as it was posted.
    assert response["HX-Retarget"] == "#dialog"
    assert body.lstrip().startswith('<div class="confirm"')
    if "step_id" not in overrides:  # a step that is not the run's has no form to offer again
        assert f'action="{url}"' in body
    _nothing_written(run)


def test_a_refused_form_keeps_what_the_person_typed(run: Run, support: Any) -> None:
    url = reverse("handover:run_act", args=[run.pk, "customer-told"])
    form = _form(run, channel="fax", body="Your refund is on its way.")

    htmx = _client(support).post(url, form, headers=HTMX).content.decode()
    assert "Your refund is on its way.</textarea>" in htmx
    assert f'name="state" value="{form["state"]}"' in htmx

    # Without htmx: the whole page, with the dialog and the refusal on it.
    plain = _client(support).post(url, form)
    assert plain.status_code == 400
    page = plain.content.decode()
    assert "<html" in page and "channel must be one of" in page
    assert "Your refund is on its way.</textarea>" in page
    _nothing_written(run)


def test_a_form_is_checked_after_the_role_and_before_the_service(
    run: Run, support: Any, persona: Any, other_tenant: Tenant
) -> None:
    bad = _form(run, note="\x00")
    url = reverse("handover:run_act", args=[run.pk, "resolve"])
    assert _client(persona_without_role(run.tenant)).post(url, bad).status_code == 403
    assert _client(persona("support_staff", other_tenant)).post(url, bad).status_code == 404
    # A stale state with a bad note: the form speaks first, the service is not reached.
    stale = _client(support).post(url, {**bad, "state": "0.0.0"}, headers=HTMX)
    assert stale.status_code == 400 and "note contains a NUL" in stale.content.decode()
    _nothing_written(run)


# --- what a dead letter's form refuses --------------------------------------------------------


@pytest.fixture
def lead(run: Run, persona: Any) -> Any:
    return persona("team_lead", run.tenant)


@pytest.fixture
def dead_letter(run: Run, lead: Any) -> DeadLetter:
    compensation = Compensation.objects.create(
        original=run.intents.get(), status=CompensationStatus.DEAD_LETTERED
    )
    return DeadLetter.objects.create(
        compensation=compensation, error_class="permanent", error="refused", attempts=5, owner=lead
    )


def _letter_unchanged(letter: DeadLetter) -> None:
    fresh = DeadLetter.objects.get(pk=letter.pk)
    assert (fresh.owner_id, fresh.resolved_at) == (letter.owner_id, None)
    assert fresh.compensation.status == CompensationStatus.DEAD_LETTERED
    assert not AuditEntry.objects.exists()


def test_an_owner_id_in_other_digits_is_a_400_never_the_person_it_reads_as(
    dead_letter: DeadLetter, lead: Any, support: Any
) -> None:
    # int('٣') == 3: read loosely, this would hand the letter to `support`.
    lookalike = "".join(ARABIC_INDIC[d] for d in str(support.pk))
    url = reverse("handover:dead_letter_act", args=[dead_letter.pk, "assign"])

    response = _client(lead).post(url, {"owner": lookalike}, headers=HTMX)

    assert response.status_code == 400
    body = response.content.decode()
    assert "owner must be a number in ASCII digits (0-9)" in body
    assert body.lstrip().startswith('<div id="letters"')
    # The refused form is drawn again on its letter, still offering the tenant's staff.
    assert 'aria-invalid="true"' in body and f'<option value="{support.pk}"' in body
    assert '<button type="submit">Assign</button>' in body  # posts at once: no dialog, no "…"
    _letter_unchanged(dead_letter)

    nul = _client(lead).post(url, {"owner": f"{support.pk}\x00"}, headers=HTMX)
    assert nul.status_code == 400 and "owner contains a NUL character" in nul.content.decode()
    missing = _client(lead).post(url, {}, headers=HTMX)
    assert missing.status_code == 400 and "owner is required" in missing.content.decode()
    _letter_unchanged(dead_letter)


def test_a_dead_letter_note_with_a_nul_is_a_400_with_the_form_kept(
    dead_letter: DeadLetter, support: Any
) -> None:
    url = reverse("handover:dead_letter_act", args=[dead_letter.pk, "resolve"])

    response = _client(support).post(url, {"note": "by phone\x00"}, headers=HTMX)

    assert response.status_code == 400
    body = response.content.decode()
    assert "note contains a NUL character (U+0000)" in body
    assert 'aria-invalid="true"' in body  # the refused field is marked on its letter
    _letter_unchanged(dead_letter)


# --- the handover rows, once per request ------------------------------------------------------


@pytest.fixture
def row_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every handover_rows call the views and the confirmation builder make, by caller."""
    calls: list[str] = []
    for module in (views, actions, confirmations):

        def counting(run: Run, *, limit: int | None = None, _module: str = module.__name__) -> Any:
            calls.append(_module)
            return handover_rows(run, limit=limit)

        monkeypatch.setattr(module, "handover_rows", counting)
    return calls


def test_the_run_page_and_every_confirmation_load_the_handover_rows_once(
    run: Run, support: Any, row_loads: list[str]
) -> None:
    client = _client(support)
    step = run.intents.get().step_id

    assert client.get(reverse("handover:run_detail", args=[run.pk])).status_code == 200
    assert row_loads == ["console.views"]
    for action in staff_actions.run_actions():
        row_loads.clear()
        url = reverse("handover:run_confirm", args=[run.pk, action.name])
        assert client.get(url, {"step": step}, headers=HTMX).status_code == 200, action.name
        assert row_loads == ["console.views"], action.name


def test_an_action_view_loads_the_handover_rows_once(run: Run, support: Any, row_loads: list[str]) -> None:
    client = _client(support)
    url = reverse("handover:run_act", args=[run.pk, "assign"])

    assert client.post(url, {"state": run_state_token(run)}, headers=HTMX).status_code == 200
    assert row_loads == ["console.views"]  # the new panel, drawn once the action committed

    row_loads.clear()
    assert client.post(url, {"state": "0.0.0"}, headers=HTMX).status_code == 409
    assert row_loads == ["console.views"]  # the refusal with the run as it is now

    row_loads.clear()
    resolve = reverse("handover:run_act", args=[run.pk, "resolve"])
    assert client.post(resolve, {"state": run_state_token(run), "note": ""}, headers=HTMX).status_code == 400
    assert row_loads == ["console.views"]  # the dialog kept, with its confirmation


def test_a_confirmation_costs_the_queries_of_the_run_page_and_no_second_load_of_its_rows(
    run: Run, support: Any
) -> None:
    client = _client(support)
    page_url = reverse("handover:run_detail", args=[run.pk])
    client.get(page_url)  # warm the session and permission caches
    with CaptureQueriesContext(connection) as page:
        assert client.get(page_url).status_code == 200
    step = run.intents.get().step_id
    for action in staff_actions.run_actions():
        url = reverse("handover:run_confirm", args=[run.pk, action.name])
        with CaptureQueriesContext(connection) as dialog:
            assert client.get(url, {"step": step}, headers=HTMX).status_code == 200
        # Measured: 13 for the page and for each dialog; undoing a step reads its catalogue
        # entry once more. A second handover_rows would cost 7.
        assert len(dialog) <= len(page) + 1, (action.name, [q["sql"] for q in dialog.captured_queries])


@pytest.mark.parametrize("step", ["s\x001", ARABIC_INDIC["3"], "x" * 300])
def test_a_confirmation_asked_about_a_step_that_is_no_step_says_so(run: Run, support: Any, step: str) -> None:
    """A step id no step can have (a NUL, other digits, too long) is refused as the parameter it
    is, naming `step`, before anything is read: no confirmation, nothing to post."""
    url = reverse("handover:run_confirm", args=[run.pk, "compensate-step"])
    response = _client(support).get(url, {"step": step}, headers=HTMX)
    assert response.status_code == 400
    body = response.content.decode()
    assert "step" in body
    assert 'name="step_id"' not in body  # nothing to post
