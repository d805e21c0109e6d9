"""Edit before resume, end to end on the sandbox: T-40912 escalated before its refund; a person
corrects the refund's amount on the run page and resumes, and the sandbox's own ledger shows the
refund made once, with the edited amount, under the key derived from it, and nothing under the
old key. Two people saving the same edit at once make one edit."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from django.test import Client
from django.urls import reverse

from audit.models import AuditAction, AuditEntry
from console import actions, step_edits
from console.actions import StaffContext
from handover import run_state_token
from journal.models import IntentStatus, JournalEvent, Run, RunStatus
from journal.selectors import plan_with_keys
from journal.services import Actor, Conflict
from reconciliation.decisions import run_resume

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
NEW_REFUND = {"order_id": "SU-90317", "amount": "9.95", "currency": "USD"}


def _refund_key(run: Run) -> str:
    return next(s["key"] for s in plan_with_keys(Run.objects.get(pk=run.pk)) if s["tool"] == "issue_refund")


def test_a_run_resumed_after_an_edit_sends_the_edited_arguments_once(
    escalated_bench: Run, persona: Any, ledger: Any
) -> None:
    run = escalated_bench
    support = persona("support_staff", run.tenant)
    client = Client()
    client.force_login(support)
    old_key = _refund_key(run)
    data = {
        "state": run_state_token(Run.objects.get(pk=run.pk)),
        "step_id": old_key,
        **{f"args.{name}": value for name, value in NEW_REFUND.items()},
    }
    shown = client.post(reverse("handover:run_preview", args=[run.pk, "edit-step"]), data, headers=HTMX)
    assert shown.status_code == 200 and "→ 9.95" in shown.content.decode()
    data["previewed"] = step_edits.args_digest(NEW_REFUND)
    saved = client.post(reverse("handover:run_act", args=[run.pk, "edit-step"]), data, headers=HTMX)
    assert saved.status_code == 200
    new_key = _refund_key(run)
    assert new_key != old_key

    preview = actions.run_resume_request(
        StaffContext(user=support, tenant=run.tenant),
        run_id=run.pk,
        state=run_state_token(Run.objects.get(pk=run.pk)),
    )
    assert [(s["tool"], s["key"], s["args"]) for s in preview.steps if s["tool"] == "issue_refund"] == [
        ("issue_refund", new_key, NEW_REFUND)
    ]
    resumed = Run.objects.select_related("tenant").get(pk=run.pk)
    run_resume(run=resumed, actor=Actor.user(support))  # what the queued task does
    run_resume(run=resumed, actor=Actor.user(support))  # a second delivery of the task changes nothing

    resumed.refresh_from_db()
    assert resumed.status == RunStatus.COMPLETED
    refunds = ledger.filter(provider="payments", operation="refund")
    [refund] = refunds
    assert refund.idempotency_key == new_key
    assert refund.request["amount"] == "9.95"
    assert not ledger.filter(idempotency_key=old_key).exists()
    intent = resumed.intents.get(tool="issue_refund")
    assert (intent.idempotency_key, intent.args, intent.status) == (
        new_key,
        NEW_REFUND,
        IntentStatus.PERFORMED,
    )


def test_two_people_saving_the_same_edit_at_once_make_one_edit(escalated_bench: Run, persona: Any) -> None:
    run = escalated_bench
    people = [persona("support_staff", run.tenant, f"p{i}") for i in range(2)]
    seen, key = run_state_token(Run.objects.get(pk=run.pk)), _refund_key(run)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def save(user: Any) -> None:
        try:
            barrier.wait()
            actions.step_args_edit_request(
                StaffContext(user=user, tenant=run.tenant),
                run_id=run.pk,
                step_key=key,
                args=NEW_REFUND,
                state=seen,
            )
            outcomes.append("done")
        except Conflict as exc:
            outcomes.append(type(exc).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=save, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    assert sorted(outcomes) == ["RunChanged", "done"]
    assert JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.STEP_ARGS_EDITED).count() == 1
    assert AuditEntry.objects.filter(run=run, action=AuditAction.EDIT_STEP).count() == 1
