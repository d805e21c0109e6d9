"""The rules that are pure code: the group's outcome, the p95, and the shortage merge's declared
precedence (fanout.merge)."""

from __future__ import annotations

from typing import Any

import pytest

from fanout.merge import Reading, shortage_remedy
from fanout.models import Outcome
from fanout.selectors import p95_of
from fanout.services import outcome_of


@pytest.mark.parametrize(
    ("branches", "outcome"),
    [
        ([(True, True), (False, True), (False, True)], Outcome.ALL_GOOD),
        ([(True, True), (False, True), (False, False)], Outcome.SOME_GOOD),
        ([(True, False), (False, True), (False, True)], Outcome.REQUIRED_MISSING),
        ([(True, False), (False, False)], Outcome.NONE_GOOD),
        ([(False, False), (False, False)], Outcome.NONE_GOOD),
    ],
)
def test_the_outcome_is_computed_from_required_and_answered(
    branches: list[tuple[bool, bool]], outcome: str
) -> None:
    assert outcome_of(branches) == outcome


def test_p95_is_nearest_rank() -> None:
    assert p95_of([]) is None
    assert p95_of([7]) == 7
    assert p95_of(list(range(1, 101))) == 95
    assert p95_of([5, 1200]) == 1200


def entitlement(remedies: list[str], need_by: str | None = "2026-12-04") -> Reading:
    return Reading(
        "entitlement SU-88410",
        "entitlement",
        True,
        {"order_id": "SU-88410", "remedies": remedies, "need_by": need_by, "clause": "7.2"},
    )


def stock(code: str, available: int | None, restock: str | None = None, why: str = "deadline") -> Reading:
    result: dict[str, Any] | None = (
        None
        if available is None
        else {"warehouse": code, "sku": "SKU-4471", "available": available, "restock_date": restock}
    )
    return Reading(f"warehouse {code}", "warehouse_stock", False, result, "" if result else why)


MERGE = shortage_remedy(sku="SKU-4471", qty=4)


def test_entitlement_decides_which_remedies_are_legal_before_anything_else() -> None:
    decision = MERGE([entitlement(["credit"]), stock("LDS-2", 40)])
    assert (decision.proceed, decision.rule, decision.conflict) == (
        False,
        "entitlement_decides_legality",
        None,
    )
    assert "does not allow reship" in decision.summary


def test_availability_promises_only_from_a_checked_warehouse() -> None:
    decision = MERGE(
        [entitlement(["credit", "reship"]), stock("LDS-2", 2), stock("MAN-1", 9), stock("BRS-3", None)]
    )
    assert (decision.proceed, decision.rule) == (True, "availability_decides_promise")
    assert decision.promise["reship"]["from"] == "warehouse MAN-1"
    assert "warehouse BRS-3: not checked (deadline); nothing promised from it" in decision.rests_on


def test_a_missing_warehouse_is_never_counted_as_stock() -> None:
    # The only warehouse that might have had the units did not answer: nothing can be promised now.
    decision = MERGE([entitlement(["credit", "reship"]), stock("LDS-2", 1), stock("MAN-1", None)])
    assert decision.proceed is False and decision.conflict is not None
    sides = {side["source"]: side["says"] for side in decision.conflict["sides"]}
    assert "not checked: warehouse MAN-1" in sides["availability"]


def test_a_restock_date_is_compared_with_the_need_by_date_as_data() -> None:
    in_time = MERGE([entitlement(["credit", "reship"], "2026-12-10"), stock("LDS-2", 0, "2026-12-08")])
    assert (in_time.proceed, in_time.rule, in_time.conflict) == (False, "promise_date_against_need_by", None)
    assert in_time.promise["reship"]["when"] == "2026-12-08"

    too_late = MERGE([entitlement(["credit", "reship"], "2026-12-04"), stock("LDS-2", 0, "2026-12-08")])
    assert too_late.rule == "promise_date_against_need_by" and too_late.conflict is not None
    assert [side["source"] for side in too_late.conflict["sides"]] == ["entitlement SU-88410", "availability"]


def test_the_merge_refuses_to_guess_without_the_entitlement() -> None:
    with pytest.raises(ValueError, match="needs the entitlement"):
        MERGE([stock("LDS-2", 40)])
