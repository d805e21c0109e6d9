"""Staff pages of the journal: the landing page lists this tenant's runs, and only those."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from journal import services
from journal.models import Run, RunStatus
from journal.services import Actor
from journal.why import RunWhy, why
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_visitors_are_sent_to_log_in(client: Client) -> None:
    response = client.get(reverse("handover:run_list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_landing_page_lists_this_tenants_runs_with_open_calls(
    make_run: Any, support_user: Any, agent_actor: Actor
) -> None:
    run = make_run(ticket_id="T-40912")
    services.intent_record(run=run, tool="issue_refund", args={"amount": "14.95"}, turn=1, actor=agent_actor)
    factories.run_via_service(
        tenant=factories.TenantFactory(slug="acme"), actor=agent_actor, ticket_id="T-ACME-1"
    )

    response = _logged_in(support_user).get(reverse("handover:run_list"))

    assert response.status_code == 200
    body = response.content.decode()
    assert "T-40912" in body
    assert "1 without outcome" in body
    assert "T-ACME-1" not in body
    assert "under a minute ago" in body and "0\xa0minutes" not in body  # its heartbeat, just now


def test_an_htmx_refresh_gets_only_the_runs_partial(make_run: Any, support_user: Any) -> None:
    make_run(ticket_id="T-40912")
    response = _logged_in(support_user).get(reverse("handover:run_list"), headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="runs"')
    assert "<html" not in body and "T-40912" in body


def test_the_landing_page_runs_a_fixed_number_of_queries(
    make_run: Any, support_user: Any, django_assert_max_num_queries: Any
) -> None:
    client = _logged_in(support_user)
    make_run()
    with django_assert_max_num_queries(8) as few:
        client.get(reverse("handover:run_list"))
    for n in range(20):
        make_run(ticket_id=f"T-{n}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get(reverse("handover:run_list"))


def test_agent_text_is_escaped_on_the_run_page(make_run: Any, support_user: Any, agent_actor: Actor) -> None:
    run = make_run(ticket_id="T-1")
    services.customer_message_record(
        run=run, channel="chat", body="<script>alert(1)</script>", actor=agent_actor
    )
    body = _logged_in(support_user).get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_another_tenants_run_page_is_not_found(support_user: Any, agent_actor: Actor) -> None:
    foreign = factories.run_via_service(tenant=factories.TenantFactory(slug="acme"), actor=agent_actor)
    response = _logged_in(support_user).get(reverse("handover:run_detail", args=[foreign.pk]))
    assert response.status_code == 404


def _performed(run: Any, tool: str, turn: int, actor: Actor) -> None:
    intent = services.intent_record(run=run, tool=tool, args={"turn": turn}, turn=turn, actor=actor).intent
    services.outcome_record(intent=intent, ok=True, summary=f"{tool} done", actor=actor)


def test_a_completed_run_page_asks_nobody_to_resume_or_resolve_it(
    make_run: Any, persona: Any, agent_actor: Actor
) -> None:
    run = make_run(ticket_id="T-done", plan=[])
    support_user = persona("support_staff", run.tenant)  # one who may act: the buttons are withheld
    _performed(run, "adjust_stock", 1, agent_actor)
    services.run_complete(run=run, actor=agent_actor)

    body = _logged_in(support_user).get(reverse("handover:run_detail", args=[run.pk])).content.decode()

    assert '<section class="next-action closed" data-code="nothing_waiting">' in body
    assert "Nothing waits on a person: the run completed" in body
    assert "Add what the customer was told…" in body  # this person may act
    for advice in ("resume the run", "then resolve", "Resume…", "Resolve…"):
        assert advice not in body


def test_an_escalated_run_page_names_its_reason_in_words_and_asks_for_a_person(
    make_run: Any, support_user: Any, agent_actor: Actor
) -> None:
    from django.db import transaction

    from journal.models import OutcomeReason

    run = make_run(ticket_id="T-escalated")
    _performed(run, "start_return", 1, agent_actor)
    with transaction.atomic():
        services.run_hand_over(
            run=run,
            reason=OutcomeReason.RUN_DIED_MID_SEQUENCE,
            why=why(RunWhy.ENTERED_PHASE, phase="act", tools=["start_return"]),
            actor=Actor.system("sweep"),
        )

    body = _logged_in(support_user).get(reverse("handover:run_detail", args=[run.pk])).content.decode()

    assert (
        '<span class="pill reason" data-reason="run_died_mid_sequence">Run died mid-sequence</span>' in body
    )
    assert '<section class="next-action" data-code="resume">' in body
    assert "Resume the run to" in body
    assert (
        '<dt>Why</dt><dd class="why-now">the run had already done “Start return”, '
        "past the point where its policy resumes on its own: a person decides</dd>" in body
    )

    # Resumed by a person and finished: why it once stopped is history (the timeline keeps it).
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, outcome_reason="", awaiting_person=False)
    body = _logged_in(support_user).get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert "<dt>Why</dt>" not in body
    assert "Run escalated" in body


def _escalated_with_a_step_in_doubt(make_run: Any, agent_actor: Actor) -> Run:
    """A run that died with its refund unknown and its seller notice never sent."""
    from django.db import transaction

    from journal.models import Intent, IntentStatus, OutcomeReason

    plan = [
        {"tool": "issue_refund", "args": {"order_id": "SU-1", "amount": "14.95"}},
        {"tool": "notify_seller", "args": {"order_id": "SU-1"}},
    ]
    run = make_run(ticket_id="T-doubt", plan=plan)
    in_doubt = services.intent_record(
        run=run, tool="issue_refund", args=plan[0]["args"], turn=1, actor=agent_actor
    )
    Intent.objects.filter(pk=in_doubt.intent.pk).update(
        status=IntentStatus.UNKNOWN, unknown_reason="the downstream cannot say"
    )
    with transaction.atomic():
        services.run_hand_over(
            run=run,
            reason=OutcomeReason.UNKNOWN_OUTCOME,
            why=services.unknown_calls_why([Intent.objects.get(pk=in_doubt.intent.pk)]),
            actor=Actor.system("sweep"),
        )
    return run


def test_an_uncertain_run_offers_resume_only_once_its_step_is_settled(
    make_run: Any, persona: Any, agent_actor: Actor
) -> None:
    run = _escalated_with_a_step_in_doubt(make_run, agent_actor)
    support_user = persona("support_staff", run.tenant)  # one who may act

    body = _logged_in(support_user).get(reverse("handover:run_detail", args=[run.pk])).content.decode()

    assert '<button type="button" disabled aria-describedby="resume-blocked">Resume…</button>' in body
    assert (
        '<small class="blocked-why" id="resume-blocked">Not possible now: “Issue refund”: outcome unknown; '
        "settle it first</small>" in body
    )
    assert reverse("handover:run_confirm", args=[run.pk, "resume"]) not in body
    assert "Resolve…" in body

    run.intents.update(status="not_performed")  # settled by a person: now it can be finished
    body = _logged_in(support_user).get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert reverse("handover:run_confirm", args=[run.pk, "resume"]) in body
    assert "resume-blocked" not in body


def test_a_cancelled_run_with_a_step_in_doubt_says_why_it_cannot_be_resumed(
    make_run: Any, persona: Any, agent_actor: Actor
) -> None:
    plan = [
        {"tool": "issue_refund", "args": {"order_id": "SU-1"}},
        {"tool": "notify_seller", "args": {"order_id": "SU-1"}},  # never attempted: not done
    ]
    run = make_run(ticket_id="T-cancelled", plan=plan)
    services.intent_record(run=run, tool="issue_refund", args={"order_id": "SU-1"}, turn=1, actor=agent_actor)
    run.intents.update(status="unknown", unknown_reason="the downstream cannot say")
    cancelled = services.run_cancel(run=run, reason="buyer withdrew", actor=agent_actor)
    assert cancelled.run.awaiting_person  # a person must settle the refund
    support_user = persona("support_staff", run.tenant)

    body = _logged_in(support_user).get(reverse("handover:run_detail", args=[run.pk])).content.decode()

    assert '<button type="button" disabled aria-describedby="resume-blocked">Resume…</button>' in body
    assert "the run is cancelled</small>" in body
    assert reverse("handover:run_confirm", args=[run.pk, "resume"]) not in body
    assert "Resolve…" in body
    assert "Find out whether “Issue refund” happened" in body
