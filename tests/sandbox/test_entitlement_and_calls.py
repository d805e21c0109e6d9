"""The entitlement read (which remedies an order's contract allows, and by when the buyer needs
the goods) and the log of every call a provider answered — reads included, which the ledger of
effects does not show."""

from __future__ import annotations

import json

import pytest

from sandbox.models import Call

from .conftest import SandboxApi, error_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_entitlement_of_a_seeded_order(api: SandboxApi) -> None:
    response = api.get("orders/SU-88410/entitlement")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"order_id", "remedies", "need_by", "clause"}
    assert body["remedies"] == ["credit", "reship"]
    assert body["need_by"] is not None


def test_an_unknown_order_has_no_entitlement(api: SandboxApi) -> None:
    response = api.get("orders/SU-00000/entitlement")

    assert response.status_code == 404
    assert error_of(response)["code"] == "unknown_order"


def test_an_entitlement_can_be_reconfigured(api: SandboxApi) -> None:
    changed = api.post("orders/SU-88410/entitlement/configure", {"remedies": ["credit"], "need_by": None})
    refused = api.post("orders/SU-88410/entitlement/configure", {"remedies": ["teleport"]})

    assert changed.status_code == 200
    assert api.get("orders/SU-88410/entitlement").json() | {"clause": ""} == {
        "order_id": "SU-88410",
        "remedies": ["credit"],
        "need_by": None,
        "clause": "",
    }
    assert refused.status_code == 400 and error_of(refused)["field"] == "remedies"


def test_faults_reach_the_entitlement_read(api: SandboxApi) -> None:
    assert api.get("orders/SU-88410/entitlement", fault="fail_before").status_code == 503


def test_every_provider_call_is_logged_with_its_answer(api: SandboxApi) -> None:
    api.get("warehouse/MAN-1/stock", sku="OAK-BENCH")
    api.get("warehouse/MAN-1/stock", sku="OAK-BENCH")  # every second read fails
    api.get("orders/SU-88410/entitlement", fault="slow:20")
    api.post("payments/refund", {"order_id": "SU-90317", "amount": "1.00", "currency": "USD"}, key="k-1")

    response = api.get("calls/", operation="stock", target="MAN-1")
    logged = [(c.operation, c.target, c.status, c.fault) for c in Call.objects.order_by("at", "id")]

    assert logged == [
        ("stock", "MAN-1", 200, ""),
        ("stock", "MAN-1", 503, ""),
        ("entitlement", "SU-88410", 200, "slow:20"),
        ("refund", "", 201, ""),
    ]
    assert Call.objects.get(operation="entitlement").duration_ms >= 20
    calls = response.json()["calls"]
    assert [c["status"] for c in calls] == [503, 200]  # newest first
    assert set(calls[0]) == {
        "id",
        "provider",
        "operation",
        "target",
        "method",
        "status",
        "fault",
        "duration_ms",
        "at",
    }
    assert json.dumps(calls)  # plain JSON
