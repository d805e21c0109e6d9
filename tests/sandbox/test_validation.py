"""Requests the providers refuse: 400 for a malformed body (naming the field), 404 for unknown
ids and endpoints, 405 for the wrong method — each with the JSON error body, and nothing
written."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.models import Effect

from .conftest import SandboxApi, error_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("payments/refund", {"order_id": "SU-1", "amount": "-1.00", "currency": "USD"}, "amount"),
        ("payments/refund", {"order_id": "SU-1", "amount": "1.001", "currency": "USD"}, "amount"),
        ("payments/refund", {"order_id": "SU-1", "amount": "lots", "currency": "USD"}, "amount"),
        ("payments/refund", {"order_id": "SU-1", "amount": "1.00", "currency": "dollars"}, "currency"),
        ("payments/refund", {"order_id": "SU-1", "amount": "1.00"}, "currency"),
        ("returns/start_return", {"order_id": ""}, "order_id"),
        ("returns/start_return", {"order_id": 17}, "order_id"),
        ("returns/start_return", {"order_id": "SU-1", "rush": True}, "rush"),
        ("warehouse/reserve", {"order_id": "SU-1", "sku": "OAK-BENCH", "qty": 0}, "qty"),
        ("warehouse/reserve", {"order_id": "SU-1", "sku": "OAK-BENCH", "qty": "2"}, "qty"),
        ("warehouse/reserve", {"order_id": "SU-1", "sku": "OAK-BENCH", "qty": True}, "qty"),
        ("shipping/reship", {"order_id": "SU-1", "sku": "S", "qty": 1001}, "qty"),
        ("email/notify_seller", {"order_id": "SU-1"}, "template"),
    ],
)
def test_an_invalid_field_is_400_naming_it(
    api: SandboxApi, path: str, body: dict[str, Any], field: str
) -> None:
    response = api.post(path, body, key="k")

    assert response.status_code == 400
    assert error_of(response)["field"] == field
    assert not Effect.objects.exists()


@pytest.mark.parametrize("body", ["not json", "[1, 2]", ""])
def test_a_body_that_is_not_a_json_object_is_400(api: SandboxApi, body: str) -> None:
    response = api.post("returns/start_return", body, key="k")

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_json"


def test_the_wrong_method_is_405(api: SandboxApi) -> None:
    response = api.get("returns/start_return")

    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert error_of(response)["code"] == "method_not_allowed"


def test_an_unknown_endpoint_is_a_json_404(api: SandboxApi) -> None:
    response = api.get("bank/withdraw")

    assert response.status_code == 404
    assert error_of(response)["code"] == "unknown_endpoint"


def test_every_answer_carries_a_request_id(api: SandboxApi) -> None:
    ok = api.post("returns/start_return", {"order_id": "SU-1"}, key="k")
    refused = api.post("returns/start_return", {"order_id": ""}, key="k2")

    assert ok.headers["X-Request-Id"].startswith("sbx_")
    assert refused.headers["X-Request-Id"].startswith("sbx_")


def test_an_overlong_key_is_refused(api: SandboxApi) -> None:
    response = api.post("returns/start_return", {"order_id": "SU-1"}, key="k" * 256)

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_idempotency_key"
