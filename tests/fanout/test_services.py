"""fanout.services against the real sandbox (slow, sometimes-missing warehouses; a required
entitlement) and PostgreSQL: the four outcomes, the p95 retry rule, a precedence conflict, and
a missing required branch handed to a person — each checked against the recorded rows, the
run's journal, and the sandbox's own log of calls."""

from __future__ import annotations

import random
from typing import Any

import pytest

from fanout.merge import Decision
from fanout.models import BranchStatus, FanOut, FanOutBranch, Outcome
from fanout.selectors import run_coverage, tool_latency_p95
from fanout.services import fanout_hand_over, fanout_run
from handover import handover_for
from journal.models import Escalation, JournalEvent, OutcomeReason, Run, RunStatus
from journal.services import Actor
from sandbox.models import Effect
from tests.fanout.conftest import SHORTAGE_FACTS, Sandbox, shortage_spec

pytestmark = pytest.mark.django_db(transaction=True)

ACTOR = Actor.agent("shortage-bot")
EVERY_BRANCH = ("warehouse LDS-2", "warehouse MAN-1", "warehouse BRS-3", "entitlement SU-88410")


def events(run: Run, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in run.events.filter(kind=kind).order_by("at", "id")]


def attempts(fanout: FanOut, name: str) -> list[FanOutBranch]:
    return list(fanout.branches.filter(name=name).order_by("attempt"))


def test_all_good_proceeds_with_full_coverage_and_a_promise_from_what_was_checked(
    sandbox: Sandbox, shortage_run: Run
) -> None:
    sandbox.warehouse("BRS-3", latency_ms=300)

    result = fanout_run(
        run=shortage_run, spec=shortage_spec(), turn=2, facts=dict(SHORTAGE_FACTS), actor=ACTOR
    )

    assert (result.outcome, result.coverage, result.proceed) == (Outcome.ALL_GOOD, "4/4", True)
    fanout = FanOut.objects.get(run=shortage_run)
    assert (fanout.outcome, fanout.coverage) == ("all_good", "4/4")
    assert fanout.decision["rule"] == "availability_decides_promise"
    assert fanout.decision["promise"]["reship"] == {
        "sku": "SKU-4471",
        "qty": 4,
        "from": "warehouse LDS-2",
        "when": "now",
    }
    rows = {row.name: row for row in fanout.branches.all()}
    assert set(rows) == set(EVERY_BRANCH)
    assert all(row.status == BranchStatus.OK and row.attempt == 1 for row in rows.values())
    assert rows["warehouse BRS-3"].latency_ms is not None and rows["warehouse BRS-3"].latency_ms >= 300
    assert rows["warehouse LDS-2"].result["available"] == 40
    assert rows["entitlement SU-88410"].result["remedies"] == ["credit", "reship"]
    # The journal: dispatched, four attempts settled, the group settled.
    assert len(events(shortage_run, JournalEvent.Kind.FANOUT_STARTED)) == 1
    assert len(events(shortage_run, JournalEvent.Kind.FANOUT_BRANCH_SETTLED)) == 4
    assert events(shortage_run, JournalEvent.Kind.FANOUT_RETRY) == []
    [settled] = events(shortage_run, JournalEvent.Kind.FANOUT_SETTLED)
    assert settled["outcome"] == "all_good" and settled["missing"] == []
    # The world: each branch was asked exactly once, and nothing was written.
    for code in ("LDS-2", "MAN-1", "BRS-3"):
        assert [c["status"] for c in sandbox.calls("stock", code)] == [200]
    assert [c["status"] for c in sandbox.calls("entitlement", "SU-88410")] == [200]
    assert Effect.objects.count() == 0


def test_some_good_proceeds_labelled_partial_and_names_the_branch_the_deadline_cut_off(
    sandbox: Sandbox, shortage_run: Run
) -> None:
    sandbox.warehouse("BRS-3", latency_ms=2500)

    result = fanout_run(
        run=shortage_run,
        spec=shortage_spec(deadline_ms=1000),
        turn=2,
        facts=dict(SHORTAGE_FACTS),
        actor=ACTOR,
    )

    assert (result.outcome, result.coverage, result.proceed) == (Outcome.SOME_GOOD, "3/4", True)
    [brs] = attempts(result.fanout, "warehouse BRS-3")
    assert brs.status == BranchStatus.MISSING and brs.error_class == ""
    assert brs.latency_ms is not None and brs.latency_ms >= 900  # waited until the deadline
    # The promise rests only on what answered; BRS-3 is named as not checked.
    decision = FanOut.objects.get(pk=result.fanout.pk).decision
    assert decision["promise"]["reship"]["from"] == "warehouse LDS-2"
    assert "warehouse BRS-3: not checked (deadline); nothing promised from it" in decision["rests_on"]
    coverage = run_coverage(shortage_run)
    assert coverage is not None
    assert coverage["coverage"] == "3/4" and coverage["outcome"] == "some_good"
    assert coverage["missing"] == [
        {
            "branch": "warehouse BRS-3",
            "tool": "warehouse_stock",
            "required": False,
            "why": "deadline",
            "retry": "not attempted: the deadline came first",
            "attempts": 1,
        }
    ]
    assert [c["branch"] for c in coverage["checked"]] == [
        "warehouse LDS-2",
        "warehouse MAN-1",
        "entitlement SU-88410",
    ]
    # The sandbox answered BRS-3 once, too late; nobody asked it again.
    assert [c["status"] for c in sandbox.settle("stock", "BRS-3", 1)] == [200]


