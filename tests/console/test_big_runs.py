"""A run of thousands of calls draws as fast as a run of ten (issue 20, "Big runs stay fast"):
its page collapses each long list to its first items with a "show all N" link, loads a bounded
number of journal events, and costs the same queries and about the same bytes whatever its size.
bench/pages.py measures the server time of a 10,000-intent run."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from bench.pages import seed_big_run
from compensations.models import CatalogueEntry, Compensation, CompensationStatus
from compensations.reversibility import may_undo
from compensations.selectors import catalogue_for
from console import confirmations
from console.actions import resume_preview
from console.views import RUN_PAGE_LIST_LIMIT
from handover import (
    RECENT_EVENTS,
    CompletedStep,
    handover_build,
    handover_cut,
    handover_rows,
    run_state_token,
)
from journal.channels import CustomerChannel
from journal.models import Intent, JournalEvent, Run
from journal.selectors import plan_with_keys
from tests.support.plugins import declaring
from tools.registry import CustomerFacing, ToolSpec

pytestmark = pytest.mark.django_db(transaction=True)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _big_run(tenant: Any, intents: int, name: str) -> Run:
    run = seed_big_run(tenant, intents, external_id=name)
    return Run.objects.select_related("tenant").get(pk=run.pk)


def _calls(body: str) -> int:
    return len(re.findall(r'<tr class="status-', body))


def tools() -> list[ToolSpec]:
    """Tools this module declares in one test (tests.support.plugins): a credit, and a credit note
    that reaches the customer and announces credits."""
    return [
        ToolSpec(name="grant_credit", kind="write", args_schema={"type": "object"}),
        ToolSpec(
            name="send_credit_note",
            kind="write",
            args_schema={"type": "object"},
            customer_facing=CustomerFacing(
                channel=CustomerChannel.SMS, says="credit note {note}", announces=("grant_credit",)
            ),
        ),
    ]


def test_a_long_run_page_draws_its_first_calls_and_a_link_to_all_of_them(
    tenant: Any, support_user: Any
) -> None:
    run = _big_run(tenant, 300, "big-300")
    client = _client(support_user)
    body = client.get(reverse("handover:run_detail", args=[run.pk])).content.decode()
    assert _calls(body) == RUN_PAGE_LIST_LIMIT
    assert "show all 300" in body  # the calls
    assert "show all 299" in body  # the completed steps (the last call's outcome is unknown)
    assert body.count('data-step="') <= 3 * RUN_PAGE_LIST_LIMIT
    every = client.get(reverse("handover:run_detail", args=[run.pk]), {"all": "1"}).content.decode()
    assert _calls(every) == 300 and "show all" not in every
    # Its poll keeps drawing every item; the collapsed page's poll does not.
    assert "&amp;all=1" in every and "&amp;all=1" not in body
    assert client.get(reverse("handover:run_detail", args=[run.pk]), {"all": "yes"}).status_code == 400


def test_the_run_page_costs_the_same_queries_and_about_the_same_bytes_at_any_size(
    tenant: Any, support_user: Any
) -> None:
    # Both past the events read whole (handover.RECENT_EVENTS); a smaller run costs fewer queries.
    small, big = _big_run(tenant, 150, "big-150"), _big_run(tenant, 3000, "big-3000")
    client = _client(support_user)
    answers = {}
    for run in (small, big):
        url = reverse("handover:run_detail", args=[run.pk])
        client.get(url)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        answers[run.pk] = (len(queries.captured_queries), len(response.content))
    (small_queries, small_bytes), (big_queries, big_bytes) = answers[small.pk], answers[big.pk]
    assert big_queries == small_queries
    assert big_bytes < 1.2 * small_bytes, answers


def test_the_run_panel_and_the_handover_api_cost_the_same_queries_at_any_size(
    tenant: Any, support_user: Any, agent_client: Any
) -> None:
    # The page's changed poll (the panel drawn again) and the handover API read what the page
    # reads: a run of 3,000 calls costs the queries of one of 150.
    small, big = _big_run(tenant, 150, "big-150"), _big_run(tenant, 3000, "big-3000")
    client = _client(support_user)
    counts: dict[str, list[int]] = {"panel": [], "api": []}
    for run in (small, big):
        urls = {
            "panel": (client, reverse("handover:run_panel", args=[run.pk]) + "?state=0.0.0"),
            "api": (agent_client, f"/api/v1/runs/{run.pk}/handover/"),
        }
        for name, (caller, url) in urls.items():
            caller.get(url)
            with CaptureQueriesContext(connection) as queries:
                assert caller.get(url).status_code == 200
            counts[name].append(len(queries.captured_queries))
    assert counts["panel"][0] == counts["panel"][1], counts
    assert counts["api"][0] == counts["api"][1], counts


@declaring(__name__, only=True)
def test_a_cut_handover_reads_the_times_of_steps_a_customer_facing_tool_announces(tenant: Any) -> None:
    # Past the shown steps, a credit, then a credit note (customer-facing, announcing credits),
    # then a credit after it. A cut handover reads the times of the credits only (the note is
    # loaded whole: its event is one the handover reads), and tells the customer's list as the
    # whole handover does.
    run = _big_run(tenant, 400, "big-told")
    by_turn = {i.turn: i for i in run.intents.all()}
    Intent.objects.filter(pk__in=[by_turn[200].pk, by_turn[300].pk]).update(tool="grant_credit")
    Intent.objects.filter(pk=by_turn[250].pk).update(
        tool="send_credit_note", args={"note": "N-7"}, receipt={"note": "N-7"}
    )
    now = timezone.now()

    whole = handover_build(handover_rows(run), now)
    cut_rows = handover_rows(run, limit=RUN_PAGE_LIST_LIMIT)
    cut = handover_build(cut_rows, now, limit=RUN_PAGE_LIST_LIMIT)

    undoable = {tool for tool, entry in catalogue_for(tenant_id=tenant.pk).items() if may_undo(entry)}
    for step in cut_rows.tail:
        assert (step.intended_at is not None) == (step.tool in undoable | {"grant_credit"}), step
        assert (step.receipt is not None) == (step.tool in undoable), step
    assert any(step.intended_at is None for step in cut_rows.tail)
    assert "grant_credit" in {step.tool for step in cut_rows.tail}
    assert by_turn[250].pk in {i.pk for i in cut_rows.intents}
    assert [s.pk for s in cut_rows.steps] == [i.pk for i in handover_rows(run).steps]
    [note] = cut.customer_told
    assert note.about_steps == [by_turn[200].step_id] and note.body == "credit note N-7"
    assert cut.customer_told == whole.customer_told
    assert handover_cut(cut) == handover_cut(whole)


def test_the_handover_loads_the_newest_events_not_all_of_them(tenant: Any) -> None:
    run = _big_run(tenant, 1000, "big-1000")
    rows = handover_rows(run)
    assert rows.event_count == 2000
    assert len(rows.events) == RECENT_EVENTS
    assert rows.events[-1].pk == rows.last_event_id
    # The page's state token is the same whether read from the rows or from the database.
    assert run_state_token(run, rows) == run_state_token(run)


def test_the_handover_api_answers_the_first_items_of_each_list_and_all_when_asked(
    tenant: Any, agent_client: Any
) -> None:
    run = _big_run(tenant, 300, "big-api")
    url = f"/api/v1/runs/{run.pk}/handover/"
    cut = agent_client.get(url).json()
    assert len(cut["completed"]) == RUN_PAGE_LIST_LIMIT
    assert cut["totals"]["completed"] == 299 and cut["totals"]["uncertain"] == 1
    whole = agent_client.get(url, {"all": "1"}).json()
    assert len(whole["completed"]) == 299
    refused = agent_client.get(url, {"all": "\x00"})
    assert refused.status_code == 400 and "all" in refused.json()


def test_a_cut_handover_builds_only_the_steps_it_shows_and_says_the_same(tenant: Any) -> None:
    # The steps past the shown ones are read for the next action and the totals only
    # (handover.StandingStep): the cut handover builds RUN_PAGE_LIST_LIMIT CompletedSteps at any
    # size, and every sentence and count it answers is the whole handover's.
    run = _big_run(tenant, 2000, "big-2000")
    rows = handover_rows(run)
    now = timezone.now()
    whole = handover_build(rows, now)
    cut = handover_build(rows, now, limit=RUN_PAGE_LIST_LIMIT)
    assert len(whole.completed) == 1999
    assert len(cut.completed) == RUN_PAGE_LIST_LIMIT
    assert all(isinstance(step, CompletedStep) for step in cut.completed)
    assert cut.completed == whole.completed[:RUN_PAGE_LIST_LIMIT]
    assert cut.totals == whole.totals and cut.totals["completed"] == 1999
    assert cut.next_action == whole.next_action
    assert (cut.reason_holds, cut.reason_answered) == (whole.reason_holds, whole.reason_answered)
    assert handover_cut(cut) == handover_cut(whole)


def test_a_handover_loaded_for_its_first_items_builds_a_bounded_number_of_steps_and_says_the_same(
    tenant: Any,
) -> None:
    # A run of 2,000 calls of which one tool can be undone (the receipts of its steps decide
    # whether the undo can be built), one step was undone, a plan names steps past the shown
    # ones, and the last call's outcome is unknown. Loaded for a cut handover, only the steps some
    # list shows whole are built as models, and the handover says what the whole load says.
    run = _big_run(tenant, 2000, "big-mixed")
    CatalogueEntry.objects.create(
        tenant=tenant,
        tool="adjust_stock",
        description="stock moved back",
        compensating_tool="reverse_stock",
        argument_mapping={"receipt_id": "receipt.id"},
        reversibility="reversible",
    )
    tail_step = run.intents.filter(tool="lookup_order", status="performed").order_by("-id")[0]
    undo = Intent.objects.create(
        run=run,
        step_id=f"{run.pk}:undo",
        turn=9999,
        tool="reverse_lookup",
        args={},
        idempotency_key="f" * 64,
        status="performed",
        intended_at=timezone.now(),
        settled_at=timezone.now(),
    )
    JournalEvent.objects.create(
        run=run,
        intent=undo,
        kind=JournalEvent.Kind.INTENT_RECORDED,
        actor_kind="system",
        actor_name="seam",
        data={"tool": undo.tool, "compensation": True},
        at=undo.intended_at,
    )
    Compensation.objects.create(original=tail_step, intent=undo, status=CompensationStatus.DONE)
    # A plan of four steps: three the run performed late (in the tail), one never attempted.
    performed = list(run.intents.filter(status="performed").order_by("-id")[1:4])
    Run.objects.filter(pk=run.pk).update(
        plan=[{"tool": i.tool, "args": {"line": i.turn}} for i in performed]
        + [{"tool": "send_email", "args": {"line": "never"}}]
    )
    run = Run.objects.select_related("tenant").get(pk=run.pk)
    for intent, step in zip(performed, plan_with_keys(run), strict=False):
        Intent.objects.filter(pk=intent.pk).update(idempotency_key=step["key"])
    now = timezone.now()

    whole_rows = handover_rows(run)
    cut_rows = handover_rows(run, limit=RUN_PAGE_LIST_LIMIT)

    assert len(whole_rows.intents) == cut_rows.intent_count == 2001
    undoable = run.intents.filter(tool="adjust_stock").count()
    assert len(cut_rows.intents) <= 3 * RUN_PAGE_LIST_LIMIT + 2
    # The steps read without a model carry their arguments and receipt only where an undo may
    # be built from them.
    assert {s.tool for s in cut_rows.tail if s.receipt is not None} == {"adjust_stock"}
    assert all(s.args is None for s in cut_rows.tail if s.tool != "adjust_stock")
    assert tail_step.pk in {i.pk for i in cut_rows.intents}  # its undo is shown: loaded whole
    whole = handover_build(whole_rows, now, limit=RUN_PAGE_LIST_LIMIT)
    cut = handover_build(cut_rows, now, limit=RUN_PAGE_LIST_LIMIT)
    assert cut.next_action == whole.next_action
    assert len(cut.next_action.compensations_available) == undoable
    assert [n.tool for n in cut.not_done] == ["send_email"]  # the three in the tail were done
    assert cut.totals == whole.totals
    assert handover_cut(cut) == handover_cut(whole)
    assert resume_preview(run, cut_rows) == resume_preview(run, whole_rows)
    # A confirmation asked with the cut rows reads every step (the whole run is undone).
    effects = confirmations.compensate_run(run, cut_rows, "").effects
    assert effects == confirmations.compensate_run(run, whole_rows, "").effects


def test_the_big_run_page_and_its_handover_build_models_for_the_shown_steps_only(
    tenant: Any, support_user: Any, agent_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _big_run(tenant, 3000, "big-models")
    built: list[int] = []
    original_init = Intent.__init__

    def counting_init(self: Intent, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(Intent, "__init__", counting_init)
    assert _client(support_user).get(reverse("handover:run_detail", args=[run.pk])).status_code == 200
    assert 0 < len(built) <= 3 * RUN_PAGE_LIST_LIMIT, len(built)
    built.clear()
    assert agent_client.get(f"/api/v1/runs/{run.pk}/handover/").status_code == 200
    assert 0 < len(built) <= 3 * RUN_PAGE_LIST_LIMIT, len(built)
