"""Lookups for reconciliation: `<provider>/lookup/<key>` says whether the provider performed the
call made with that key (and its receipt), did not, or — under the unknown_lookup fault — cannot
say."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import SandboxApi

pytestmark = pytest.mark.django_db(transaction=True)

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("returns/start_return", {"order_id": "SU-90317"}),
    ("warehouse/reserve", {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 1}),
    ("payments/refund", {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}),
    ("accounting/credit", {"order_id": "SU-88410", "amount": "412.00"}),
    ("shipping/reship", {"order_id": "SU-88410", "sku": "SKU-4471", "qty": 4}),
    ("email/notify_seller", {"order_id": "SU-90317", "template": "return_started"}),
]


@pytest.mark.parametrize(("path", "body"), CALLS, ids=[path for path, _ in CALLS])
def test_a_lookup_says_performed_with_the_receipt_or_not_performed(
    api: SandboxApi, path: str, body: dict[str, Any]
) -> None:
    provider, operation = path.split("/")
    receipt = api.post(path, body, key="k-1").json()

    performed = api.get(f"{provider}/lookup/k-1")
    not_performed = api.get(f"{provider}/lookup/k-2")

    assert performed.status_code == 200
    assert performed.json()["status"] == "performed"
    assert performed.json()["receipt"] == receipt
    assert performed.json()["operation"] == operation
    assert not_performed.json() == {"status": "not_performed"}


def test_a_lookup_finds_undo_operations_too(api: SandboxApi) -> None:
    label = api.post("returns/start_return", {"order_id": "SU-1"}, key="start").json()["label"]
    api.post("returns/cancel_pickup", {"label": label}, key="cancel")

    found = api.get("returns/lookup/cancel").json()

    assert found["operation"] == "cancel_pickup"
    assert found["receipt"] == {"label": label, "status": "cancelled"}


def test_a_failed_call_is_not_performed(api: SandboxApi) -> None:
    api.post("returns/cancel_pickup", {"label": "RL-NOPE"}, key="k")
    api.post(
        "payments/refund",
        {"order_id": "SU-1", "amount": "1.00", "currency": "USD"},
        key="f",
        fault="fail_before",
    )

    assert api.get("returns/lookup/k").json() == {"status": "not_performed"}
    assert api.get("payments/lookup/f").json() == {"status": "not_performed"}


def test_keys_are_per_provider(api: SandboxApi) -> None:
    api.post("returns/start_return", {"order_id": "SU-1"}, key="k")

    assert api.get("payments/lookup/k").json() == {"status": "not_performed"}


def test_under_unknown_lookup_a_lookup_cannot_say(api: SandboxApi) -> None:
    api.post("payments/refund", {"order_id": "SU-1", "amount": "1.00", "currency": "USD"}, key="k")

    response = api.get("payments/lookup/k", fault="unknown_lookup")

    assert response.status_code == 200
    assert response.json()["status"] == "unknown"
    assert response.json()["reason"]
    assert api.get("payments/lookup/k").json()["status"] == "performed"