def test_a_failed_branch_is_retried_once_with_jitter_when_the_budget_exceeds_the_p95(
    sandbox: Sandbox, shortage_run: Run
) -> None:
    sandbox.warehouse("MAN-1", fail_every=2)
    from tools.services import tool_read

    tool_read(tool="warehouse_stock", args={"warehouse": "MAN-1", "sku": "SKU-4471"})  # read 1 answers

    result = fanout_run(
        run=shortage_run,
        spec=shortage_spec(),
        turn=2,
        facts=dict(SHORTAGE_FACTS),
        actor=ACTOR,
        rng=random.Random(3),
    )

    assert (result.outcome, result.coverage) == (Outcome.ALL_GOOD, "4/4")
    first, second = attempts(result.fanout, "warehouse MAN-1")
    assert (first.status, first.error_class) == (BranchStatus.ERROR, "transient")
    assert first.retry_note.startswith("sent after ") and " ms jitter: remaining " in first.retry_note
    assert (second.attempt, second.status, second.result["available"]) == (2, BranchStatus.OK, 25)
    [retry] = events(shortage_run, JournalEvent.Kind.FANOUT_RETRY)
    assert retry["sent"] is True and 0 <= retry["jitter_ms"] <= 50
    assert retry["remaining_ms"] - retry["jitter_ms"] > retry["p95_ms"]
    # The world saw the direct read, the failed read and the one retry.
    assert [c["status"] for c in sandbox.calls("stock", "MAN-1")] == [200, 503, 200]


def test_a_retry_happens_once_only(sandbox: Sandbox, shortage_run: Run) -> None:
    sandbox.warehouse("MAN-1", fail_every=1)

    result = fanout_run(
        run=shortage_run, spec=shortage_spec(), turn=2, facts=dict(SHORTAGE_FACTS), actor=ACTOR
    )

    assert (result.outcome, result.coverage) == (Outcome.SOME_GOOD, "3/4")
    assert [a.status for a in attempts(result.fanout, "warehouse MAN-1")] == ["error", "error"]
    coverage = run_coverage(shortage_run)
    assert coverage is not None
    [missing] = coverage["missing"]
    assert missing["why"].startswith("transient: HTTP 503") and missing["attempts"] == 2
    assert [c["status"] for c in sandbox.calls("stock", "MAN-1")] == [503, 503]


def test_a_retry_that_cannot_finish_before_the_deadline_is_never_sent(
    sandbox: Sandbox, shortage_run: Run
) -> None:
    # Recorded history: BRS-3's stock read takes 1.2 s.
    sandbox.warehouse("BRS-3", latency_ms=1200)
    fanout_run(
        run=shortage_run,
        spec=shortage_spec(only=("warehouse BRS-3",)),
        turn=2,
        facts=dict(SHORTAGE_FACTS),
        actor=ACTOR,
    )
    assert tool_latency_p95("warehouse_stock") is not None
    assert tool_latency_p95("warehouse_stock") >= 1200  # type: ignore[operator]

    # Now MAN-1 refuses at once, with 0.8 s left: a retry could not come back in time.
    sandbox.warehouse("MAN-1", fail_every=1)
    result = fanout_run(
        run=shortage_run,
        spec=shortage_spec(deadline_ms=800, only=("warehouse LDS-2", "warehouse MAN-1")),
        turn=3,
        merge=lambda readings: Decision(proceed=True, rule="gathered", summary="stock only"),
        actor=ACTOR,
    )

    assert (result.outcome, result.coverage) == (Outcome.SOME_GOOD, "1/2")
    [man] = attempts(result.fanout, "warehouse MAN-1")
    p95 = tool_latency_p95("warehouse_stock")
    assert man.retry_note.startswith("not attempted: remaining ")
    assert man.retry_note.endswith(f"<= p95 {p95} ms")
    [retry] = events(shortage_run, JournalEvent.Kind.FANOUT_RETRY)
    assert retry["sent"] is False and retry["remaining_ms"] - retry["jitter_ms"] <= retry["p95_ms"]
    coverage = run_coverage(shortage_run)
    assert coverage is not None and coverage["missing"][0]["retry"] == man.retry_note
    # The sandbox's log: MAN-1 was asked exactly once; the retry was never sent.
    assert [c["status"] for c in sandbox.calls("stock", "MAN-1")] == [503]


