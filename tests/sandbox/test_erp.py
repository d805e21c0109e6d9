"""The legacy ERP ignores idempotency keys: a repeat books a second adjustment. Callers find
what happened by the business reference they sent."""

from __future__ import annotations

import pytest

from sandbox.models import Effect, StockAdjustment

from .conftest import SandboxApi

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"sku": "OAK-BENCH", "qty": -1, "reference": "T-40912"}


def test_the_erp_performs_a_repeat_again_even_with_the_same_key(api: SandboxApi) -> None:
    first = api.post("erp/adjust_stock", BODY, key="same")
    again = api.post("erp/adjust_stock", BODY, key="same")

    assert first.status_code == again.status_code == 201
    assert "Idempotent-Replayed" not in again.headers
    assert first.json()["adjustment_id"] != again.json()["adjustment_id"]
    assert first.json() == {**BODY, "adjustment_id": first.json()["adjustment_id"]}
    assert StockAdjustment.objects.count() == 2
    assert list(Effect.objects.values_list("provider", "idempotency_key")) == [("erp", ""), ("erp", "")]


def test_the_erp_needs_no_key(api: SandboxApi) -> None:
    assert api.post("erp/adjust_stock", BODY).status_code == 201


def test_adjustments_are_found_by_business_reference_oldest_first_with_when_they_were_booked(
    api: SandboxApi,
) -> None:
    first = api.post("erp/adjust_stock", BODY).json()
    second = api.post("erp/adjust_stock", {**BODY, "qty": 3}).json()
    api.post("erp/adjust_stock", {**BODY, "reference": "T-99999"})

    found = api.get("erp/adjustments", reference="T-40912")
    none = api.get("erp/adjustments", reference="T-00000")

    assert found.status_code == 200
    booked = {e.receipt["adjustment_id"]: e.created_at for e in Effect.objects.filter(provider="erp")}
    assert found.json() == {
        "adjustments": [
            {**receipt, "booked_at": booked[receipt["adjustment_id"]].isoformat()}
            for receipt in (first, second)
        ]
    }
    assert none.json() == {"adjustments": []}


def test_the_erp_has_no_lookup_by_key(api: SandboxApi) -> None:
    assert api.get("erp/lookup/anything").status_code == 404


def test_the_search_needs_a_reference(api: SandboxApi) -> None:
    response = api.get("erp/adjustments")

    assert response.status_code == 400
    assert response.json()["error"]["field"] == "reference"


def test_a_zero_adjustment_is_refused(api: SandboxApi) -> None:
    response = api.post("erp/adjust_stock", {**BODY, "qty": 0})

    assert response.status_code == 400
    assert response.json()["error"]["field"] == "qty"
    assert not StockAdjustment.objects.exists()
