"""Faults, per call (`X-Sandbox-Fault`) and persistent (`faults/`): fail_before answers 503
having done nothing; slow acts and answers late; drop_after acts and commits, then withholds the
answer; unknown_lookup makes a lookup unable to say. (drop_after over a real socket is in
test_runsandbox.py; in process, the view's DropConnection is what the server acts on.)"""

from __future__ import annotations

import time

import pytest

from sandbox.errors import DropConnection
from sandbox.models import Effect, FaultRule, Refund, Return

from .conftest import SandboxApi, error_of

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}


def test_fail_before_answers_503_and_performs_nothing(api: SandboxApi) -> None:
    response = api.post("payments/refund", REFUND, key="k", fault="fail_before")

    assert response.status_code == 503
    assert error_of(response)["code"] == "unavailable"
    assert not Effect.objects.exists()
    assert not Refund.objects.exists()
    # Nothing was performed, so the same key later performs for real.
    assert api.post("payments/refund", REFUND, key="k").status_code == 201


def test_slow_acts_then_answers_late(api: SandboxApi) -> None:
    started = time.monotonic()
    response = api.post("payments/refund", REFUND, key="k", fault="slow:120")

    assert response.status_code == 201
    assert time.monotonic() - started >= 0.12
    assert Refund.objects.count() == 1


def test_drop_after_commits_the_effect_and_withholds_the_answer(api: SandboxApi) -> None:
    with pytest.raises(DropConnection):
        api.post("payments/refund", REFUND, key="k", fault="drop_after")

    effect = Effect.objects.get()
    assert effect.idempotency_key == "k"
    assert Refund.objects.count() == 1
    # The caller, having heard nothing, asks; then retries with the same key and gets the receipt.
    assert api.get("payments/lookup/k").json()["receipt"] == effect.receipt
    retry = api.post("payments/refund", REFUND, key="k")
    assert retry.status_code == 200
    assert retry.json() == effect.receipt


def test_drop_after_drops_refusals_too(api: SandboxApi) -> None:
    with pytest.raises(DropConnection):
        api.post("returns/cancel_pickup", {"label": "RL-NOPE"}, key="k", fault="drop_after")

    assert not Effect.objects.exists()


def test_unknown_lookup_is_refused_on_anything_but_a_lookup(api: SandboxApi) -> None:
    response = api.post("payments/refund", REFUND, key="k", fault="unknown_lookup")

    assert response.status_code == 400
    assert error_of(response)["field"] == "X-Sandbox-Fault"
    assert not Effect.objects.exists()


@pytest.mark.parametrize("fault", ["explode", "slow:", "slow:abc", "slow:60001", "drop_before"])
def test_an_unknown_fault_is_refused_before_acting(api: SandboxApi, fault: str) -> None:
    response = api.post("payments/refund", REFUND, key="k", fault=fault)

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_fault"
    assert not Effect.objects.exists()


# --- persistent rules -------------------------------------------------------------------------


def test_a_rule_applies_to_the_next_calls_then_expires(api: SandboxApi) -> None:
    created = api.post(
        "faults/", {"provider": "payments", "operation": "refund", "fault": "fail_before", "remaining": 2}
    )

    statuses = [api.post("payments/refund", REFUND, key=f"k{i}").status_code for i in range(3)]

    assert created.status_code == 201
    assert created.json()["remaining"] == 2
    assert statuses == [503, 503, 201]
    assert not FaultRule.objects.exists()
    assert Refund.objects.count() == 1


def test_a_rule_counts_down_and_is_listed(api: SandboxApi) -> None:
    api.post("faults/", {"provider": "returns", "fault": "slow:10", "remaining": 3})
    api.post("returns/start_return", {"order_id": "SU-1"}, key="k")

    rules = api.get("faults/").json()["rules"]

    assert [(r["provider"], r["operation"], r["fault"], r["remaining"]) for r in rules] == [
        ("returns", "", "slow:10", 2)
    ]


def test_a_rule_only_reaches_its_provider_and_operation(api: SandboxApi) -> None:
    api.post("faults/", {"provider": "payments", "operation": "reverse", "fault": "fail_before"})

    refund = api.post("payments/refund", REFUND, key="k")
    ret = api.post("returns/start_return", {"order_id": "SU-1"}, key="k")

    assert refund.status_code == ret.status_code == 201
    assert FaultRule.objects.get().remaining == 1