def test_a_missing_required_branch_degrades_to_a_person(sandbox: Sandbox, shortage_run: Run) -> None:
    sandbox.fault("orders", "entitlement", "fail_before", remaining=2)

    result = fanout_run(
        run=shortage_run, spec=shortage_spec(), turn=2, facts=dict(SHORTAGE_FACTS), actor=ACTOR
    )

    assert (result.outcome, result.coverage, result.proceed) == (Outcome.REQUIRED_MISSING, "3/4", False)
    assert result.decision.rule == "required_missing"
    assert fanout_hand_over(result=result, actor=ACTOR) is True

    run = Run.objects.get(pk=shortage_run.pk)
    assert (run.status, run.outcome_reason) == (RunStatus.ESCALATED, OutcomeReason.POLICY)
    assert (run.outcome_why["outcome"], run.outcome_why["coverage"]) == ("required_missing", "3/4")
    assert "entitlement SU-88410 (transient: HTTP 503" in handover_for(run).reason_detail
    [escalation] = Escalation.objects.filter(run=run)
    assert escalation.reason == OutcomeReason.POLICY
    [escalated] = events(run, JournalEvent.Kind.RUN_ESCALATED)
    assert escalated["fanout"] == result.fanout.pk
    # What the person receives: what was gathered, and what is missing and why.
    coverage = run_coverage(run)
    assert coverage is not None
    assert [m["branch"] for m in coverage["missing"]] == ["entitlement SU-88410"]
    assert coverage["missing"][0]["required"] is True and coverage["missing"][0]["attempts"] == 2
    assert len(coverage["checked"]) == 3 and coverage["decision"]["proceed"] is False
    # The world: the entitlement refused twice (first try and its one retry); nothing written.
    assert [c["status"] for c in sandbox.calls("entitlement", "SU-88410")] == [503, 503]
    assert Effect.objects.count() == 0
    assert not run.intents.exists()


def test_none_good_when_every_branch_fails(sandbox: Sandbox, shortage_run: Run) -> None:
    for code in ("LDS-2", "MAN-1", "BRS-3"):
        sandbox.warehouse(code, fail_every=1)
    sandbox.fault("orders", "entitlement", "fail_before", remaining=2)

    result = fanout_run(
        run=shortage_run, spec=shortage_spec(), turn=2, facts=dict(SHORTAGE_FACTS), actor=ACTOR
    )

    assert (result.outcome, result.coverage, result.proceed) == (Outcome.NONE_GOOD, "0/4", False)
    fanout = FanOut.objects.get(pk=result.fanout.pk)
    assert fanout.outcome == "none_good" and fanout.decision["rule"] == "none_good"
    assert fanout.branches.filter(status=BranchStatus.ERROR).count() == 8  # each tried, each retried once
    assert fanout.branches.exclude(status=BranchStatus.ERROR).count() == 0
    for code in ("LDS-2", "MAN-1", "BRS-3"):
        assert [c["status"] for c in sandbox.calls("stock", code)] == [503, 503]
    assert [c["status"] for c in sandbox.calls("entitlement", "SU-88410")] == [503, 503]


def test_a_conflict_the_rules_cannot_settle_escalates_with_both_sides(
    sandbox: Sandbox, shortage_run: Run
) -> None:
    # 20 oak benches by the need-by date (5 days): no warehouse has 20, Bristol restocks in 10 days.
    facts = {**SHORTAGE_FACTS, "sku": "OAK-BENCH", "qty": 20}

    result = fanout_run(run=shortage_run, spec=shortage_spec(facts), turn=2, facts=facts, actor=ACTOR)

    assert (result.outcome, result.coverage) == (Outcome.ALL_GOOD, "4/4")
    assert result.proceed is False
    conflict = result.decision.conflict
    assert conflict is not None and result.decision.rule == "promise_date_against_need_by"
    sides = {side["source"]: side["says"] for side in conflict["sides"]}
    assert sides["entitlement SU-88410"].startswith("reship allowed; 20 x OAK-BENCH needed by ")
    assert sides["availability"].startswith(
        "3 of 3 warehouses checked: 15 x OAK-BENCH free in all, earliest restock "
    )
    assert fanout_hand_over(result=result, actor=ACTOR) is True

    run = Run.objects.get(pk=shortage_run.pk)
    assert run.status == RunStatus.ESCALATED and "the rules cannot settle it" in run.outcome_why["summary"]
    [settled] = events(run, JournalEvent.Kind.FANOUT_SETTLED)
    assert settled["conflict"] is True and settled["proceed"] is False
    coverage = run_coverage(run)
    assert coverage is not None and coverage["decision"]["conflict"]["sides"] == conflict["sides"]
    assert Effect.objects.count() == 0


def test_the_entitlement_takes_precedence_over_the_plan(sandbox: Sandbox, shortage_run: Run) -> None:
    sandbox.entitlement("SU-88410", remedies=["credit"])

    result = fanout_run(
        run=shortage_run, spec=shortage_spec(), turn=2, facts=dict(SHORTAGE_FACTS), actor=ACTOR
    )

    assert result.outcome == Outcome.ALL_GOOD and result.proceed is False
    assert result.decision.rule == "entitlement_decides_legality" and result.decision.conflict is None
    assert result.decision.promise == {"remedies": ["credit"]}
