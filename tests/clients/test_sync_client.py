"""seam_client.SeamClient against a live Seam (a gunicorn process on the test database): each
path of the REST contract, and the retry rules when the network loses a request or its answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from seam_client import (
    ErrorClass,
    IntentInDoubt,
    Outcome,
    Run,
    SeamClient,
    SeamRefused,
    SeamUnavailable,
    ToolError,
)

from devtools.processes import free_port
from journal.models import AgentToken, CustomerMessage, Intent, IntentStatus, JournalEvent, RunStatus, Tenant
from journal.models import Run as RunRow
from tests.factories import BENCH_PLAN, VERSIONS

from .transports import BreakingTransport, Breaks, posts_to

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}


@pytest.fixture
def run(seam: SeamClient) -> Run:
    return seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN, ticket_id="T-40912")


@pytest.fixture
def breaking(seam_server: str, agent_token: str) -> Iterator[tuple[SeamClient, Breaks]]:
    """A client whose transport breaks what `plan` says; the test sets plan.when and plan.how."""
    plan = Breaks(when=lambda request: False)
    with SeamClient(
        seam_server, agent_token, retries=3, backoff=0.01, transport=BreakingTransport(plan)
    ) as c:
        yield c, plan


class Tool:
    """A downstream call that counts its calls and the keys it was sent."""

    def __init__(self, receipt: dict[str, Any] | None = None, fails: ToolError | None = None) -> None:
        self.keys: list[str] = []
        self.statuses_seen: list[str] = []
        self.receipt = receipt or {"refund_id": "re_1"}
        self.fails = fails

    def __call__(self, args: dict[str, Any], key: str) -> Outcome:
        self.keys.append(key)
        self.statuses_seen.append(Intent.objects.get(idempotency_key=key).status)
        if self.fails:
            raise self.fails
        return Outcome(summary="refunded 14.95", receipt=self.receipt, request_id="req-1")


def test_start_run_opens_a_run_and_the_same_external_id_finds_it(seam: SeamClient) -> None:
    first = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN, external_id="ext-1")
    again = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN, external_id="ext-1")

    assert (first.created, again.created) == (True, False)
    assert first.id == again.id
    row = RunRow.objects.get()
    assert (str(row.pk), row.status, row.plan[0]["tool"]) == (first.id, RunStatus.RUNNING, "start_return")
    assert seam.run(first.id).fetch()["ticket_id"] == ""


def test_a_create_whose_answer_was_lost_opens_one_run(breaking: tuple[SeamClient, Breaks]) -> None:
    client, plan = breaking
    plan.when = posts_to("/runs/")

    run = client.start_run(task_type="returns", versions=VERSIONS, ticket_id="T-1")  # no external id given

    assert plan.broken == ["POST /api/v1/runs/"] and len(plan.forwarded) == 2
    assert RunRow.objects.count() == 1
    assert str(RunRow.objects.get().pk) == run.id and run.created is False


def test_the_same_intent_is_the_same_row_and_another_in_its_step_is_refused(run: Run) -> None:
    first = run.record_intent("issue_refund", REFUND, turn=3)
    same = run.record_intent("issue_refund", REFUND, turn=3)

    assert (first.replayed, same.replayed) == (False, True)
    assert (same.step_id, same.idempotency_key, same.status) == (
        first.step_id,
        first.idempotency_key,
        "intended",
    )
    with pytest.raises(SeamRefused) as refused:
        run.record_intent("issue_refund", {**REFUND, "amount": "99.00"}, turn=3)
    assert refused.value.status == 409 and refused.value.error_class is ErrorClass.CONFLICT
    assert Intent.objects.filter(run_id=run.id).count() == 1
    assert Intent.objects.get().args["amount"] == "14.95"


def test_perform_commits_the_intent_before_the_call_and_replays_a_settled_one(run: Run) -> None:
    tool = Tool()

    done = run.perform("issue_refund", REFUND, tool, turn=3)
    again = run.perform("issue_refund", REFUND, tool, turn=3)

    assert tool.statuses_seen == ["intended"]  # committed, and visible to others, before the call
    assert (done.status, done.replayed, done.receipt) == ("performed", False, {"refund_id": "re_1"})
    assert (again.status, again.replayed, again.step_id) == ("performed", True, done.step_id)
    assert tool.keys == [done.idempotency_key]
    row = Intent.objects.get()
    assert (row.status, row.receipt, row.request_id) == (
        IntentStatus.PERFORMED,
        {"refund_id": "re_1"},
        "req-1",
    )


def test_the_frameworks_call_id_is_recorded_and_kept_out_of_the_receipt_handed_back(
    seam: SeamClient, run: Run
) -> None:
    done = run.perform("issue_refund", REFUND, Tool(), turn=3, call_id="call_7Qx")
    with pytest.raises(ToolError):
        run.perform(
            "notify_seller", {"t": 1}, Tool(fails=ToolError("conflict", "stale")), turn=4, call_id="c2"
        )
    replayed = seam.run(run.id).perform("issue_refund", REFUND, Tool(), turn=3, call_id="call_new")

    performed, failed = Intent.objects.order_by("turn")
    assert performed.receipt == {"refund_id": "re_1", "_call_id": "call_7Qx"}
    assert failed.receipt == {"_call_id": "c2"}
    assert (done.receipt, done.call_id) == ({"refund_id": "re_1"}, "call_7Qx")
    assert (replayed.replayed, replayed.receipt, replayed.call_id) == (
        True,
        {"refund_id": "re_1"},
        "call_7Qx",
    )


def test_an_outcome_whose_evidence_predates_the_intent_is_already_so(run: Run) -> None:
    def cancel_subscription(args: dict[str, Any], key: str) -> Outcome:
        # The provider answers "cancelled" for a subscription the customer cancelled last week.
        return Outcome(summary="already cancelled", evidence_at=timezone.now() - timedelta(days=7))

    done = run.perform("cancel_subscription", {"subscription": "SUB-7"}, cancel_subscription, turn=1)

    row = Intent.objects.get()
    assert (done.status, row.status) == ("already_so", IntentStatus.ALREADY_SO)


def test_an_open_intent_is_in_doubt_and_never_sent(run: Run) -> None:
    run.record_intent("issue_refund", REFUND, turn=3)  # a runtime that died after this
    tool = Tool()

    with pytest.raises(IntentInDoubt) as doubt:
        run.perform("issue_refund", REFUND, tool, turn=3)

    assert tool.keys == [] and doubt.value.own_retry is False
    assert doubt.value.intent.status == "intended"
    assert Intent.objects.get().status == IntentStatus.INTENDED


def test_a_tool_error_is_recorded_with_its_class_and_an_ambiguous_one_stays_open(run: Run) -> None:
    with pytest.raises(ToolError):
        run.perform(
            "issue_refund", REFUND, Tool(fails=ToolError("conflict", "stale", request_id="r-9")), turn=3
        )
    with pytest.raises(ToolError):
        run.perform("notify_seller", {"t": 1}, Tool(fails=ToolError(ErrorClass.AMBIGUOUS, "timeout")), turn=4)

    failed, open_one = Intent.objects.order_by("turn")
    assert (failed.status, failed.error_class, failed.request_id, failed.outcome_summary) == (
        IntentStatus.FAILED,
        "conflict",
        "r-9",
        "stale",
    )
    # Evidence, not an outcome: the row stays open with the tool's error for whoever settles it.
    assert (open_one.status, open_one.error_class, open_one.outcome_summary) == (
        IntentStatus.INTENDED,
        "ambiguous",
        "timeout",
    )


def test_an_unclassified_exception_is_kept_as_evidence_and_shown_to_the_person(run: Run) -> None:
    def acted_then_failed(args: dict[str, Any], key: str) -> Outcome:
        raise RuntimeError("502 Bad Gateway from the refund provider")

    with pytest.raises(RuntimeError):
        run.perform("issue_refund", REFUND, acted_then_failed, turn=3)

    row = Intent.objects.get()
    assert (row.status, row.error_class, row.outcome_summary) == (
        IntentStatus.INTENDED,
        "ambiguous",
        "RuntimeError: 502 Bad Gateway from the refund provider",
    )
    assert JournalEvent.objects.filter(intent=row, kind=JournalEvent.Kind.DISPATCH_AMBIGUOUS).count() == 1
    run.cancel("the agent stopped")  # nobody is running it now: its open call is the person's
    (uncertain,) = run.handover().uncertain
    assert "502 Bad Gateway from the refund provider" in uncertain["why"]


def test_an_intent_answer_lost_after_the_commit_never_becomes_a_call(
    breaking: tuple[SeamClient, Breaks],
) -> None:
    client, plan = breaking
    run = client.start_run(task_type="returns", versions=VERSIONS)
    plan.when = posts_to("/intents/")
    tool = Tool()

    with pytest.raises(IntentInDoubt) as doubt:
        run.perform("issue_refund", REFUND, tool, turn=3)

    assert len(plan.broken) == 1  # the server committed the intent; its answer was lost
    assert doubt.value.own_retry is True  # the retry found the row, which may be its own
    assert tool.keys == []
    assert Intent.objects.get().status == IntentStatus.INTENDED  # left for reconciliation


def test_an_outcome_answer_lost_after_the_commit_is_retried_and_the_call_made_once(
    breaking: tuple[SeamClient, Breaks],
) -> None:
    client, plan = breaking
    run = client.start_run(task_type="returns", versions=VERSIONS)
    plan.when = posts_to("/outcome/")
    tool = Tool()

    done = run.perform("issue_refund", REFUND, tool, turn=3)
    again = run.perform("issue_refund", REFUND, tool, turn=3)

    assert len(plan.broken) == 1 and done.status == "performed" and again.replayed
    assert len(tool.keys) == 1
    row = Intent.objects.get()
    assert row.status == IntentStatus.PERFORMED
    assert JournalEvent.objects.filter(kind=JournalEvent.Kind.OUTCOME_RECORDED, intent=row).count() == 1


def test_bad_gateways_and_unavailability_are_retried(breaking: tuple[SeamClient, Breaks]) -> None:
    client, plan = breaking
    run = client.start_run(task_type="returns", versions=VERSIONS)
    plan.when, plan.how, plan.times, plan.status = posts_to("/intents/"), "refused", 2, 502

    intent = run.record_intent("issue_refund", REFUND, turn=3)

    assert len(plan.broken) == 2 and intent.replayed is False  # the third attempt reached Seam
    assert Intent.objects.get().step_id == intent.step_id


def test_a_gateway_timeout_after_the_commit_retries_an_outcome_but_not_a_counter(
    breaking: tuple[SeamClient, Breaks],
) -> None:
    client, plan = breaking
    run = client.start_run(task_type="returns", versions=VERSIONS)
    intent = run.record_intent("issue_refund", REFUND, turn=3)
    plan.when, plan.how, plan.status = posts_to("/outcome/"), "after", 504

    settled = run.record_outcome(intent.step_id, ok=True, receipt={"refund_id": "re_1"})

    assert plan.broken and settled.status == "performed"  # the repeat of the same outcome: 200
    plan.broken.clear()
    plan.when = posts_to("/counters/")
    with pytest.raises(SeamUnavailable) as lost:
        run.count("retry")
    assert lost.value.maybe_applied is True and lost.value.status == 504
    assert RunRow.objects.get(pk=run.id).retries == 1  # counted once, not again


def test_a_customer_message_whose_answer_was_lost_is_not_sent_again(
    breaking: tuple[SeamClient, Breaks],
) -> None:
    client, plan = breaking
    run = client.start_run(task_type="returns", versions=VERSIONS)
    plan.when = posts_to("/customer-messages/")

    with pytest.raises(SeamUnavailable) as lost:
        run.tell_customer("email", "Your refund of $14.95 is on its way.")

    assert lost.value.maybe_applied is True
    assert CustomerMessage.objects.count() == 1  # recorded once, not twice
    # A 503 that never reached Seam is sent again: recorded once.
    plan.broken.clear()
    plan.how, plan.status = "refused", 503
    run.tell_customer("chat", "Anything else?")
    assert list(CustomerMessage.objects.order_by("id").values_list("channel", flat=True)) == ["email", "chat"]


def test_customer_messages_name_the_steps_they_report_and_a_bad_one_is_refused(run: Run) -> None:
    refund = run.perform("issue_refund", REFUND, Tool(), turn=3)
    told_at = timezone.now() - timedelta(minutes=1)

    message = run.tell_customer("email", "Refunded $14.95.", about_steps=[refund.step_id], told_at=told_at)
    with pytest.raises(SeamRefused) as refused:
        run.tell_customer("email", "Also refunded.", about_steps=["not-a-step"])

    assert message["about_steps"] == [refund.step_id]
    assert refused.value.status == 400 and "about_steps" in refused.value.fields
    row = CustomerMessage.objects.get()
    assert (row.body, row.about_steps, row.told_at) == ("Refunded $14.95.", [refund.step_id], told_at)


def test_the_background_heartbeat_is_seen_by_the_server_and_stops_with_its_block(run: Run) -> None:
    long_ago = timezone.now() - timedelta(hours=1)
    RunRow.objects.filter(pk=run.id).update(last_heartbeat_at=long_ago)

    with run.heartbeat(every=0.2) as beating:
        deadline = time.monotonic() + 10
        while beating.beats < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen_during = RunRow.objects.get(pk=run.id).last_heartbeat_at

    assert beating.beats >= 3 and beating.failures == 0
    assert seen_during > long_ago + timedelta(minutes=59)
    after_block = RunRow.objects.get(pk=run.id).last_heartbeat_at
    time.sleep(0.5)
    assert RunRow.objects.get(pk=run.id).last_heartbeat_at == after_block  # the thread stopped


def test_counters_complete_and_cancel(seam: SeamClient, run: Run) -> None:
    run.count("retry")
    run.count("retry")
    counted = run.count("reflection")
    with pytest.raises(ValueError, match="kind"):
        run.count("retries")
    assert (counted["retries"], counted["reflections"], counted["repairs"]) == (2, 1, 0)

    run.record_intent("issue_refund", REFUND, turn=3)
    with pytest.raises(SeamRefused) as refused:
        run.complete()
    assert refused.value.status == 409 and "intents" in refused.value.fields
    step = Intent.objects.get().step_id
    run.record_outcome(step, ok=True, receipt={"refund_id": "re_2"})
    run.record_outcome(step, ok=True, receipt={"refund_id": "re_2"})  # the same outcome again: harmless
    assert run.complete()["status"] == "completed" and run.complete()["status"] == "completed"

    other = seam.start_run(task_type="returns", versions=VERSIONS)
    other.record_intent("issue_refund", REFUND, turn=1)
    cancelled = other.cancel("customer withdrew the request")
    assert cancelled["run"]["status"] == "cancelled" and len(cancelled["uncertain"]) == 1
    assert other.cancel("again") == cancelled | {"run": other.data}
    row = RunRow.objects.get(pk=other.id)
    assert (row.status, row.outcome_detail) == (RunStatus.CANCELLED, "customer withdrew the request")
    with pytest.raises(SeamRefused):
        other.record_intent("start_return", {"order_id": "SU-90317"}, turn=2)


def test_the_handover_shows_what_was_done_what_is_in_doubt_and_what_the_customer_heard(run: Run) -> None:
    label = run.perform(
        "start_return",
        {"order_id": "SU-90317"},
        lambda args, key: Outcome(receipt={"label": "RL-7734"}),
        turn=1,
    )
    run.tell_customer("email", "Your return label is attached.", about_steps=[label.step_id])
    refund = run.record_intent("issue_refund", REFUND, turn=3)  # the runtime dies here
    assert run.handover().uncertain == []  # while it beats, the call may still be in flight
    # ... and its heartbeat stops: an hour later the run is stuck.
    RunRow.objects.filter(pk=run.id).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))

    handover = run.handover()

    assert handover.run_id == run.id and handover.status == "running"
    assert [step["step_id"] for step in handover.completed] == [label.step_id]
    assert [(s["step_id"], s["idempotency_key"]) for s in handover.uncertain] == [
        (refund.step_id, refund.idempotency_key)
    ]
    assert [m["body"] for m in handover.customer_told] == ["Your return label is attached."]
    assert {step["tool"] for step in handover.not_done} == {"offer_replacement", "notify_seller"}
    assert handover.next_action_code == "settle_uncertain"


def test_a_refusal_names_the_field_and_writes_nothing(seam: SeamClient, seam_server: str) -> None:
    with pytest.raises(ValueError, match="token"):
        SeamClient(seam_server, "")
    with pytest.raises(SeamRefused) as refused:
        seam.start_run(task_type="returns", versions={"schema": "1"})
    assert refused.value.status == 400 and "versions" in refused.value.fields
    assert refused.value.error_class is ErrorClass.INVALID_INPUT
    assert not RunRow.objects.exists()


def test_another_tenants_run_is_not_found_and_a_bad_token_is_refused(
    run: Run, seam_server: str, other_tenant: Tenant
) -> None:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=other_tenant, name="acme-bot", digest=AgentToken.digest_of(secret))
    with SeamClient(seam_server, secret, retries=0) as stranger, pytest.raises(SeamRefused) as hidden:
        stranger.run(run.id).fetch()
    with SeamClient(seam_server, "not-a-token", retries=0) as nobody, pytest.raises(SeamRefused) as refused:
        nobody.run(run.id).fetch()

    assert hidden.value.status == 404 and hidden.value.error_class is ErrorClass.PERMANENT
    assert refused.value.status == 401 and refused.value.error_class is ErrorClass.PERMANENT


def test_seam_unreachable_is_unavailable_after_the_retries(agent_token: str) -> None:
    with SeamClient(f"http://127.0.0.1:{free_port()}", agent_token, retries=2, backoff=0.01) as nowhere:
        started = time.monotonic()
        with pytest.raises(SeamUnavailable) as down:
            nowhere.start_run(task_type="returns", versions=VERSIONS)
    assert "after 3 attempts" in str(down.value) and down.value.maybe_applied is False
    assert time.monotonic() - started < 5
