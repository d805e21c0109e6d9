"""`make bench` counts every page budget issue 34 names as a target (bench/pages.py): a page over
its budget, or one measured below the volume its budget names, is a target not met."""

from __future__ import annotations

from bench.pages import BIG_RUN_INTENTS, PAGE_P95_BUDGET_MS, RUNS, budget_targets

LABELS = {
    "insights": "insights page",
    "big_run": "run page, 10,000 intents",
    "big_panel": "its panel poll, changed",
    "big_handover": "handover API, 10,000 intents",
    "queue": "queue page",
}


def figures(**p95: float) -> dict[str, dict[str, float]]:
    return {name: {"median_ms": value / 2, "p95_ms": value} for name, value in p95.items()}


def by_page(targets: list[dict]) -> dict[str, dict]:
    return {next(name for name, label in LABELS.items() if t["name"].startswith(label)): t for t in targets}


def test_each_budgeted_page_is_a_target_met_only_within_its_budget():
    measured = figures(
        insights=PAGE_P95_BUDGET_MS - 1,
        big_run=PAGE_P95_BUDGET_MS + 1,
        big_panel=120.0,
        big_handover=310.0,
        queue=90.0,
    )

    targets = by_page(budget_targets(measured, LABELS, runs=RUNS, big_intents=BIG_RUN_INTENTS))

    assert set(targets) == {"insights", "big_run", "big_panel", "big_handover"}
    assert {name: t["met"] for name, t in targets.items()} == {
        "insights": True,
        "big_run": False,
        "big_panel": True,
        "big_handover": False,
    }
    assert targets["big_run"]["value"] == PAGE_P95_BUDGET_MS + 1
    assert targets["insights"]["bound"] == "<= 300"
    assert "1,000,000 runs" in targets["insights"]["name"]
    assert "10,000 intents in the run" in targets["big_handover"]["name"]


def test_a_page_measured_below_its_budgets_volume_does_not_meet_it():
    measured = figures(insights=50.0, big_run=50.0)

    targets = by_page(budget_targets(measured, LABELS, runs=RUNS // 10, big_intents=BIG_RUN_INTENTS))

    assert targets["insights"]["met"] is False
    assert targets["insights"]["name"].endswith("(NOT at that volume)")
    assert targets["big_run"]["met"] is True
    assert set(targets) == {"insights", "big_run"}  # pages not measured (--pages) are not targets
