"""console.notifications: a new escalation emails the addresses and posts to the webhook of its
tenant's rules for its task type, with a link to the run page, once, after the escalation
commits; a failing webhook is retried on its own and then reported."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core import mail
from django.db import connection, transaction
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from compensations.services import _dead_letter, compensation_request
from console import tasks
from console.models import NotificationRule
from console.notifications import escalation_notify
from console.roles import roles_grant
from console.tasks import escalation_notify_schedule
from handover.why_words import run_why_words
from journal import services as journal
from journal.models import Escalation, OutcomeReason, Run, RunStatus, Tenant
from journal.why import RunWhy, Why
from reconciliation import decisions
from sandbox.catalogue import catalogue_seed_defaults
from tests import factories

SYSTEM = journal.Actor.system("test-sweeper")
BASE_URL = "https://seam.example.com"


# --- a webhook receiver -------------------------------------------------------------------------


@dataclass
class Receiver:
    """A real HTTP server on 127.0.0.1 that records every POST and answers with the next status
    of `statuses` (200 once they run out, or `always` if set)."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    always: int | None = None

    def answer(self) -> int:
        if self.always is not None:
            return self.always
        return self.statuses.pop(0) if self.statuses else 200


@pytest.fixture
def local_webhooks_allowed(settings: Any) -> None:
    """Let webhooks go to plain http on 127.0.0.1, where this file's receivers listen: the
    operator's allow-list (console.outbound), which refuses loopback to everyone else."""
    settings.SEAM_WEBHOOK_ALLOW_HTTP = True
    settings.SEAM_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]


@pytest.fixture
def webhook(local_webhooks_allowed: None) -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            receiver.requests.append(
                {
                    "path": self.path,
                    "content_type": self.headers["Content-Type"],
                    "json": json.loads(body),
                }
            )
            self.send_response(receiver.answer())
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/escalations"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# --- helpers ------------------------------------------------------------------------------------


def _escalate(
    run: Run, reason: str = OutcomeReason.RUN_DIED_MID_SEQUENCE, why: Why | None = None
) -> Escalation:
    """Escalate the run the way reconciliation's decision does."""
    decision = decisions._end(
        run=run,
        status=RunStatus.ESCALATED,
        reason=reason,
        why=why or Why(RunWhy.ENTERED_PHASE, {"phase": "refund", "tools": ["issue_refund"]}),
        actor=SYSTEM,
    )
    assert decision.outcome == RunStatus.ESCALATED
    return Escalation.objects.get(run=run)


def _rule(tenant: Tenant, **fields: Any) -> NotificationRule:
    return NotificationRule.objects.create(tenant=tenant, **fields)


