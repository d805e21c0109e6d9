"""Edit arguments… on the run page (console.step_edits, console.actions.step_args_edit_request):
offered on each not-done step of a run waiting for a person, a form with one labelled field per
schema property, the changes shown old → new before saving, refusals naming the field with what
was typed kept, a stale page refused with nothing changed, an audit row beside the journal's
event, and the resume preview sending the new arguments."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditAction, AuditEntry
from console import actions, step_edits
from console.actions import RunChanged, StaffContext
from handover import run_state_token
from journal.models import JournalEvent, Run
from journal.selectors import plan_with_keys
from tests import factories
from tests.support.plugins import declaring
from tests.support.stuck_runs import escalated_run, sandbox_tools_declared

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
EDIT = "edit-step"
OLD_REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
NEW_REFUND = {"order_id": "SU-90317", "amount": "9.95", "currency": "USD"}


@pytest.fixture(autouse=True)
def sandbox_schemas() -> Iterator[None]:
    with sandbox_tools_declared():
        yield


@pytest.fixture
def run(make_run: Callable[..., Run]) -> Run:
    return escalated_run(make_run, task_type="no-policy")


@pytest.fixture
def support(run: Run, persona: Callable[..., Any]) -> Any:
    return persona("support_staff", run.tenant)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _key(run: Run, tool: str = "issue_refund") -> str:
    return next(step["key"] for step in plan_with_keys(Run.objects.get(pk=run.pk)) if step["tool"] == tool)


def _state(run: Run) -> str:
    return run_state_token(Run.objects.get(pk=run.pk))


def _posted(run: Run, args: dict[str, str], **more: str) -> dict[str, str]:
    return {
        "state": _state(run),
        "step_id": _key(run),
        **{f"args.{name}": value for name, value in args.items()},
        **more,
    }


def _preview(client: Client, run: Run, data: dict[str, str]) -> Any:
    return client.post(reverse("handover:run_preview", args=[run.pk, EDIT]), data, headers=HTMX)


def _act(client: Client, run: Run, data: dict[str, str]) -> Any:
    return client.post(reverse("handover:run_act", args=[run.pk, EDIT]), data, headers=HTMX)


def _refund_args(run: Run) -> dict[str, Any]:
    return next(step["args"] for step in Run.objects.get(pk=run.pk).plan if step["tool"] == "issue_refund")


def _unchanged(run: Run, version: int) -> None:
    assert Run.objects.get(pk=run.pk).version == version
    assert _refund_args(run) == OLD_REFUND
    assert not JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.STEP_ARGS_EDITED).exists()
    assert not AuditEntry.objects.filter(run=run, action=AuditAction.EDIT_STEP).exists()


def test_each_not_done_step_of_a_waiting_run_offers_edit_arguments(run: Run, support: Any) -> None:
    body = _client(support).get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    not_done = body.split('<section class="not-done">')[1].split("</section>")[0]
    for tool in ("issue_refund", "notify_seller"):
        item = not_done.split(f'data-step-key="{_key(run, tool)}"')[1].split("</li>")[0]
        assert "Edit arguments…" in item
        assert f"?step={_key(run, tool)}" in item


def test_a_running_run_and_a_read_only_person_are_not_offered_it(
    make_run: Callable[..., Run], run: Run, persona: Callable[..., Any]
) -> None:
    running = make_run(ticket_id="T-2")
    support = persona("support_staff", run.tenant)
    assert (
        "Edit arguments"
        not in _client(support).get(reverse("handover:run_detail", args=[running.pk])).content.decode()
    )
    reader = factories.StaffUserFactory(username="reader", membership__tenant=run.tenant)
    assert (
        "Edit arguments"
        not in _client(reader).get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    )
    version = Run.objects.get(pk=run.pk).version
    assert _act(_client(reader), run, _posted(run, NEW_REFUND)).status_code == 403
    assert _preview(_client(reader), run, _posted(run, NEW_REFUND)).status_code == 403
    _unchanged(run, version)


def test_the_dialog_has_one_labelled_field_per_argument_with_its_value(run: Run, support: Any) -> None:
    url = reverse("handover:run_confirm", args=[run.pk, EDIT]) + f"?step={_key(run)}"
    answer = _client(support).get(url, headers=HTMX)
    body = answer.content.decode()
    assert answer.status_code == 200
    assert f"Edit the arguments of {step_edits.tool_named('issue_refund')}" in body
    for name, value in OLD_REFUND.items():
        if name == "currency":
            assert '<select name="args.currency"' in body and '<option value="USD" selected>' in body
        else:
            assert f'name="args.{name}" value="{value}"' in body
        assert f"<label>{name}" in body
    assert "Show the changes" in body


def test_the_preview_shows_each_change_old_to_new_and_writes_nothing(run: Run, support: Any) -> None:
    version = Run.objects.get(pk=run.pk).version
    answer = _preview(_client(support), run, _posted(run, NEW_REFUND))
    body = answer.content.decode()
    assert answer.status_code == 200
    assert '<tr class="changed" data-arg="amount">' in body
    assert "<del>14.95</del>" in body and "→ 9.95" in body
    assert '<tr class="same" data-arg="currency">' in body
    assert f'name="previewed" value="{step_edits.args_digest(NEW_REFUND)}"' in body
    _unchanged(run, version)


def test_arguments_the_schema_refuses_are_named_and_kept_as_typed(run: Run, support: Any) -> None:
    version = Run.objects.get(pk=run.pk).version
    typed = {**NEW_REFUND, "amount": "nine ninety-five"}
    for send in (_preview, _act):
        answer = send(_client(support), run, _posted(run, typed, previewed="x"))
        body = answer.content.decode()
        assert answer.status_code == 400
        assert "args.amount" in body
        assert 'value="nine ninety-five"' in body
    _unchanged(run, version)


def test_saving_without_the_changes_shown_shows_them_and_writes_nothing(run: Run, support: Any) -> None:
    version = Run.objects.get(pk=run.pk).version
    answer = _act(_client(support), run, _posted(run, NEW_REFUND))
    assert answer.status_code == 400
    body = answer.content.decode()
    assert "look at the changes below before saving" in body and "→ 9.95" in body
    _unchanged(run, version)


def test_saving_what_was_shown_edits_the_step_with_an_audit_row(run: Run, support: Any) -> None:
    old_key = _key(run)
    data = _posted(run, NEW_REFUND, previewed=step_edits.args_digest(NEW_REFUND))
    answer = _act(_client(support), run, {**data})
    assert answer.status_code == 200, answer.content.decode()[:2000]
    assert "Arguments changed" in answer.content.decode()

    assert _refund_args(run) == NEW_REFUND
    new_key = _key(run)
    assert new_key != old_key
    [entry] = AuditEntry.objects.filter(run=run, action=AuditAction.EDIT_STEP)
    assert entry.user_id == support.pk
    assert entry.old_state == {"tool": "issue_refund", "args": OLD_REFUND, "key": old_key}
    assert entry.new_state == {"tool": "issue_refund", "args": NEW_REFUND, "key": new_key}
    [event] = JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.STEP_ARGS_EDITED)
    assert (event.data["old_key"], event.data["new_key"]) == (old_key, new_key)

    # The resume dialog says the step is sent with the new arguments, under the new key.
    preview = actions.resume_preview(Run.objects.get(pk=run.pk))
    [refund] = [s for s in preview.steps if s["tool"] == "issue_refund"]
    assert (refund["key"], refund["args"], refund["action"]) == (new_key, NEW_REFUND, "send")
    url = reverse("handover:run_confirm", args=[run.pk, "resume"])
    body = _client(support).get(url, headers=HTMX).content.decode()
    assert f"{step_edits.tool_named('issue_refund')} is sent with the arguments" in body
    assert "amount 9.95" in body and "amount was 14.95" in body


def test_a_page_drawn_before_another_change_is_refused_with_the_typed_text_kept(
    run: Run, support: Any, persona: Callable[..., Any]
) -> None:
    data = _posted(run, NEW_REFUND, previewed=step_edits.args_digest(NEW_REFUND))
    colleague = persona("support_staff", run.tenant, "colleague")
    actions.run_assign(StaffContext(user=colleague, tenant=run.tenant), run_id=run.pk, state=data["state"])
    version = Run.objects.get(pk=run.pk).version

    answer = _act(_client(support), run, data)

    body = answer.content.decode()
    assert answer.status_code == 409
    assert "This run changed while this was open" in body
    assert 'value="9.95"' in body  # the dialog again, with what was typed
    _unchanged(run, version)


def test_the_same_edit_submitted_twice_takes_effect_once(run: Run, support: Any) -> None:
    ctx = StaffContext(user=support, tenant=run.tenant)
    seen, key = _state(run), _key(run)
    actions.step_args_edit_request(ctx, run_id=run.pk, step_key=key, args=NEW_REFUND, state=seen)
    with pytest.raises(RunChanged):
        actions.step_args_edit_request(ctx, run_id=run.pk, step_key=key, args=NEW_REFUND, state=seen)
    assert JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.STEP_ARGS_EDITED).count() == 1
    assert AuditEntry.objects.filter(run=run, action=AuditAction.EDIT_STEP).count() == 1


def test_another_tenants_run_is_not_found(run: Run, persona: Callable[..., Any], other_tenant: Any) -> None:
    outsider = persona("support_staff", other_tenant)
    version = Run.objects.get(pk=run.pk).version
    assert _act(_client(outsider), run, _posted(run, NEW_REFUND)).status_code == 404
    assert _preview(_client(outsider), run, _posted(run, NEW_REFUND)).status_code == 404
    _unchanged(run, version)


def test_the_dialog_of_a_run_nobody_waits_on_says_why_it_cannot_edit(run: Run, support: Any) -> None:
    key = _key(run)
    ctx = StaffContext(user=support, tenant=run.tenant)
    actions.run_resolve(ctx, run_id=run.pk, note="refunded by hand", state=_state(run))
    url = reverse("handover:run_confirm", args=[run.pk, EDIT]) + f"?step={key}"
    body = _client(support).get(url, headers=HTMX).content.decode()
    assert "only a run waiting for a person has its steps edited" in body
    assert "Save the changes" not in body and 'name="args.amount"' not in body


COURIER = {
    "order_id": "SU-1",
    "boxes": 2,
    "weight_kg": 3.5,
    "speed": "standard",
    "signature": False,
    "address": {"line": "1 High St", "postcode": "AB1 2CD"},
}


@pytest.fixture
def courier_run(make_run: Callable[..., Run]) -> Iterator[Run]:
    with declaring("tests.console.step_edit_tools"):
        yield escalated_run(make_run, task_type="no-policy", plan=[{"tool": "book_courier", "args": COURIER}])


def _courier_form(run: Run, **typed: str) -> step_edits.EditStepArgsForm:
    key = plan_with_keys(Run.objects.get(pk=run.pk))[0]["key"]
    shown = {
        "args.order_id": "SU-1",
        "args.boxes": "2",
        "args.weight_kg": "3.5",
        "args.speed": "standard",
        "args.signature": "false",
        "args.address": '{"line":"1 High St","postcode":"AB1 2CD"}',
    }
    data = {"state": _state(run), "step_id": key, **shown, **typed}
    return step_edits.EditStepArgsForm(data, run=Run.objects.get(pk=run.pk), previewing=True)


def test_each_kind_of_argument_is_drawn_and_read_back_as_its_type(courier_run: Run) -> None:
    key = plan_with_keys(courier_run)[0]["key"]
    unbound = step_edits.EditStepArgsForm(run=courier_run, initial={"step_id": key})
    widgets = {f.name: f.widget_type for f in unbound.arg_fields()}
    assert widgets == {
        "args.order_id": "text",
        "args.boxes": "text",
        "args.weight_kg": "text",
        "args.speed": "select",
        "args.signature": "select",
        "args.address": "textarea",
    }
    assert unbound["args.address"].value() == '{"line":"1 High St","postcode":"AB1 2CD"}'
    assert unbound["args.weight_kg"].label == "weight_kg (optional)"

    form = _courier_form(
        courier_run,
        **{
            "args.boxes": "3",
            "args.weight_kg": "",
            "args.signature": "true",
            "args.address": '{"line": "2 Low Rd", "postcode": "AB1 2CD"}',
        },
    )
    assert form.is_valid(), form.errors
    assert form.new_args == {
        "order_id": "SU-1",
        "boxes": 3,
        "speed": "standard",
        "signature": True,
        "address": {"line": "2 Low Rd", "postcode": "AB1 2CD"},
    }
    changed = {c.name: (c.old, c.new) for c in form.diff if c.changed}
    assert changed == {
        "boxes": ("2", "3"),
        "weight_kg": ("3.5", "—"),
        "signature": ("false", "true"),
        "address": ('{"line":"1 High St","postcode":"AB1 2CD"}', '{"line":"2 Low Rd","postcode":"AB1 2CD"}'),
    }


@pytest.mark.parametrize(
    ("typed", "field", "says"),
    [
        ({"args.boxes": "two"}, "args.boxes", "whole number"),
        ({"args.boxes": "0"}, "args.boxes", "minimum"),
        ({"args.boxes": ""}, "args.boxes", "required"),
        ({"args.address": "{line: 1"}, "args.address", "not valid JSON"),
        ({"args.address": '{"line": "2 Low Rd"}'}, "args.address", "postcode"),
    ],
)
def test_a_value_the_form_or_the_schema_refuses_is_put_on_its_field(
    courier_run: Run, typed: dict[str, str], field: str, says: str
) -> None:
    form = _courier_form(courier_run, **typed)
    assert not form.is_valid()
    assert says in " ".join(form.errors[field]), form.errors
