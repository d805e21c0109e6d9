"""Seeded reads: order statuses, and warehouse stock that is slow or missing per warehouse —
deterministically, so a test can rely on which read fails."""

from __future__ import annotations

import time

import pytest

from sandbox.models import Warehouse

from .conftest import SandboxApi, error_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_order_status_reads_the_seeded_order(api: SandboxApi) -> None:
    response = api.get("orders/SU-90502/status")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"order_id", "status", "carrier", "eta"}
    assert (body["order_id"], body["status"], body["carrier"]) == ("SU-90502", "shipped", "Royal Mail")


def test_an_unknown_order_is_404(api: SandboxApi) -> None:
    response = api.get("orders/SU-00000/status")

    assert response.status_code == 404
    assert error_of(response)["code"] == "unknown_order"


def test_stock_of_a_warehouse(api: SandboxApi) -> None:
    response = api.get("warehouse/LDS-2/stock", sku="OAK-BENCH")
    unstocked = api.get("warehouse/LDS-2/stock", sku="NEVER-HEARD")
    restocking = api.get("warehouse/BRS-3/stock", sku="OAK-BENCH")

    assert response.json() == {
        "warehouse": "LDS-2",
        "sku": "OAK-BENCH",
        "available": 12,
        "restock_date": None,
    }
    assert unstocked.json()["available"] == 0
    assert restocking.json()["available"] == 0
    assert restocking.json()["restock_date"] is not None


def test_one_warehouse_fails_every_other_read(api: SandboxApi) -> None:
    responses = [api.get("warehouse/MAN-1/stock", sku="OAK-BENCH") for _ in range(4)]

    assert [r.status_code for r in responses] == [200, 503, 200, 503]
    assert error_of(responses[1])["code"] == "warehouse_unavailable"
    assert [api.get("warehouse/LDS-2/stock", sku="OAK-BENCH").status_code for _ in range(3)] == [200] * 3


def test_one_warehouse_is_slow(api: SandboxApi) -> None:
    started = time.monotonic()
    response = api.get("warehouse/BRS-3/stock", sku="SKU-4471")
    elapsed = time.monotonic() - started

    assert response.status_code == 200
    assert 0.25 <= elapsed < 2


def test_a_warehouse_can_be_reconfigured(api: SandboxApi) -> None:
    configured = api.post(
        "warehouse/LDS-2/configure", {"latency_ms": 0, "fail_every": 1, "stock": {"NEW-SKU": 7}}
    )
    failing = api.get("warehouse/LDS-2/stock", sku="NEW-SKU")
    api.post("warehouse/LDS-2/configure", {"fail_every": 0})
    read = api.get("warehouse/LDS-2/stock", sku="NEW-SKU")

    assert configured.json() == {"warehouse": "LDS-2", "latency_ms": 0, "fail_every": 1}
    assert failing.status_code == 503
    assert error_of(failing)["code"] == "warehouse_unavailable"
    assert read.json()["available"] == 7
    assert Warehouse.objects.get(code="LDS-2").fail_every == 0


def test_an_unknown_warehouse_is_404_and_a_missing_sku_400(api: SandboxApi) -> None:
    unknown = api.get("warehouse/XYZ-9/stock", sku="OAK-BENCH")
    no_sku = api.get("warehouse/LDS-2/stock")

    assert unknown.status_code == 404
    assert error_of(unknown)["code"] == "unknown_warehouse"
    assert no_sku.status_code == 400
    assert error_of(no_sku)["field"] == "sku"


def test_a_fault_can_make_any_read_slow(api: SandboxApi) -> None:
    started = time.monotonic()
    response = api.get("warehouse/LDS-2/stock", sku="OAK-BENCH", fault="slow:150")

    assert response.status_code == 200
    assert time.monotonic() - started >= 0.15