def test_a_rule_without_an_operation_reaches_every_operation_of_its_provider(api: SandboxApi) -> None:
    api.post("faults/", {"provider": "warehouse", "fault": "fail_before", "remaining": 2})

    assert api.get("warehouse/LDS-2/stock", sku="OAK-BENCH").status_code == 503
    assert api.get("warehouse/lookup/k").status_code == 503
    assert api.get("warehouse/LDS-2/stock", sku="OAK-BENCH").status_code == 200


def test_a_header_fault_overrides_rules_and_uses_none_of_them(api: SandboxApi) -> None:
    api.post("faults/", {"provider": "payments", "fault": "fail_before"})

    response = api.post("payments/refund", REFUND, key="k", fault="slow:1")

    assert response.status_code == 201
    assert FaultRule.objects.get().remaining == 1


def test_a_drop_after_rule(api: SandboxApi) -> None:
    api.post("faults/", {"provider": "returns", "operation": "start_return", "fault": "drop_after"})

    with pytest.raises(DropConnection):
        api.post("returns/start_return", {"order_id": "SU-1"}, key="k")

    assert Return.objects.count() == 1
    assert api.post("returns/start_return", {"order_id": "SU-1"}, key="k").status_code == 200


def test_an_unknown_lookup_rule_is_taken_only_by_lookups(api: SandboxApi) -> None:
    api.post("faults/", {"provider": "payments", "fault": "unknown_lookup"})

    refund = api.post("payments/refund", REFUND, key="k")
    first = api.get("payments/lookup/k").json()
    second = api.get("payments/lookup/k").json()

    assert refund.status_code == 201
    assert first["status"] == "unknown"
    assert second["status"] == "performed"


def test_key_conflict_answers_409_and_performs_nothing(api: SandboxApi) -> None:
    response = api.post("payments/refund", REFUND, key="k", fault="key_conflict")

    assert response.status_code == 409
    assert (error_of(response)["code"], error_of(response)["field"]) == (
        "idempotency_key_in_use",
        "Idempotency-Key",
    )
    assert not Effect.objects.exists()
    assert api.post("payments/refund", REFUND, key="k").status_code == 201


def test_a_key_conflict_rule_is_taken_only_by_calls(api: SandboxApi) -> None:
    api.post("faults/", {"provider": "payments", "fault": "key_conflict"})

    lookup = api.get("payments/lookup/k").json()
    refused = api.post("payments/refund", REFUND, key="k")
    refund = api.post("payments/refund", REFUND, key="k")

    assert lookup["status"] == "not_performed"
    assert (refused.status_code, refund.status_code) == (409, 201)
    assert (
        api.post(
            "faults/", {"provider": "payments", "operation": "lookup", "fault": "key_conflict"}
        ).status_code
        == 400
    )


def test_delete_clears_every_rule(api: SandboxApi) -> None:
    api.post("faults/", {"provider": "payments", "fault": "fail_before", "remaining": 5})
    api.post("faults/", {"provider": "email", "fault": "drop_after"})

    response = api.delete("faults/")

    assert response.status_code == 200
    assert response.json() == {"deleted": 2}
    assert not FaultRule.objects.exists()
    assert api.post("payments/refund", REFUND, key="k").status_code == 201


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"provider": "bank", "fault": "fail_before"}, "provider"),
        ({"provider": "payments", "operation": "charge", "fault": "fail_before"}, "operation"),
        ({"provider": "payments", "fault": "explode"}, "fault"),
        ({"provider": "payments", "operation": "refund", "fault": "unknown_lookup"}, "fault"),
        ({"provider": "payments", "fault": "fail_before", "remaining": 0}, "remaining"),
        ({"provider": "payments"}, "fault"),
        ({"provider": "payments", "fault": "fail_before", "when": "now"}, "when"),
    ],
)
def test_an_invalid_rule_is_refused(api: SandboxApi, rule: dict[str, object], field: str) -> None:
    response = api.post("faults/", rule)

    assert response.status_code == 400
    assert error_of(response)["field"] == field
    assert not FaultRule.objects.exists()
