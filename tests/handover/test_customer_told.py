"""The handover's "customer told": every message the customer received, whichever path sent it
(the agent's recorded messages, a customer-facing tool in the run or in a resumption, what a
person recorded), each saying its source; a message the run's state now contradicts (told
"credited", the credit since undone) is flagged with the step that undid it, in the API and on
the run page. Real sandbox, real PostgreSQL."""

from __future__ import annotations

import io
import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from agent_api.handover_schema import HandoverSerializer
from compensations.models import Compensation, CompensationStatus
from compensations.services import compensation_execute
from handover import handover_for, run_state_token
from journal import services
from journal.channels import CustomerChannel
from journal.models import AgentToken, CustomerMessage, IntentStatus, Run
from journal.services import Actor
from journal.tool_errors import DispatchResult
from sandbox.catalogue import catalogue_seed_defaults
from scenarios.policies import policies_seed_defaults
from tests.scenarios.test_kill_points import replay_in_child
from tests.support.plugins import declaring
from tools.registry import CustomerFacing, ToolSpec

pytestmark = pytest.mark.django_db(transaction=True)

RECONCILER = Actor.system("test-reconciler")
ANY_ARGS = {"type": "object"}


def tools() -> list[ToolSpec]:
    """An integrator's tools (declared by this module in one test: tests.support.plugins): a credit, and
    a credit note that declares it announces credits."""
    return [
        ToolSpec(name="grant_credit", kind="write", args_schema=ANY_ARGS),
        ToolSpec(
            name="send_credit_note",
            kind="write",
            args_schema=ANY_ARGS,
            customer_facing=CustomerFacing(
                channel=CustomerChannel.SMS, says="credit note {note}", announces=("grant_credit",)
            ),
        ),
    ]


def _agent(tenant: Any) -> APIClient:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="bot", digest=AgentToken.digest_of(secret))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def _reconciled(sandbox_url: str, ticket_id: str, kill_after: int) -> Run:
    """The ticket replayed in a child killed after `kill_after` writes, then decided by
    reconciliation under the demo's policies."""
    policies_seed_defaults()
    catalogue_seed_defaults()
    returncode, run = replay_in_child(ticket_id, sandbox_url, "--kill-after", str(kill_after))
    assert returncode == -9 and run is not None
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    call_command("reconcile", older_than=0, decide=True, stdout=io.StringIO())
    return Run.objects.select_related("tenant").get(pk=run.pk)


def _handover_and_page(run: Run, persona: Any, user: Any = None) -> tuple[dict[str, Any], str]:
    run = Run.objects.select_related("tenant").get(pk=run.pk)
    response = _agent(run.tenant).get(f"/api/v1/runs/{run.pk}/handover/")
    assert response.status_code == 200
    body = response.json()
    assert body == HandoverSerializer(handover_for(run)).data
    staff = Client()
    staff.force_login(user or persona("support_staff", run.tenant))
    return body, staff.get(f"/runs/{run.pk}/").content.decode()


def test_a_resumption_that_emailed_the_customer_lists_the_email_under_customer_told(
    sandbox_tools: str, persona: Any
) -> None:
    # T-41518 (expedited_fee_refund, policy "resume"): the refund went out, the runner died, and
    # reconciliation's resumption sent notify_customer.
    run = _reconciled(sandbox_tools, "T-41518", kill_after=1)
    email = run.intents.get(tool="notify_customer")
    assert email.status == IntentStatus.PERFORMED

    body, page = _handover_and_page(run, persona)

    assert "The customer has been told nothing." not in page
    assert "email" in [t["channel"] for t in body["customer_told"]]
    told = [t for t in body["customer_told"] if t["source"] == "tool"]
    assert [(t["tool"], t["step_id"], t["channel"]) for t in told] == [
        ("notify_customer", email.step_id, "email")
    ]
    assert told[0]["body"] == f"email fee_refunded ({email.receipt['message_id']})"
    assert told[0]["told_by"]
    assert told[0]["contradicted_by"] == []
    assert re.search(rf'data-source="tool" data-step="{re.escape(email.step_id)}"', page)
    assert "email fee_refunded" in page


