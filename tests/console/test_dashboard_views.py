"""The staff dashboard through its URLs: every run action and its confirmation, for a person who
may act and for each person who may not (no role, another tenant, nobody logged in); the queue
with its filters, counts and htmx partials; the audit trail and its CSV; the panel's polling;
and the number of queries the queue and run pages make, which must not grow with the runs or
steps they show. Tests that reach the sandbox subprocess are transactional; the rest use the
test transaction, which is faster."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import requests
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditAction, AuditEntry
from compensations.models import Compensation, CompensationStatus, DeadLetter
from compensations.tasks import compensate_step
from console import selectors
from handover import NextActionCode, handover_for, run_state_token, words
from journal import partitions, services
from journal.models import CustomerMessage, Escalation, IntentStatus, Run, RunStatus, Tenant
from journal.services import Actor
from reconciliation.decisions import run_decide
from scenarios.policies import policies_seed_defaults
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
RECONCILER = Actor.system("test-reconciler")
ACTIONS = [
    "assign",
    "compensate-step",
    "compensate-run",
    "resume",
    "retry-lookup",
    "mark-performed",
    "mark-not-performed",
    "customer-told",
    "resolve",
]


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _act(
    client: Client, run: Run, action: str, data: dict[str, Any], *, htmx: bool = True, request_id: str = ""
) -> Any:
    headers = {**(HTMX if htmx else {}), **({"X-Request-ID": request_id} if request_id else {})}
    return client.post(reverse("handover:run_act", args=[run.pk, action]), data, headers=headers)


def _confirm(client: Client, run: Run, action: str, step: str = "") -> Any:
    url = reverse("handover:run_confirm", args=[run.pk, action])
    return client.get(url, {"step": step} if step else {}, headers=HTMX)


def _step_of(run: Run, tool: str) -> str:
    return next(i.step_id for i in run.intents.all() if i.tool == tool)


def _only_entry(run: Run) -> AuditEntry:
    """The action's one audit row, beside the one that gave the run nobody had to the person
    acting (console.claiming)."""
    entries = list(AuditEntry.objects.filter(run=run).exclude(note=str(words.ASSIGNED_ON_ACTING)))
    assert len(entries) == 1, entries
    return entries[0]


def _full_form(run: Run, state: str = "") -> dict[str, Any]:
    """Every field any action reads, valid, so a refusal can only come from who is asking."""
    step = run.intents.order_by("id").first()
    return {
        "state": state or run_state_token(run),
        "step_id": step.step_id if step else "s1",
        "note": "checked the carrier portal",
        "channel": CustomerMessage.Channel.EMAIL,
        "body": "Your refund is on its way.",
    }


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[tuple[Any, ...], bool]]]:
    """The tasks the actions queue, recorded instead of sent to the broker (no worker is needed):
    task name → [(arguments, whether a transaction was still open when it was queued)]."""
    from compensations.tasks import compensate_run, compensate_step
    from reconciliation.tasks import reconcile_intent, resume_run

    calls: dict[str, list[tuple[tuple[Any, ...], bool]]] = defaultdict(list)
    for task in (compensate_step, compensate_run, reconcile_intent, resume_run):

        def record(*args: Any, _name: str = task.name) -> None:
            calls[_name].append((args, connection.in_atomic_block))

        monkeypatch.setattr(task, "delay", record)
    return calls


@pytest.fixture
def uncertain_refund(sandbox_tools: str) -> Run:
    """T-41518 escalated with its refund in doubt: accepted downstream, the runner killed before
    recording it, and the sandbox answering its lookup "unknown" (as test_handover_actions)."""
    from tests.support.stuck_runs import escalate_ticket, refund_key_refused

    faults = f"{sandbox_tools}/sandbox/api/faults/"
    rule = {"provider": "payments", "operation": "lookup", "fault": "unknown_lookup", "remaining": 10}
    requests.post(faults, json=rule, timeout=5).raise_for_status()
    try:
        run = escalate_ticket(
            sandbox_tools, "T-41518", "--kill-between-accept-and-record", "1", afterwards=refund_key_refused
        )
    finally:
        requests.delete(faults, timeout=5)
    assert [u.tool for u in handover_for(run).uncertain] == ["issue_refund"]
    return run


def _escalated(make_run: Callable[..., Run], **fields: Any) -> Run:
    return _escalate(make_run(**fields))


def _escalate(run: Run) -> Run:
    """The run escalated as reconciliation escalates a dead run (no sandbox needed: a task type
    without a policy, or a passed deadline, on a run nothing is left in doubt)."""
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    decision = run_decide(run=run, actor=RECONCILER, quiet_for=timedelta(0))
    assert decision.outcome == "escalated", decision
    return Run.objects.select_related("tenant").get(pk=run.pk)


def _stuck(make_run: Callable[..., Run], **fields: Any) -> Run:
    run = make_run(**fields)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=10))
    return Run.objects.select_related("tenant").get(pk=run.pk)


# --- each action, by a person who may act ------------------------------------------------------


def test_assign_from_the_run_page_makes_the_person_assignee_with_an_audited_request_id(
    escalated_bench: Run, persona: Any
) -> None:
    support = persona("support_staff", escalated_bench.tenant)
    response = _act(
        _client(support),
        escalated_bench,
        "assign",
        {"state": run_state_token(escalated_bench)},
        request_id="req-assign-1",
    )

    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="run-panel"') and "<html" not in body
    assert "The run is assigned to you." in body
    assert Run.objects.get(pk=escalated_bench.pk).assignee == support
    entry = _only_entry(escalated_bench)
    assert (entry.action, entry.username, entry.request_id) == (
        AuditAction.ASSIGN,
        support.username,
        "req-assign-1",
    )
    assert entry.new_state == {"assignee": support.username}


def test_compensate_step_posted_as_a_form_schedules_the_undo_after_commit_and_redirects(
    escalated_bench: Run, persona: Any, queued: Any
) -> None:
    support = persona("support_staff", escalated_bench.tenant)
    step = _step_of(escalated_bench, "start_return")
    response = _act(
        _client(support),
        escalated_bench,
        "compensate-step",
        {"state": run_state_token(escalated_bench), "step_id": step},
        htmx=False,
        request_id="req-undo-pickup",
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("handover:run_detail", args=[escalated_bench.pk])
    compensation = Compensation.objects.get(original__run=escalated_bench, original__step_id=step)
    assert compensation.status == "pending"
    # Queued once, for this compensation, and only once the transaction had committed.
    assert queued["compensations.compensate_step"] == [((compensation.pk,), False)]
    entry = _only_entry(escalated_bench)
    assert (entry.action, entry.username, entry.step_id, entry.request_id) == (
        AuditAction.COMPENSATE_STEP,
        support.username,
        step,
        "req-undo-pickup",
    )


def test_compensate_run_queues_the_undo_of_every_performed_step(
    escalated_bench: Run, persona: Any, queued: Any
) -> None:
    support = persona("support_staff", escalated_bench.tenant)
    response = _act(
        _client(support),
        escalated_bench,
        "compensate-run",
        {"state": run_state_token(escalated_bench)},
        request_id="req-undo-all",
    )

    assert response.status_code == 200
    assert "Compensation of the run requested" in response.content.decode()
    assert queued["compensations.compensate_run"] == [((str(escalated_bench.pk), support.pk), False)]
    entry = _only_entry(escalated_bench)
    assert (entry.action, entry.username, entry.request_id) == (
        AuditAction.COMPENSATE_RUN,
        support.username,
        "req-undo-all",
    )
    newest_first = [_step_of(escalated_bench, "offer_replacement"), _step_of(escalated_bench, "start_return")]
    assert sorted(entry.new_state["requested"]) == sorted(newest_first)


def test_resume_reopens_the_run_and_queues_the_resumption(
    escalated_bench: Run, persona: Any, queued: Any
) -> None:
    support = persona("support_staff", escalated_bench.tenant)
    response = _act(
        _client(support),
        escalated_bench,
        "resume",
        {"state": run_state_token(escalated_bench)},
        htmx=False,
        request_id="req-resume",
    )

    assert response.status_code == 302
    run = Run.objects.get(pk=escalated_bench.pk)
    assert (run.status, run.awaiting_person) == (RunStatus.RUNNING, False)
    assert not Escalation.objects.filter(run=run, resolved_at__isnull=True).exists()
    assert queued["reconciliation.resume_run"] == [((str(run.pk), support.pk), False)]
    entry = _only_entry(run)
    assert (entry.action, entry.username, entry.request_id) == (
        AuditAction.RESUME,
        support.username,
        "req-resume",
    )
    assert [(s["tool"], s["action"]) for s in entry.new_state["steps"]][2:] == [
        ("issue_refund", "send"),
        ("notify_seller", "send"),
    ]


def test_customer_told_is_recorded_on_the_run(escalated_bench: Run, persona: Any) -> None:
    support = persona("support_staff", escalated_bench.tenant)
    response = _act(
        _client(support),
        escalated_bench,
        "customer-told",
        {"state": run_state_token(escalated_bench), "channel": "email", "body": "Refund of $14.95 sent."},
        request_id="req-told",
    )

    assert response.status_code == 200
    assert "Refund of $14.95 sent." in response.content.decode()
    assert list(escalated_bench.customer_messages.order_by("id").values_list("channel", "body")) == [
        ("chat", "Return label sent."),
        ("email", "Refund of $14.95 sent."),
    ]
    entry = _only_entry(escalated_bench)
    assert (entry.action, entry.username, entry.request_id) == (
        AuditAction.CUSTOMER_TOLD,
        support.username,
        "req-told",
    )


def test_resolve_without_a_note_writes_nothing_and_with_one_closes_the_escalation(
    escalated_bench: Run, persona: Any
) -> None:
    support = persona("support_staff", escalated_bench.tenant)
    client = _client(support)
    state = run_state_token(escalated_bench)

    refused = _act(client, escalated_bench, "resolve", {"state": state, "note": "  "})
    assert refused.status_code == 400
    assert "note" in refused.content.decode()
    assert not AuditEntry.objects.exists()
    assert Escalation.objects.filter(run=escalated_bench, resolved_at__isnull=True).count() == 1

    done = _act(
        client,
        escalated_bench,
        "resolve",
        {"state": state, "note": "refunded by hand"},
        htmx=False,
        request_id="req-resolve",
    )
    assert done.status_code == 302
    run = Run.objects.get(pk=escalated_bench.pk)
    assert not run.awaiting_person
    assert not Escalation.objects.filter(run=run, resolved_at__isnull=True).exists()
    entry = _only_entry(run)
    assert (entry.action, entry.username, entry.note, entry.request_id) == (
        AuditAction.RESOLVE,
        support.username,
        "refunded by hand",
        "req-resolve",
    )


def test_retry_lookup_reopens_the_uncertain_step_and_queues_its_lookup(
    uncertain_refund: Run, persona: Any, queued: Any
) -> None:
    support = persona("support_staff", uncertain_refund.tenant)
    client = _client(support)
    step = _step_of(uncertain_refund, "issue_refund")

    confirm = _confirm(client, uncertain_refund, "retry-lookup", step)
    assert confirm.status_code == 200
    intent = uncertain_refund.intents.get(step_id=step)
    # Plain words (issue 19): the step, never its full key.
    assert "the downstream is asked whether “Refund the buyer” happened" in confirm.content.decode()
    assert (
        intent.idempotency_key not in confirm.content.decode().split('class="effects"')[1].split("</ul>")[0]
    )

    response = _act(
        client,
        uncertain_refund,
        "retry-lookup",
        {"state": run_state_token(uncertain_refund), "step_id": step},
        request_id="req-lookup",
    )

    assert response.status_code == 200
    intent.refresh_from_db()
    assert intent.status == IntentStatus.INTENDED
    assert queued["reconciliation.reconcile_intent"] == [((intent.pk,), False)]
    entry = _only_entry(uncertain_refund)
    assert (entry.action, entry.username, entry.step_id, entry.request_id) == (
        AuditAction.RETRY_LOOKUP,
        support.username,
        step,
        "req-lookup",
    )


@pytest.mark.parametrize(
    ("action", "status", "audit_action"),
    [
        ("mark-performed", IntentStatus.PERFORMED, AuditAction.MARK_PERFORMED),
        ("mark-not-performed", IntentStatus.NOT_PERFORMED, AuditAction.MARK_NOT_PERFORMED),
    ],
)
def test_marking_the_uncertain_step_needs_a_note_and_records_the_judgement(
    uncertain_refund: Run, persona: Any, action: str, status: str, audit_action: str
) -> None:
    support = persona("support_staff", uncertain_refund.tenant)
    client = _client(support)
    step = _step_of(uncertain_refund, "issue_refund")
    state = run_state_token(uncertain_refund)

    confirm = _confirm(client, uncertain_refund, action, step)
    assert confirm.status_code == 200
    assert 'name="note" required' in confirm.content.decode()

    refused = _act(client, uncertain_refund, action, {"state": state, "step_id": step, "note": ""})
    assert refused.status_code == 400
    assert "note is required" in refused.content.decode()
    assert uncertain_refund.intents.get(step_id=step).status == IntentStatus.UNKNOWN
    assert not AuditEntry.objects.exists()

    response = _act(
        client,
        uncertain_refund,
        action,
        {"state": state, "step_id": step, "note": "payments portal shows R-1"},
        htmx=False,
        request_id="req-mark",
    )
    assert response.status_code == 302
    intent = uncertain_refund.intents.get(step_id=step)
    assert intent.status == status
    assert (intent.verdict["code"], intent.verdict["note"]) == (
        "marked_by_person",
        "payments portal shows R-1",
    )
    entry = _only_entry(uncertain_refund)
    assert (entry.action, entry.username, entry.note, entry.request_id) == (
        audit_action,
        support.username,
        "payments portal shows R-1",
        "req-mark",
    )


# --- each action, by a person who may not --------------------------------------------------


@pytest.fixture
def quiet_run(make_run: Callable[..., Run], agent_actor: Actor) -> Run:
    """An escalated run with one performed step and one open escalation (no sandbox needed)."""
    run = make_run(task_type="warranty", ticket_id="T-50001")
    recorded = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=agent_actor
    )
    services.outcome_record(intent=recorded.intent, ok=True, receipt={"label": "RL-1"}, actor=agent_actor)
    return _escalate(run)


def _nothing_written(run: Run) -> None:
    assert not AuditEntry.objects.exists()
    assert not Compensation.objects.exists()
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.version, fresh.assignee_id, fresh.status) == (run.version, None, run.status)
    assert run.customer_messages.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize("action", ACTIONS)
def test_a_user_without_a_role_is_refused_every_action_and_nothing_is_written(
    quiet_run: Run, action: str
) -> None:
    nobody = factories.StaffUserFactory(username="no-role", membership__tenant=quiet_run.tenant)
    response = _act(_client(nobody), quiet_run, action, _full_form(quiet_run))
    assert response.status_code == 403
    _nothing_written(quiet_run)


@pytest.mark.django_db
@pytest.mark.parametrize("action", ACTIONS)
def test_a_person_of_another_tenant_finds_no_such_run(
    quiet_run: Run, persona: Any, other_tenant: Tenant, action: str
) -> None:
    outsider = persona("support_staff", other_tenant)
    response = _act(_client(outsider), quiet_run, action, _full_form(quiet_run))
    assert response.status_code == 404
    _nothing_written(quiet_run)


@pytest.mark.django_db
@pytest.mark.parametrize("action", ACTIONS)
def test_an_anonymous_visitor_is_sent_to_log_in(quiet_run: Run, action: str) -> None:
    response = _act(Client(), quiet_run, action, _full_form(quiet_run))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    _nothing_written(quiet_run)


@pytest.mark.django_db
@pytest.mark.parametrize("action", ACTIONS)
def test_an_action_without_the_state_the_page_showed_is_refused_naming_state(
    quiet_run: Run, persona: Any, action: str
) -> None:
    support = persona("support_staff", quiet_run.tenant)
    form = _full_form(quiet_run)
    del form["state"]
    response = _act(_client(support), quiet_run, action, form)
    assert response.status_code == 400
    assert "state is required" in response.content.decode()
    assert response["HX-Retarget"] == "#dialog"
    _nothing_written(quiet_run)


@pytest.mark.django_db
def test_a_stale_page_gets_409_with_what_changed_in_the_dialog_and_nothing_applied(
    quiet_run: Run, persona: Any
) -> None:
    first = persona("support_staff", quiet_run.tenant, "first")
    second = persona("support_staff", quiet_run.tenant, "second")
    seen = run_state_token(quiet_run)
    assert _act(_client(first), quiet_run, "assign", {"state": seen}).status_code == 200

    stale = _act(_client(second), quiet_run, "resolve", {"state": seen, "note": "done"})

    assert stale.status_code == 409
    assert stale["HX-Retarget"] == "#dialog"
    body = stale.content.decode()
    assert "This run changed" in body and "first assigned the run" in body
    assert 'hx-swap-oob="true"' in body  # the refreshed panel comes with the refusal
    assert Run.objects.get(pk=quiet_run.pk).awaiting_person
    assert list(AuditEntry.objects.values_list("action", flat=True)) == [AuditAction.ASSIGN]

    # Without htmx the whole page is drawn again, with the refusal on top.
    plain = _act(_client(second), quiet_run, "assign", {"state": seen}, htmx=False)
    assert plain.status_code == 409
    assert "This run changed — nothing was applied." in plain.content.decode()
    assert Run.objects.get(pk=quiet_run.pk).assignee == first


# --- confirmations -----------------------------------------------------------------------------


def test_each_confirmation_says_exactly_what_will_happen(escalated_bench: Run, persona: Any) -> None:
    client = _client(persona("support_staff", escalated_bench.tenant))
    pickup = escalated_bench.intents.get(tool="start_return")

    undo = _confirm(client, escalated_bench, "compensate-step", pickup.step_id)
    assert undo.status_code == 200
    body = undo.content.decode()
    # The sentence by labels; the undo's arguments and the step's id behind "Details".
    assert "send “Cancel the pickup” to undo “Start the return”" in body
    details = body[body.index("<summary>Details</summary>") :]
    assert f"arguments: label={pickup.receipt['label']}" in details
    assert f"step id: {pickup.step_id}" in details
    assert f"label={pickup.receipt['label']}" not in body[: body.index("<summary>Details</summary>")]
    assert pickup.receipt["label"].startswith("RL-")
    assert "until collection" in body
    assert f'name="step_id" value="{pickup.step_id}"' in body
    assert f'name="state" value="{run_state_token(escalated_bench)}"' in body

    undo_all = _confirm(client, escalated_bench, "compensate-run").content.decode()
    assert "send “Cancel the pickup” to undo “Start the return”" in undo_all
    assert "send “Release the reservation” to undo “Reserve a replacement”" in undo_all
    assert undo_all.index("Release the reservation") < undo_all.index("Cancel the pickup")  # newest first
    assert "arguments: label=RL-" in undo_all[undo_all.index("<summary>Details</summary>") :]

    resume = _confirm(client, escalated_bench, "resume").content.decode()
    details = resume.index("<summary>Details</summary>")
    for step in actions_resume_steps(escalated_bench):
        assert step["key"] in resume[details:] and step["key"][:16] not in resume[:details]
    assert "skip “Start the return”" in resume and "send “Refund the buyer”" in resume

    assert (
        "you become the run&#x27;s assignee" in _confirm(client, escalated_bench, "assign").content.decode()
    )
    told = _confirm(client, escalated_bench, "customer-told").content.decode()
    assert 'name="body"' in told and 'name="channel"' in told
    resolve = _confirm(client, escalated_bench, "resolve").content.decode()
    assert "the escalation is closed and the run leaves the queue" in resolve
    assert "not done: “Refund the buyer”" in resolve and 'name="note" required' in resolve


def actions_resume_steps(run: Run) -> list[dict[str, Any]]:
    from console.actions import resume_preview

    return resume_preview(run).steps


@pytest.mark.django_db
@pytest.mark.parametrize("action", ACTIONS)
def test_a_user_without_a_role_gets_no_confirmation(quiet_run: Run, action: str) -> None:
    nobody = factories.StaffUserFactory(username="no-role", membership__tenant=quiet_run.tenant)
    response = _confirm(_client(nobody), quiet_run, action, _full_form(quiet_run)["step_id"])
    assert response.status_code == 403


@override_settings(SEAM_HIGH_VALUE_AMOUNT=10)
def test_confirmations_flag_irreversible_and_high_value_effects(
    sandbox_tools: str, make_run: Callable[..., Run], persona: Any
) -> None:
    from tools.services import tool_perform

    policies_seed_defaults()
    from sandbox.catalogue import catalogue_seed_defaults

    catalogue_seed_defaults()
    run = make_run()
    email = tool_perform(
        run=run,
        tool="notify_seller",
        args={"order_id": "SU-90317", "template": "return_started"},
        turn=1,
        actor=RECONCILER,
    ).intent
    refund = tool_perform(
        run=run,
        tool="issue_refund",
        args={"order_id": "SU-90317", "amount": "14.95", "currency": "USD"},
        turn=2,
        actor=RECONCILER,
    ).intent
    client = _client(persona("support_staff", run.tenant))

    irreversible = _confirm(client, run, "compensate-step", email.step_id).content.decode()
    assert "irreversible: “Email the seller”" in irreversible
    assert "nothing undoes “Email the seller”" in irreversible

    high = _confirm(client, run, "compensate-step", refund.step_id).content.decode()
    assert "high value: 14.95 USD" in high

    undo_all = _confirm(client, run, "compensate-run").content.decode()
    assert "irreversible: “Email the seller”" in undo_all and "high value: 14.95 USD" in undo_all


@override_settings(SEAM_HIGH_VALUE_AMOUNT=10)
def test_resuming_a_refund_above_the_threshold_says_high_value(escalated_bench: Run, persona: Any) -> None:
    client = _client(persona("support_staff", escalated_bench.tenant))
    resume = _confirm(client, escalated_bench, "resume").content.decode()
    assert "high value: “Refund the buyer” 14.95" in resume
    with override_settings(SEAM_HIGH_VALUE_AMOUNT=1000):
        assert "high value" not in _confirm(client, escalated_bench, "resume").content.decode()


# --- the queue ---------------------------------------------------------------------------------


@pytest.fixture
def queue_runs(make_run: Callable[..., Run]) -> dict[str, Run]:
    """Runs of every kind: escalated by policy, by a passed deadline, stuck, completed, and
    another tenant's escalated run."""
    policies_seed_defaults()
    past = timezone.now() - timedelta(hours=1)
    runs = {
        "policy": _escalated(make_run, task_type="warranty", ticket_id="T-1", order_id="SU-1"),
        "policy2": _escalated(make_run, task_type="warranty", ticket_id="T-2", order_id="SU-2"),
        "deadline": _escalated(make_run, ticket_id="T-3", order_id="SU-3", deadline=past),
        "stuck": _stuck(make_run, ticket_id="T-4", order_id="SU-4"),
        "completed": make_run(ticket_id="T-5", order_id="SU-5"),
        "foreign": _escalated(
            make_run, task_type="warranty", ticket_id="T-6", tenant=factories.TenantFactory(slug="acme")
        ),
    }
    services.run_complete(run=runs["completed"], actor=RECONCILER)
    assert runs["deadline"].outcome_reason == "deadline_passed"
    return runs


