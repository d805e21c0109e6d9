"""An agent killed between a call's send and its record, started again (issue 30): a plain
seam-client agent (tests/clients/resume_agent.py) in a child process, against a live Seam and the
sandbox, whose payments API keeps every effect by its Idempotency-Key. The sandbox's own tables
are the truth: its ledger (`Effect`, one row per effect) and its call log (`Call`, one row per
request it answered)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db.models import F
from django.test import override_settings
from seam_client import IntentInDoubt, SeamClient

from devtools.processes import ROOT, free_port
from journal.models import Escalation, Intent, IntentStatus, Run, RunStatus, Tenant
from sandbox.models import Call, Effect
from tests.support.in_flight import open_calls_past_in_flight
from tools import registry as tool_registry

pytestmark = pytest.mark.django_db(transaction=True)

KILLED = -9
DAY = "86400"


@dataclass
class Agent:
    """The agent's process, started (and restarted) on one ticket and order."""

    seam_url: str
    token: str
    sandbox_url: str
    tenant: Tenant
    ticket: str
    order: str

    def _environment(self, settings: dict[str, str]) -> dict[str, str]:
        return {
            **os.environ,
            "SEAM_URL": self.seam_url,
            "SEAM_TOKEN": self.token,
            "SANDBOX_URL": self.sandbox_url,
            "TICKET": self.ticket,
            "ORDER_ID": self.order,
            **settings,
        }

    def start(self, **settings: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.clients.resume_agent"],
            cwd=ROOT,
            env=self._environment(settings),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, **settings: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.clients.resume_agent"],
            cwd=ROOT,
            env=self._environment(settings),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def run_row(self) -> Run:
        return Run.objects.get(tenant=self.tenant, external_id=self.ticket)

    def intent(self, tool: str) -> Intent:
        return Intent.objects.get(run=self.run_row(), tool=tool)

    def effects(self, operation: str) -> list[Effect]:
        """The sandbox's own ledger: effects performed for this agent's order."""
        return list(Effect.objects.filter(operation=operation, business_ref=self.order))

    def refunds_sent(self) -> int:
        """The refund requests the payments API answered (each test has its own database)."""
        return Call.objects.filter(provider="payments", operation="refund").count()


@pytest.fixture
def agent(seam_server: str, agent_token: str, sandbox_server: str, tenant: Tenant) -> Agent:
    return Agent(
        seam_server,
        agent_token,
        sandbox_server,
        tenant,
        ticket=f"RA-{uuid.uuid4().hex[:10]}",
        order=f"SU-{uuid.uuid4().int % 10**8:08d}",
    )


def killed_after_the_refund_was_booked(agent: Agent, **settings: str) -> Intent:
    died = agent.run(DIE="after_send", **settings)
    assert died.returncode == KILLED, died.stderr
    refund = agent.intent("issue_refund")
    assert refund.status == IntentStatus.INTENDED  # sent, booked, never recorded
    assert len(agent.effects("refund")) == 1 and agent.refunds_sent() == 1
    return refund


def assert_completed_without_a_person(agent: Agent) -> None:
    run = agent.run_row()
    assert run.status == RunStatus.COMPLETED
    assert not Escalation.objects.filter(run=run).exists()
    assert len(agent.effects("credit")) == 1


def test_a_tool_that_honours_its_key_is_sent_again_under_it_and_the_run_completes(agent: Agent) -> None:
    refund = killed_after_the_refund_was_booked(agent, HONOURS_KEY=DAY)

    restarted = agent.run(HONOURS_KEY=DAY)

    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    # Sent twice under one key; the provider acted once and answered the repeat from its ledger.
    (effect,) = agent.effects("refund")
    assert agent.refunds_sent() == 2
    assert effect.idempotency_key == refund.idempotency_key
    settled = agent.intent("issue_refund")
    assert (settled.status, settled.idempotency_key) == (IntentStatus.PERFORMED, refund.idempotency_key)
    assert settled.receipt["refund_id"] == effect.receipt["refund_id"]
    assert_completed_without_a_person(agent)


def test_past_the_keys_lifetime_a_call_found_open_is_never_sent_again(agent: Agent) -> None:
    refund = killed_after_the_refund_was_booked(agent, HONOURS_KEY=DAY)
    # Restarted a day and an hour later: the provider may have forgotten the key.
    Intent.objects.filter(pk=refund.pk).update(intended_at=F("intended_at") - timedelta(hours=25))

    restarted = agent.run(HONOURS_KEY=DAY)

    assert restarted.returncode == 3, restarted.stdout + restarted.stderr
    assert "older than that" in restarted.stdout
    assert len(agent.effects("refund")) == 1 and agent.refunds_sent() == 1
    assert agent.intent("issue_refund").status == IntentStatus.INTENDED
    assert agent.effects("credit") == []


def test_a_call_not_declared_is_waited_for_with_progress_then_left_in_doubt(agent: Agent) -> None:
    refund = killed_after_the_refund_was_booked(agent)

    began = time.monotonic()
    restarted = agent.run(WAIT="2")
    waited = time.monotonic() - began

    assert restarted.returncode == 3, restarted.stdout + restarted.stderr
    assert (
        f"waiting for Seam to settle issue_refund (key {refund.idempotency_key}): 0 s of 2 s"
        in restarted.stderr
    )
    assert "within 2 s of waiting" in restarted.stdout
    assert waited >= 2
    assert len(agent.effects("refund")) == 1 and agent.refunds_sent() == 1
    assert agent.intent("issue_refund").status == IntentStatus.INTENDED


def reconcile(agent: Agent, *, sandbox_url: str) -> str:
    """One sweep of Seam's reconciliation, the sandbox's lookups pointed at `sandbox_url`, after
    the open calls have aged past the time a call may still be in flight."""
    open_calls_past_in_flight(run=agent.run_row())
    out = io.StringIO()
    with override_settings(SEAM_SANDBOX_URL=sandbox_url, SEAM_LOOKUP_MAX_ATTEMPTS=1):
        tool_registry.reset_registry()  # the connectors are built with the sandbox's address
        try:
            call_command("reconcile", older_than=0, stdout=out)
        finally:
            tool_registry.reset_registry()
    return out.getvalue()


def waiting(agent: Agent, **settings: str) -> subprocess.Popen[str]:
    """The agent started again, once it says on stderr that it waits for Seam."""
    process = agent.start(WAIT="60", **settings)
    assert process.stderr is not None
    line = process.stderr.readline()
    assert line.startswith("waiting for Seam to settle issue_refund"), line
    return process


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    out, _err = process.communicate(timeout=60)
    return process.returncode, out


def test_a_waiting_agent_goes_on_once_reconciliation_finds_the_effect(agent: Agent) -> None:
    killed_after_the_refund_was_booked(agent)
    process = waiting(agent)

    assert "1 performed" in reconcile(agent, sandbox_url=agent.sandbox_url)

    code, out = finished(process)
    assert code == 0, out
    assert len(agent.effects("refund")) == 1 and agent.refunds_sent() == 1  # never sent again
    assert agent.intent("issue_refund").status == IntentStatus.PERFORMED
    assert_completed_without_a_person(agent)


def test_a_call_reconciliation_proves_never_happened_is_not_sent_by_the_agent(agent: Agent) -> None:
    died = agent.run(DIE="before_send")
    assert died.returncode == KILLED
    process = waiting(agent)

    assert "1 not_performed" in reconcile(agent, sandbox_url=agent.sandbox_url)

    code, out = finished(process)
    assert code == 4, out
    assert "settled not_performed" in out
    assert agent.effects("refund") == [] and agent.refunds_sent() == 0
    assert agent.intent("issue_refund").status == IntentStatus.NOT_PERFORMED


def test_a_call_settled_unknown_while_the_agent_waits_is_a_persons(agent: Agent) -> None:
    killed_after_the_refund_was_booked(agent)
    process = waiting(agent)

    # The payments API cannot be asked (its address answers nothing): reconciliation cannot know.
    assert "1 unknown" in reconcile(agent, sandbox_url=f"http://127.0.0.1:{free_port()}")

    code, out = finished(process)
    assert code == 3, out
    assert "person decides: True" in out and "settled unknown" in out
    assert len(agent.effects("refund")) == 1 and agent.refunds_sent() == 1


def test_a_conflict_answered_to_a_call_sent_again_is_recorded_and_not_retried(agent: Agent) -> None:
    killed_after_the_refund_was_booked(agent, HONOURS_KEY=DAY)

    # Restarted with another currency configured: the same key now carries other parameters.
    restarted = agent.run(HONOURS_KEY=DAY, SEND_CURRENCY="EUR")

    assert restarted.returncode == 5, restarted.stdout + restarted.stderr
    (effect,) = agent.effects("refund")
    assert effect.request["currency"] == "USD"
    assert agent.refunds_sent() == 2  # the first call and one resend: never a third
    row = agent.intent("issue_refund")
    # Evidence on the open intent, for reconciliation's lookup: not an outcome.
    assert (row.status, row.error_class) == (IntentStatus.INTENDED, "ambiguous")
    assert (
        "refused as a conflict" in row.outcome_summary and "idempotency_key_mismatch" in row.outcome_summary
    )
    assert agent.effects("credit") == []


def test_the_runs_heartbeat_is_held_while_perform_waits(agent: Agent) -> None:
    """Reconciliation settles only the calls of a run gone quiet, so a run beating while its
    agent waits would never be settled: the run's heartbeat is held during the wait."""
    refund = killed_after_the_refund_was_booked(agent)
    with SeamClient(agent.seam_url, agent.token, wait_for_settle=1.5) as seam:
        run = seam.run(str(agent.run_row().pk))
        with run.heartbeat(every=0.2) as beating, pytest.raises(IntentInDoubt) as doubt:
            time.sleep(0.5)  # beats first
            beats_before_wait = beating.beats
            run.perform("issue_refund", refund.args, lambda args, key: None, turn=1)
    assert beats_before_wait >= 2
    assert doubt.value.waited >= 1.5
    assert beating.held >= 5 and beating.beats - beats_before_wait <= 2
    assert agent.refunds_sent() == 1