def _run_link(run: Run) -> str:
    return BASE_URL + reverse("handover:run_detail", args=[run.pk])


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every notification queued to the broker, with what the world looked like at that moment."""
    calls: list[dict[str, Any]] = []

    def delay(escalation_id: int) -> None:
        calls.append(
            {
                "escalation_id": escalation_id,
                "in_transaction": connection.in_atomic_block,
                "escalation_visible": Escalation.objects.filter(pk=escalation_id).exists(),
            }
        )

    monkeypatch.setattr(tasks, "notify_escalation", SimpleNamespace(delay=delay))
    return calls


# --- what is sent -------------------------------------------------------------------------------


@pytest.mark.django_db
@override_settings(SEAM_BASE_URL=BASE_URL + "/")
def test_an_escalation_emails_the_rules_addresses_with_a_link_to_the_run(
    make_run: Any, tenant: Tenant
) -> None:
    run = make_run(ticket_id="T-40912", order_id="SU-90317", task_type="returns")
    rule = _rule(tenant, task_type="returns", emails="lead@sundry.example, ops@sundry.example ,")
    escalation = _escalate(
        run,
        why=Why(
            RunWhy.RESUME_FAILED,
            {"tool": "issue_refund", "error_class": "permanent", "message": "card expired"},
        ),
    )

    report = escalation_notify(escalation.pk)

    assert report.sent == [f"email:{rule.pk}"]
    assert not report.failed and not report.refused
    [email] = mail.outbox
    assert email.to == ["lead@sundry.example", "ops@sundry.example"]
    assert email.from_email == settings.DEFAULT_FROM_EMAIL
    assert email.subject == "[Seam] T-40912 escalated: run_died_mid_sequence"
    for expected in (
        "T-40912",
        "SU-90317",
        "returns",
        "run_died_mid_sequence",
        "resuming “Issue refund” failed (permanent): card expired",
        _run_link(run),
    ):
        assert expected in email.body


@pytest.mark.django_db
@override_settings(SEAM_BASE_URL=BASE_URL)
def test_the_webhook_receives_the_escalation_as_json(
    make_run: Any, tenant: Tenant, webhook: Receiver
) -> None:
    run = make_run(ticket_id="T-40912", order_id="SU-90317", task_type="returns")
    rule = _rule(tenant, task_type="returns", webhook_url=webhook.url)
    escalation = _escalate(
        run, reason=OutcomeReason.POLICY, why=Why(RunWhy.NO_POLICY, {"task_type": "returns"})
    )

    report = escalation_notify(escalation.pk)

    assert report.sent == [f"webhook:{rule.pk}"]
    assert mail.outbox == []
    [request] = webhook.requests
    assert request["path"] == "/hooks/escalations"
    assert request["content_type"] == "application/json"
    payload = request["json"]
    assert payload == {
        "text": payload["text"],
        "run_url": _run_link(run),
        "ticket_id": "T-40912",
        "order_id": "SU-90317",
        "task_type": "returns",
        "reason": "policy",
        "detail": run_why_words({"code": "no_policy", "task_type": "returns"}),
        "why": {"code": "no_policy", "task_type": "returns"},
        "escalation_id": escalation.pk,
    }
    assert "T-40912" in payload["text"] and _run_link(run) in payload["text"]


@pytest.mark.django_db
def test_rules_of_another_task_type_another_tenant_or_inactive_send_nothing(
    make_run: Any, tenant: Tenant, other_tenant: Tenant, webhook: Receiver
) -> None:
    run = make_run(task_type="returns")
    _rule(tenant, task_type="expedited_fee_refund", emails="fees@sundry.example", webhook_url=webhook.url)
    _rule(other_tenant, task_type="returns", emails="ops@acme.example", webhook_url=webhook.url)
    _rule(other_tenant, task_type="", emails="all@acme.example", webhook_url=webhook.url)
    _rule(tenant, task_type="returns", emails="off@sundry.example", webhook_url=webhook.url, active=False)
    escalation = _escalate(run)

    report = escalation_notify(escalation.pk)

    assert (report.sent, report.failed, report.refused) == ([], {}, {})
    assert mail.outbox == []
    assert webhook.requests == []


@pytest.mark.django_db
def test_a_rule_for_every_task_type_hears_of_each_and_an_address_is_told_once(
    make_run: Any, tenant: Tenant
) -> None:
    run = make_run(task_type="returns")
    everything = _rule(tenant, task_type="", emails="lead@sundry.example")
    returns = _rule(
        tenant,
        task_type="returns",
        emails="Lead@sundry.example, returns@sundry.example returns@sundry.example",
    )

    report = escalation_notify(_escalate(run).pk)

    assert report.sent == [f"email:{everything.pk}", f"email:{returns.pk}"]
    assert [m.to for m in mail.outbox] == [["lead@sundry.example"], ["returns@sundry.example"]]


# --- failures and retries -----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_webhook_answering_500_is_retried_then_reported(
    make_run: Any, tenant: Tenant, webhook: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.always = 500
    run = make_run(task_type="returns")
    rule = _rule(tenant, task_type="returns", emails="lead@sundry.example", webhook_url=webhook.url)
    escalation = _escalate(run)

    result = tasks.notify_escalation.apply(args=[escalation.pk]).get()

    assert len(webhook.requests) == 1 + tasks.NOTIFY_MAX_RETRIES
    # The email went out on the first attempt and rode along as done; it is not sent again.
    assert len(mail.outbox) == 1
    assert result["failed"] == {f"webhook:{rule.pk}": "HTTP 500"}
    assert result["already_done"] == [f"email:{rule.pk}"]
    assert f"gave up notifying webhook:{rule.pk}" in caplog.text


@pytest.mark.django_db
def test_a_retry_sends_only_the_channel_that_failed(make_run: Any, tenant: Tenant, webhook: Receiver) -> None:
    webhook.statuses = [503, 200]
    run = make_run(task_type="returns")
    hook = _rule(tenant, task_type="returns", webhook_url=webhook.url)
    email = _rule(tenant, task_type="", emails="lead@sundry.example")
    escalation = _escalate(run)

    result = tasks.notify_escalation.apply(args=[escalation.pk]).get()

    assert len(webhook.requests) == 2
    assert len(mail.outbox) == 1
    assert result["sent"] == [f"webhook:{hook.pk}"]
    assert sorted(result["already_done"]) == sorted([f"email:{email.pk}"])
    assert result["failed"] == {}


@pytest.mark.django_db
def test_a_webhook_refusing_with_4xx_is_reported_without_retrying(
    make_run: Any, tenant: Tenant, webhook: Receiver
) -> None:
    webhook.always = 404
    run = make_run(task_type="returns")
    rule = _rule(tenant, task_type="returns", webhook_url=webhook.url)

    result = tasks.notify_escalation.apply(args=[_escalate(run).pk]).get()

    assert len(webhook.requests) == 1
    assert result["refused"] == {f"webhook:{rule.pk}": "HTTP 404"}


@pytest.mark.django_db
@override_settings(SEAM_WEBHOOK_TIMEOUT_SECONDS=1)
def test_an_unreachable_webhook_counts_as_failed_without_naming_its_url(
    make_run: Any, tenant: Tenant, local_webhooks_allowed: None
) -> None:
    run = make_run(task_type="returns")
    # Port 9 (discard) on localhost: nothing listens, the connection is refused.
    rule = _rule(tenant, task_type="returns", webhook_url="http://127.0.0.1:9/secret-token")

    report = escalation_notify(_escalate(run).pk)

    assert report.failed == {f"webhook:{rule.pk}": "ConnectionError"}


# --- scheduling ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_notification_is_queued_only_once_the_escalation_commits(
    make_run: Any, queued: list[dict[str, Any]], django_capture_on_commit_callbacks: Any
) -> None:
    run = make_run(task_type="returns")

    with django_capture_on_commit_callbacks() as callbacks:
        escalation = _escalate(run)
    assert queued == []  # nothing left for the broker before the commit
    assert len(callbacks) == 1

    callbacks[0]()
    assert [q["escalation_id"] for q in queued] == [escalation.pk]


@pytest.mark.django_db
def test_a_rolled_back_escalation_queues_nothing(
    make_run: Any, queued: list[dict[str, Any]], django_capture_on_commit_callbacks: Any
) -> None:
    run = make_run(task_type="returns")

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        escalation_notify_schedule(
            Escalation.objects.create(run=run, reason="policy", created_at=timezone.now())
        )
        raise RuntimeError("the decision failed after the row was written")

    assert callbacks == []
    assert queued == []


@pytest.mark.django_db(transaction=True)
def test_escalating_a_dead_run_through_reconciliation_notifies_once_after_commit(
    make_run: Any, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run(task_type="mystery", plan=[])
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    _rule(tenant, task_type="mystery", emails="lead@sundry.example")
    queued: list[dict[str, Any]] = []
    real_task = tasks.notify_escalation

    def delay(escalation_id: int) -> None:
        queued.append(
            {
                "in_transaction": connection.in_atomic_block,
                "escalation_visible": Escalation.objects.filter(pk=escalation_id).exists(),
            }
        )
        real_task.apply(args=[escalation_id])  # what the worker would do

    monkeypatch.setattr(tasks, "notify_escalation", SimpleNamespace(delay=delay))

    decision = decisions.run_decide(run=run, actor=SYSTEM)
    again = decisions.run_decide(run=run, actor=SYSTEM, quiet_for=timedelta(0))

    assert (decision.outcome, decision.reason) == ("escalated", "policy")
    assert again.outcome == "skipped"
    escalation = Escalation.objects.get(run=run)
    assert queued == [{"in_transaction": False, "escalation_visible": True}]
    [email] = mail.outbox
    assert email.subject == f"[Seam] {run.ticket_id} escalated: policy"
    assert run_why_words(escalation.why) in email.body


@pytest.mark.django_db(transaction=True)
def test_a_dead_lettered_compensation_notifies_of_its_escalation(
    make_run: Any, agent_actor: journal.Actor, queued: list[dict[str, Any]]
) -> None:
    catalogue_seed_defaults()
    run = make_run(task_type="returns")
    intent = journal.intent_record(
        run=run, tool="issue_refund", args={"amount": "14.95"}, turn=1, actor=agent_actor
    ).intent
    performed = journal.outcome_record(
        intent=intent, ok=True, receipt={"refund_id": "rf_1"}, actor=agent_actor
    ).intent
    compensation = compensation_request(original=performed, actor=SYSTEM)

    _dead_letter(
        compensation=compensation, error_class="permanent", error="refund already settled", actor=SYSTEM
    )

    escalation = Escalation.objects.get(run=run, reason=OutcomeReason.COMPENSATION_FAILED)
    assert queued == [{"escalation_id": escalation.pk, "in_transaction": False, "escalation_visible": True}]


# --- who edits the rules ------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(("role", "status"), [("admin", 200), ("team_lead", 403), ("support_staff", 403)])
def test_only_admins_edit_notification_rules(tenant: Tenant, role: str, status: int) -> None:
    roles_grant()
    user = factories.StaffUserFactory(username=f"{role}-user", membership__tenant=tenant, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)

    response = client.get(reverse("admin:handover_notificationrule_changelist"))

    assert response.status_code == status