def _tickets(response: Any) -> list[str]:

    return re.findall(r'data-ticket="([^"]*)"', response.content.decode())


@pytest.mark.django_db
def test_the_queue_shows_escalated_and_stuck_runs_only_with_counts_per_reason(
    queue_runs: dict[str, Run], persona: Any
) -> None:
    support = persona("support_staff", queue_runs["policy"].tenant)
    response = _client(support).get(reverse("handover:queue"))

    assert response.status_code == 200
    assert sorted(_tickets(response)) == ["T-1", "T-2", "T-3", "T-4"]
    body = response.content.decode()
    assert "<strong>2</strong> Policy says a person decides" in body
    assert "<strong>1</strong> Deadline passed" in body
    assert "<strong>1</strong> Stuck: the agent went quiet" in body
    assert {reason: n for reason, _label, n in response.context["counts"]} == {
        "deadline_passed": 1,
        "policy": 2,
        "run_stuck": 1,
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "tickets"),
    [
        ({"task_type": "warranty"}, ["T-1", "T-2"]),
        ({"reason": "deadline_passed"}, ["T-3"]),
        ({"reason": "run_stuck"}, ["T-4"]),
        ({"status": "running"}, ["T-4"]),
        ({"status": "escalated"}, ["T-1", "T-2", "T-3"]),
        ({"assignee": "none"}, ["T-1", "T-2", "T-3", "T-4"]),
        ({"assignee": "me"}, []),
        ({"q": "T-2"}, ["T-2"]),
        ({"q": "SU-3"}, ["T-3"]),
        # A search reaches every run of the tenant, ended ones too, never another tenant's.
        ({"q": "T-5"}, ["T-5"]),
        ({"q": "T-6"}, []),
    ],
)
def test_queue_filters(
    queue_runs: dict[str, Run], persona: Any, query: dict[str, str], tickets: list[str]
) -> None:
    support = persona("support_staff", queue_runs["policy"].tenant)
    response = _client(support).get(reverse("handover:queue"), query)
    assert sorted(_tickets(response)) == tickets


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "told"),
    [
        # The whole queue's length is the sum of its counts per reason, not counted again...
        ({}, "Page 1 of 1 · 4 runs"),
        ({"sort": "oldest"}, "Page 1 of 1 · 4 runs"),
        # ...a narrowed view's is counted.
        ({"task_type": "warranty"}, "Page 1 of 1 · 2 runs"),
        ({"reason": "run_stuck"}, "Page 1 of 1 · 1 run"),
        ({"q": "T-5"}, "Page 1 of 1 · 1 run"),
    ],
)
def test_the_queue_pager_tells_how_many_runs_the_view_holds(
    queue_runs: dict[str, Run], persona: Any, query: dict[str, str], told: str
) -> None:
    support = persona("support_staff", queue_runs["policy"].tenant)
    body = _client(support).get(reverse("handover:queue"), query).content.decode()
    assert told in " ".join(body.split())