def test_agent_and_staff_messages_are_listed_each_with_its_source(escalated_bench: Run, persona: Any) -> None:
    support = persona("support_staff", escalated_bench.tenant)
    staff = Client()
    staff.force_login(support)
    response = staff.post(
        reverse("handover:run_act", args=[escalated_bench.pk, "customer-told"]),
        {"state": run_state_token(escalated_bench), "channel": "phone", "body": "Called: refund follows."},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200

    body, page = _handover_and_page(escalated_bench, persona, support)

    assert [(t["source"], t["channel"], t["body"]) for t in body["customer_told"]] == [
        ("agent", "chat", "Return label sent."),
        ("staff", "phone", "Called: refund follows."),
    ]
    assert body["customer_told"][1]["told_by"] == support.username
    label = escalated_bench.intents.get(tool="start_return")
    assert body["customer_told"][0]["about_steps"] == [label.step_id]
    assert body["customer_told"][1]["about_steps"] == []
    assert 'data-source="agent"' in page and 'data-source="staff"' in page


def test_a_run_whose_credit_was_undone_flags_the_credited_message_with_the_undoing_step(
    sandbox_tools: str, persona: Any
) -> None:
    # T-41402 (damage_dispute, policy "compensate and escalate"): the credit went out and the
    # agent told the customer so; the runner died, and reconciliation undid the credit.
    run = _reconciled(sandbox_tools, "T-41402", kill_after=1)
    credit = run.intents.get(tool="issue_credit")
    for compensation in Compensation.objects.filter(original=credit, status=CompensationStatus.PENDING):
        compensation_execute(compensation=compensation, actor=RECONCILER)
    undo = Compensation.objects.select_related("intent").get(original=credit)
    assert undo.status == CompensationStatus.DONE and undo.intent is not None
    # A person's note names no step: it is never flagged (no link is guessed from its words).
    CustomerMessage.objects.create(
        run=run, channel="phone", body="Your credit is safe.", told_at=timezone.now()
    )

    body, page = _handover_and_page(run, persona)

    credited, note = body["customer_told"]
    assert credited["body"] == "We have credited your account for the damage."
    assert credited["contradicted_by"] == [
        {
            "code": "undone",
            "step_id": credit.step_id,
            "tool": "issue_credit",
            "undone_by": undo.intent.step_id,
            "why": "“Issue a credit” was undone by “Reverse the credit”",
        }
    ]
    assert note["contradicted_by"] == []
    assert re.search(
        rf'class="warn contradicted" data-code="undone" data-step="{re.escape(credit.step_id)}" '
        rf'data-undone-by="{re.escape(undo.intent.step_id)}">No longer true: “Issue a credit” was undone',
        page,
    )


def test_a_message_about_a_step_the_run_does_not_have_is_refused_and_nothing_is_written(
    escalated_bench: Run,
) -> None:
    before = escalated_bench.customer_messages.count()
    response = _agent(escalated_bench.tenant).post(
        f"/api/v1/runs/{escalated_bench.pk}/customer-messages/",
        {"channel": "chat", "body": "Refunded.", "about_steps": ["r:9:nope"]},
        format="json",
    )

    assert response.status_code == 400
    assert "about_steps" in response.content.decode()
    assert escalated_bench.customer_messages.count() == before


@declaring(__name__)
def test_a_customer_facing_tool_reports_the_earlier_steps_it_announces_and_is_flagged_when_one_is_undone(
    make_run: Any, agent_actor: Any
) -> None:
    run = make_run()

    def send(tool: str, receipt: dict[str, Any], n: int) -> Any:
        return services.perform(
            run=run,
            tool=tool,
            args={"n": n},
            dispatch=lambda args, key: DispatchResult(receipt=receipt),
            turn=n,
            actor=agent_actor,
        ).intent

    before = send("send_credit_note", {"note": "N-1"}, 1)  # sent before any credit: reports none
    credit = send("grant_credit", {"credit": "C-1"}, 2)
    after = send("send_credit_note", {"note": "N-2"}, 3)
    Compensation.objects.create(original=credit, status=CompensationStatus.DONE)

    told = {t.step_id: t for t in handover_for(run).customer_told}

    assert (told[before.step_id].body, told[before.step_id].channel) == ("credit note N-1", "sms")
    assert told[before.step_id].about_steps == []
    assert told[before.step_id].contradicted_by == []
    assert told[after.step_id].about_steps == [credit.step_id]
    [contradiction] = told[after.step_id].contradicted_by
    assert (contradiction.code, contradiction.step_id, contradiction.undone_by) == (
        "undone",
        credit.step_id,
        "",
    )
    assert credit.step_id not in told  # the credit itself is not customer-facing