@pytest.mark.django_db
def test_the_task_type_filter_offers_the_task_types_of_the_queue_and_the_one_chosen(
    queue_runs: dict[str, Run], persona: Any
) -> None:
    support = persona("support_staff", queue_runs["policy"].tenant)
    Run.objects.filter(pk=queue_runs["completed"].pk).update(task_type="ended_only")
    waiting = {queue_runs[name].task_type for name in ("policy", "policy2", "deadline", "stuck")}

    assert _client(support).get(reverse("handover:queue")).context["task_types"] == sorted(waiting)
    chosen = _client(support).get(reverse("handover:queue"), {"task_type": "ended_only"})
    assert chosen.context["task_types"] == sorted({*waiting, "ended_only"})


@pytest.mark.django_db
def test_the_queue_refreshed_by_htmx_is_only_its_results_and_assign_to_me_returns_them(
    queue_runs: dict[str, Run], persona: Any
) -> None:
    support = persona("support_staff", queue_runs["policy"].tenant)
    client = _client(support)

    refreshed = client.get(reverse("handover:queue"), {"task_type": "warranty"}, headers=HTMX)
    body = refreshed.content.decode()
    assert body.lstrip().startswith('<div id="queue-results"') and "<html" not in body
    assert 'id="queue-filters"' not in body
    assert sorted(_tickets(refreshed)) == ["T-1", "T-2"]

    run = queue_runs["policy"]
    assigned = _act(
        client,
        run,
        "assign",
        {"state": run_state_token(run), "from": "queue", "task_type": "warranty"},
        request_id="req-queue",
    )
    assert assigned.status_code == 200
    body = assigned.content.decode()
    assert body.lstrip().startswith('<div id="queue-results"')
    assert sorted(_tickets(assigned)) == ["T-1", "T-2"]  # the queue's filters were kept
    row = body.split('data-ticket="T-1"', 1)[1].split("</tr>", 1)[0]
    assert f'data-label="Assignee">{support.username}</td>' in row
    assert "Assign to me" not in row
    assert _only_entry(run).request_id == "req-queue"

    mine = client.get(reverse("handover:queue"), {"assignee": "me"})
    assert _tickets(mine) == ["T-1"]


@pytest.mark.django_db
def test_the_queue_makes_the_same_number_of_queries_for_1_and_30_runs(
    make_run: Callable[..., Run], persona: Any
) -> None:
    first = _escalated(make_run, task_type="warranty", ticket_id="T-0")
    client = _client(persona("support_staff", first.tenant))
    client.get(reverse("handover:queue"))  # warm the session and permission caches

    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("handover:queue")).status_code == 200
    for n in range(1, 30):
        if n % 3:
            _escalated(make_run, task_type="warranty", ticket_id=f"T-{n}")
        else:
            _stuck(make_run, ticket_id=f"T-{n}")
    with CaptureQueriesContext(connection) as thirty:
        response = client.get(reverse("handover:queue"))
    assert len(_tickets(response)) == 30

    # Measured: 9 queries for 1 run and for 30 (session, user, membership, two of permissions,
    # the oldest and newest queued run (the months the journal's subqueries read),
    # the counts per reason and task type, whose sum is the page's count, the page's rows, the
    # colleagues for the bulk form).
    assert len(thirty) == len(one), [q["sql"] for q in thirty.captured_queries]
    assert len(one) <= 9, [q["sql"] for q in one.captured_queries]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("sort", "index"), [("deadline", "run_queue_deadline_idx"), ("oldest", "run_queue_oldest_idx")]
)
def test_the_queue_reads_its_rows_in_order_from_its_own_partial_index(
    queue_runs: dict[str, Run], persona: Any, sort: str, index: str
) -> None:
    """At volume the queue's first page must be read in the page's order from an index holding
    only the queue's rows, and its counts from that index alone (bench/pages.py shows the plans
    at 1,000,000 runs). A test database is too small for the planner to choose them, so scans of
    the table and sorts are priced out: what is checked is that the queries can use them."""
    tenant = queue_runs["policy"].tenant
    user, now = persona("support_staff", tenant), timezone.now()
    rows = selectors.queue_runs(tenant=tenant, user=user, filters=selectors.QueueFilters(sort=sort), now=now)
    with CaptureQueriesContext(connection) as counting:
        counts = selectors.queue_counts(tenant=tenant, user_id=user.pk, now=now)
    with connection.cursor() as cursor:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
        plan = rows[:50].explain()
        assert f"Index Scan using {index}" in plan, plan
        cursor.execute("EXPLAIN " + counting.captured_queries[0]["sql"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
        # At volume, an index-only scan of run_queue_deadline_idx (it carries the columns read);
        # here the planner may take the smaller of the two, which holds the same rows.
        assert re.search(r"Index (Only )?Scan using run_queue_(deadline|oldest)_idx", plan), plan
    assert counts.total == 4 and counts.task_types == sorted({r.task_type for r in rows})


def _move_to_month(run: Run, created: datetime) -> None:
    """The run as if created at `created`: its rows move to that month's partitions with it
    (past the journal's append-only triggers, as a restore would)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("UPDATE journal_run SET created_at = %s WHERE id = %s", [created, run.pk])
        for table in ("journal_intent", "journal_journalevent"):
            cursor.execute(f"UPDATE {table} SET run_created_at = %s WHERE run_id = %s", [created, run.pk])  # noqa: S608
        cursor.execute("SET LOCAL session_replication_role = origin")


def _planned_months(sql: str) -> set[str]:
    """The months of the journal's partitions PostgreSQL plans for `sql`."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return set(re.findall(r"journal_(?:intent|journalevent)_(\d{4}_\d{2}|default)", plan))


@pytest.mark.django_db
def test_a_queue_page_plans_the_months_of_its_own_runs_not_every_month_the_queue_spans(
    make_run: Callable[..., Run], persona: Any
) -> None:
    """The page's badges are read by the page's ids, with the page's months as constants: with
    a year of months kept, planning every month for each row's subqueries cost more than the
    query (bench/flatness.py)."""
    earlier = timezone.now() - timedelta(days=62)
    partitions.create_months(ahead=0, now=earlier)
    try:
        old = _escalated(make_run, ticket_id="T-OLD")
        new = _escalated(make_run, ticket_id="T-NEW")
        _move_to_month(old, earlier)
        user, now = persona("support_staff", old.tenant), timezone.now()
        runs = selectors.queue_runs(
            tenant=old.tenant, user=user, filters=selectors.QueueFilters(sort="oldest"), now=now
        )
        months = {}
        for ticket, page in (("T-OLD", runs[:1]), ("T-NEW", runs[1:2])):
            with CaptureQueriesContext(connection) as read:
                shown: Any
                (shown,) = selectors.queue_rows(page)
            assert shown.ticket_id == ticket
            # The page's rows, then their badges: the second names the journal's tables.
            assert len(read) == 2, [q["sql"] for q in read.captured_queries]
            months[ticket] = _planned_months(read.captured_queries[1]["sql"])
            # What the badges say is the run's own: its newest event, its reason.
            run = Run.objects.get(ticket_id=ticket)
            assert shown.last_event_id == run.events.order_by("-id").values_list("id", flat=True)[0]
            assert (shown.queue_reason, shown.status_now, shown.has_unknown) == (
                run.outcome_reason,
                RunStatus.ESCALATED,
                False,
            )
    finally:
        partitions.forget_months()
    assert months == {"T-OLD": {f"{earlier:%Y_%m}"}, "T-NEW": {f"{now:%Y_%m}"}}, months
    assert new.ticket_id == "T-NEW"


@pytest.mark.django_db
def test_the_run_page_makes_the_same_number_of_queries_for_2_and_20_steps(
    make_run: Callable[..., Run], persona: Any, agent_actor: Actor
) -> None:
    def run_with(steps: int, ticket: str) -> Run:
        run = make_run(ticket_id=ticket)
        for n in range(steps):
            intent = services.intent_record(
                run=run, tool="start_return", args={"order_id": f"SU-{n}"}, turn=n + 1, actor=agent_actor
            ).intent
            services.outcome_record(
                intent=intent, ok=True, receipt={"label": f"RL-{n}", "status": "booked"}, actor=agent_actor
            )
        services.customer_message_record(run=run, channel="chat", body=f"{steps} done", actor=agent_actor)
        return run

    small, large = run_with(2, "T-small"), run_with(20, "T-large")
    client = _client(persona("support_staff", small.tenant))
    client.get(reverse("handover:run_detail", args=[small.pk]))  # warm the caches

    counts = {}
    for run in (small, large):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(reverse("handover:run_detail", args=[run.pk]))
        assert response.status_code == 200
        assert response.content.decode().count('data-step="') == len(run.intents.all())
        counts[run.ticket_id] = len(queries)

    # Measured: 14 queries for 2 steps and for 20 (the steps read once as scalars, then whole).
    assert counts["T-small"] == counts["T-large"], counts
    assert counts["T-small"] <= 15


# --- the panel's polling -----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_panel_answers_204_while_nothing_changed_and_the_new_panel_after_a_change(
    quiet_run: Run, persona: Any, agent_actor: Actor
) -> None:
    client = _client(persona("support_staff", quiet_run.tenant))
    page = client.get(reverse("handover:run_detail", args=[quiet_run.pk]))
    state = page.context["state"]
    panel = reverse("handover:run_panel", args=[quiet_run.pk])

    idle = client.get(panel, {"state": state}, headers=HTMX)
    assert idle.status_code == 204 and idle.content == b""

    services.customer_message_record(
        run=quiet_run, channel="chat", body="We are looking into it.", actor=agent_actor
    )
    changed = client.get(panel, {"state": state}, headers=HTMX)
    assert changed.status_code == 200
    body = changed.content.decode()
    assert body.lstrip().startswith('<div id="run-panel"')
    assert "We are looking into it." in body
    assert f'data-state="{state}"' not in body
    assert client.get(panel, {"state": run_state_token(quiet_run)}, headers=HTMX).status_code == 204


# --- the audit trail ---------------------------------------------------------------------------


@pytest.fixture
def audited(quiet_run: Run, make_run: Callable[..., Run], persona: Any) -> dict[str, Any]:
    """Three actions by two people on two runs, through the views."""
    tenant = quiet_run.tenant
    support = persona("support_staff", tenant)
    lead = persona("team_lead", tenant)
    other = _escalated(make_run, task_type="warranty", ticket_id="T-50002")
    # The lead's own run: acting on it assigns nothing more (console.claiming).
    Run.objects.filter(pk=other.pk).update(assignee=lead)
    _act(_client(support), quiet_run, "assign", {"state": run_state_token(quiet_run)}, request_id="r-1")
    _act(
        _client(lead),
        other,
        "customer-told",
        {"state": run_state_token(other), "channel": "chat", "body": "On it."},
        request_id="r-2",
    )
    other.refresh_from_db()
    _act(_client(lead), other, "resolve", {"state": run_state_token(other), "note": "done"}, request_id="r-3")
    assert AuditEntry.objects.count() == 3
    return {"support": support, "lead": lead, "runs": (quiet_run, other)}


def _audit_rows(response: Any) -> list[str]:

    return re.findall(r'<tr class="audit-([a-z_]+)">', response.content.decode())


@pytest.mark.django_db
def test_the_audit_trail_is_for_team_leads_and_admins_with_working_filters(
    audited: dict[str, Any], persona: Any
) -> None:
    lead, support = audited["lead"], audited["support"]
    quiet, _other = audited["runs"]
    url = reverse("handover:audit")
    client = _client(lead)
    today = timezone.localdate()

    assert _audit_rows(client.get(url)) == ["resolve", "customer_told", "assign"]
    assert _audit_rows(client.get(url, {"person": support.username})) == ["assign"]
    assert _audit_rows(client.get(url, {"run": "T-50002"})) == ["resolve", "customer_told"]
    assert _audit_rows(client.get(url, {"run": str(quiet.pk)})) == ["assign"]
    assert _audit_rows(client.get(url, {"action": "customer_told"})) == ["customer_told"]
    assert _audit_rows(client.get(url, {"since": today.isoformat(), "until": today.isoformat()})) == [
        "resolve",
        "customer_told",
        "assign",
    ]
    assert _audit_rows(client.get(url, {"since": (today + timedelta(days=1)).isoformat()})) == []
    assert _audit_rows(client.get(url, {"until": (today - timedelta(days=1)).isoformat()})) == []
    partial = client.get(url, {"person": lead.username}, headers=HTMX).content.decode()
    assert partial.lstrip().startswith('<div id="entries"')

    assert _client(support).get(url).status_code == 403
    admin = persona("admin", quiet.tenant)
    assert _audit_rows(_client(admin).get(url)) == ["resolve", "customer_told", "assign"]
    outsider = persona("team_lead", factories.TenantFactory(slug="acme"))
    assert _audit_rows(_client(outsider).get(url)) == []


def _csv_rows(response: Any) -> list[list[str]]:
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.django_db
def test_the_audit_csv_has_a_header_and_one_row_per_entry(audited: dict[str, Any], persona: Any) -> None:
    lead, support = audited["lead"], audited["support"]
    url = reverse("handover:audit_csv")

    response = _client(lead).get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    rows = _csv_rows(response)
    assert rows[0][:5] == ["seq", "at", "username", "action", "run"]
    assert [(r[2], r[3], r[5], r[10]) for r in rows[1:]] == [
        (lead.username, "resolve", "T-50002", "r-3"),
        (lead.username, "customer_told", "T-50002", "r-2"),
        (support.username, "assign", "T-50001", "r-1"),
    ]
    assign = rows[3]
    assert (json.loads(assign[7]), json.loads(assign[8])) == (
        {"assignee": None},
        {"assignee": support.username},
    )  # JSON, as a spreadsheet or a script reads it back
    only = _csv_rows(_client(lead).get(url, {"action": "assign"}))
    assert len(only) == 2

    assert _client(support).get(url).status_code == 403
    assert _client(persona("admin", audited["runs"][0].tenant)).get(url).status_code == 200


# --- an undo that cannot be built (issue 18, failure 5) ----------------------------------------


def test_an_undo_that_cannot_be_built_is_not_offered_and_requested_anyway_ends_as_a_dead_letter(
    uncertain_refund: Run, persona: Any, queued: dict[str, list[tuple[tuple[Any, ...], bool]]]
) -> None:
    run = uncertain_refund
    lead = persona("team_lead", run.tenant)
    client = _client(lead)
    step_id = _step_of(run, "issue_refund")
    # A person says the refund happened: the step has no receipt, so reverse_refund has no refund_id.
    marked = _act(
        client,
        run,
        "mark-performed",
        {"state": run_state_token(run), "step_id": step_id, "note": "payments portal shows the refund"},
    )
    assert marked.status_code == 200, marked.content.decode()
    assert run.intents.get(step_id=step_id).receipt == {}

    page = client.get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert "Undo “Refund the buyer”" not in page
    assert "undo not offered" in page and "refund_id" in page
    dialog = _confirm(client, run, "compensate-step", step_id).content.decode()
    assert "Not possible now" in dialog and "refund_id" in dialog
    assert 'type="submit"' not in dialog

    # Requested anyway (a page drawn before, the API): the request is taken, the worker ends it.
    run = Run.objects.select_related("tenant").get(pk=run.pk)
    requested = _act(client, run, "compensate-step", {"state": run_state_token(run), "step_id": step_id})
    assert requested.status_code == 200, requested.content.decode()
    ((args, _in_transaction),) = queued["compensations.compensate_step"]
    result = compensate_step.apply(args=args)  # as the worker runs it

    assert result.successful(), result.traceback
    assert result.get() == CompensationStatus.DEAD_LETTERED
    compensation = Compensation.objects.get(original__run=run, original__step_id=step_id)
    assert compensation.status == CompensationStatus.DEAD_LETTERED
    assert compensation.attempts == 0  # nothing was sent
    letter = DeadLetter.objects.select_related("owner").get(compensation=compensation)
    assert letter.owner is not None and letter.resolved_at is None
    assert "refund_id" in letter.error and letter.error_class == "invalid_input"
    # The run is in front of a person, with the dead letter as the next thing to do.
    run = Run.objects.select_related("tenant").get(pk=run.pk)
    assert run.awaiting_person and run.outcome_reason == "compensation_failed"
    handover = handover_for(run)
    assert handover.next_action.code == NextActionCode.FINISH_FAILED_UNDO
    (step,) = [c for c in handover.completed if c.step_id == step_id]
    assert step.undo_failed and not step.undo_pending
    # A redelivered message changes nothing.
    assert compensate_step.apply(args=args).get() == CompensationStatus.DEAD_LETTERED
    assert DeadLetter.objects.filter(compensation=compensation).count() == 1
