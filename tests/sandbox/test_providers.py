"""Each provider's writes and undos over the HTTP contract: performed once, replayed by key,
refused when a key comes back with different parameters, and recorded in the ledger with the
provider's own state changed in the same transaction."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from sandbox.models import (
    CreditMemo,
    Effect,
    Refund,
    Reservation,
    Return,
    SentEmail,
    Shipment,
    WarehouseStock,
)

from .conftest import SandboxApi, error_of

pytestmark = pytest.mark.django_db(transaction=True)

# (path, body, the same call with different parameters, state model, receipt fields)
WRITES: list[tuple[str, dict[str, Any], dict[str, Any], Any, set[str]]] = [
    (
        "returns/start_return",
        {"order_id": "SU-90317"},
        {"order_id": "SU-88410"},
        Return,
        {"return_id", "label", "pickup_date"},
    ),
    (
        "warehouse/reserve",
        {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 1},
        {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 2},
        Reservation,
        {"reservation_id", "warehouse"},
    ),
    (
        "payments/refund",
        {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"},
        {"order_id": "SU-90317", "amount": "15.95", "currency": "USD"},
        Refund,
        {"refund_id", "amount", "currency"},
    ),
    (
        "accounting/credit",
        {"order_id": "SU-88410", "amount": "412.00"},
        {"order_id": "SU-88410", "amount": "400.00"},
        CreditMemo,
        {"credit_memo_id", "amount"},
    ),
    (
        "shipping/reship",
        {"order_id": "SU-88410", "sku": "SKU-4471", "qty": 4},
        {"order_id": "SU-88410", "sku": "SKU-4471", "qty": 3},
        Shipment,
        {"shipment_id", "recall_cutoff"},
    ),
    (
        "email/notify_seller",
        {"order_id": "SU-90317", "template": "return_started"},
        {"order_id": "SU-90317", "template": "refund_issued"},
        SentEmail,
        {"message_id"},
    ),
    (
        "email/notify_customer",
        {"order_id": "SU-90317", "template": "return_started"},
        {"order_id": "SU-88410", "template": "return_started"},
        SentEmail,
        {"message_id"},
    ),
]
WRITE_IDS = [path for path, *_ in WRITES]


@pytest.mark.parametrize(("path", "body", "other", "model", "fields"), WRITES, ids=WRITE_IDS)
def test_a_keyed_write_performs_once_and_a_repeat_replays_the_original_receipt(
    api: SandboxApi, path: str, body: dict[str, Any], other: dict[str, Any], model: Any, fields: set[str]
) -> None:
    first = api.post(path, body, key="key-1")
    again = api.post(path, body, key="key-1")

    assert first.status_code == 201
    assert set(first.json()) == fields
    assert "Idempotent-Replayed" not in first.headers
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    provider, operation = path.split("/")
    effect = Effect.objects.get()
    assert (effect.provider, effect.operation, effect.idempotency_key) == (provider, operation, "key-1")
    assert effect.receipt == first.json()
    assert effect.business_ref == body["order_id"]
    assert effect.undoes is None
    assert model.objects.count() == 1


@pytest.mark.parametrize(("path", "body", "other", "model", "fields"), WRITES, ids=WRITE_IDS)
def test_the_same_key_with_different_parameters_is_a_conflict_and_performs_nothing(
    api: SandboxApi, path: str, body: dict[str, Any], other: dict[str, Any], model: Any, fields: set[str]
) -> None:
    api.post(path, body, key="key-1")

    response = api.post(path, other, key="key-1")

    assert response.status_code == 409
    assert error_of(response) == {
        "code": "idempotency_key_mismatch",
        "message": "this Idempotency-Key was already used with different parameters",
        "field": "Idempotency-Key",
    }
    assert Effect.objects.count() == 1
    assert model.objects.count() == 1


@pytest.mark.parametrize(("path", "body", "other", "model", "fields"), WRITES, ids=WRITE_IDS)
def test_a_write_without_an_idempotency_key_is_refused(
    api: SandboxApi, path: str, body: dict[str, Any], other: dict[str, Any], model: Any, fields: set[str]
) -> None:
    response = api.post(path, body)

    assert response.status_code == 400
    assert error_of(response)["field"] == "Idempotency-Key"
    assert not Effect.objects.exists()
    assert not model.objects.exists()


def test_different_keys_perform_twice(api: SandboxApi) -> None:
    a = api.post("payments/refund", {"order_id": "SU-1", "amount": "5.00", "currency": "GBP"}, key="a")
    b = api.post("payments/refund", {"order_id": "SU-1", "amount": "5.00", "currency": "GBP"}, key="b")

    assert a.status_code == b.status_code == 201
    assert a.json()["refund_id"] != b.json()["refund_id"]
    assert Refund.objects.count() == 2


def test_a_key_names_one_effect_per_provider_so_reusing_it_on_another_operation_is_a_conflict(
    api: SandboxApi,
) -> None:
    api.post("email/notify_seller", {"order_id": "SU-1", "template": "t"}, key="k")

    response = api.post("email/notify_customer", {"order_id": "SU-1", "template": "t"}, key="k")
    elsewhere = api.post("returns/start_return", {"order_id": "SU-1"}, key="k")

    assert response.status_code == 409
    assert error_of(response)["code"] == "idempotency_key_reused"
    assert elsewhere.status_code == 201  # keys are per provider
    assert SentEmail.objects.count() == 1


def test_amounts_are_normalised_so_a_repeat_written_differently_is_still_a_replay(api: SandboxApi) -> None:
    first = api.post("payments/refund", {"order_id": "SU-1", "amount": "14.9", "currency": "USD"}, key="k")
    again = api.post("payments/refund", {"order_id": "SU-1", "amount": 14.90, "currency": "USD"}, key="k")

    assert first.json()["amount"] == "14.90"
    assert again.status_code == 200
    assert Refund.objects.get().amount == Decimal("14.90")


# --- undo operations -------------------------------------------------------------------------

# (write path, body, id field of the receipt, undo path, undo receipt besides the id, state model)
UNDOS: list[tuple[str, dict[str, Any], str, str, dict[str, Any], Any]] = [
    (
        "returns/start_return",
        {"order_id": "SU-90317"},
        "label",
        "returns/cancel_pickup",
        {"status": "cancelled"},
        Return,
    ),
    (
        "warehouse/reserve",
        {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 2},
        "reservation_id",
        "warehouse/release",
        {"status": "released"},
        Reservation,
    ),
    (
        "payments/refund",
        {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"},
        "refund_id",
        "payments/reverse",
        {"status": "reversed"},
        Refund,
    ),
    (
        "accounting/credit",
        {"order_id": "SU-88410", "amount": "412.00"},
        "credit_memo_id",
        "accounting/reverse_credit",
        {"status": "reversed"},
        CreditMemo,
    ),
    (
        "shipping/reship",
        {"order_id": "SU-88410", "sku": "SKU-4471", "qty": 4},
        "shipment_id",
        "shipping/cancel",
        {"status": "cancelled"},
        Shipment,
    ),
]
UNDO_IDS = [undo for _, _, _, undo, _, _ in UNDOS]


@pytest.mark.parametrize(("write", "body", "id_field", "undo", "expected", "model"), UNDOS, ids=UNDO_IDS)
def test_an_undo_is_a_keyed_effect_that_names_the_effect_it_undid(
    api: SandboxApi,
    write: str,
    body: dict[str, Any],
    id_field: str,
    undo: str,
    expected: dict[str, Any],
    model: Any,
) -> None:
    thing = api.post(write, body, key="do").json()[id_field]

    undone = api.post(undo, {id_field: thing}, key="undo")
    replayed = api.post(undo, {id_field: thing}, key="undo")
    mismatch = api.post(undo, {id_field: "other"}, key="undo")

    assert undone.status_code == 201
    receipt = undone.json()
    assert receipt[id_field] == thing
    assert {k: receipt[k] for k in expected} == expected
    assert replayed.status_code == 200
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert replayed.json() == receipt
    assert mismatch.status_code == 409
    original = Effect.objects.get(idempotency_key="do")
    undo_effect = Effect.objects.get(idempotency_key="undo")
    assert undo_effect.undoes == original
    assert undo_effect.business_ref == thing
    assert undo_effect.receipt == receipt
    assert Effect.objects.count() == 2


@pytest.mark.parametrize(("write", "body", "id_field", "undo", "expected", "model"), UNDOS, ids=UNDO_IDS)
def test_undoing_twice_under_a_new_key_is_a_conflict(
    api: SandboxApi,
    write: str,
    body: dict[str, Any],
    id_field: str,
    undo: str,
    expected: dict[str, Any],
    model: Any,
) -> None:
    thing = api.post(write, body, key="do").json()[id_field]
    api.post(undo, {id_field: thing}, key="undo-1")

    response = api.post(undo, {id_field: thing}, key="undo-2")

    assert response.status_code == 409
    assert error_of(response)["code"].startswith("already_")
    assert error_of(response)["field"] == id_field
    assert Effect.objects.count() == 2


@pytest.mark.parametrize(("write", "body", "id_field", "undo", "expected", "model"), UNDOS, ids=UNDO_IDS)
def test_undoing_an_unknown_id_is_404_and_records_nothing(
    api: SandboxApi,
    write: str,
    body: dict[str, Any],
    id_field: str,
    undo: str,
    expected: dict[str, Any],
    model: Any,
) -> None:
    response = api.post(undo, {id_field: "NOPE-1"}, key="undo")

    assert response.status_code == 404
    assert error_of(response)["field"] == id_field
    assert not Effect.objects.exists()


def test_pickup_cancel_marks_the_return_cancelled(api: SandboxApi) -> None:
    label = api.post("returns/start_return", {"order_id": "SU-90317"}, key="do").json()["label"]

    api.post("returns/cancel_pickup", {"label": label}, key="undo")

    ret = Return.objects.get()
    assert ret.cancelled and not ret.collected


def test_a_reservation_takes_stock_from_the_fullest_warehouse_and_a_release_gives_it_back(
    api: SandboxApi,
) -> None:
    receipt = api.post(
        "warehouse/reserve", {"order_id": "SU-1", "sku": "OAK-BENCH", "qty": 2}, key="r"
    ).json()
    assert receipt["warehouse"] == "LDS-2"
    assert WarehouseStock.objects.get(warehouse__code="LDS-2", sku="OAK-BENCH").available == 10

    api.post("warehouse/release", {"reservation_id": receipt["reservation_id"]}, key="u")

    assert WarehouseStock.objects.get(warehouse__code="LDS-2", sku="OAK-BENCH").available == 12
    assert Reservation.objects.get().released


def test_reserving_more_than_any_warehouse_has_is_a_conflict(api: SandboxApi) -> None:
    response = api.post("warehouse/reserve", {"order_id": "SU-1", "sku": "OAK-BENCH", "qty": 13}, key="r")

    assert response.status_code == 409
    assert error_of(response) == {
        "code": "insufficient_stock",
        "message": "no warehouse has 13 x OAK-BENCH free",
        "field": "qty",
    }
    assert not Effect.objects.exists()
    assert WarehouseStock.objects.get(warehouse__code="LDS-2", sku="OAK-BENCH").available == 12


def test_refund_reversal_carries_a_reversal_id(api: SandboxApi) -> None:
    refund_id = api.post(
        "payments/refund", {"order_id": "SU-1", "amount": "1.00", "currency": "EUR"}, key="k"
    ).json()["refund_id"]

    receipt = api.post("payments/reverse", {"refund_id": refund_id}, key="u").json()

    assert receipt["reversal_id"].startswith("rev_")
    refund = Refund.objects.get()
    assert refund.reversed and refund.reversal_id == receipt["reversal_id"]


def test_email_cannot_be_unsent(api: SandboxApi) -> None:
    api.post("email/notify_customer", {"order_id": "SU-1", "template": "t"}, key="k")

    response = api.post("email/unsend", {"order_id": "SU-1"}, key="u")

    assert response.status_code == 404
    assert error_of(response)["code"] == "unknown_endpoint"
    assert SentEmail.objects.count() == 1


def test_receipts_use_the_providers_id_formats(api: SandboxApi) -> None:
    ret = api.post("returns/start_return", {"order_id": "SU-1"}, key="1").json()
    rsv = api.post("warehouse/reserve", {"order_id": "SU-1", "sku": "SKU-1001", "qty": 1}, key="2").json()
    ref = api.post(
        "payments/refund", {"order_id": "SU-1", "amount": "1.00", "currency": "USD"}, key="3"
    ).json()
    memo = api.post("accounting/credit", {"order_id": "SU-1", "amount": "1.00"}, key="4").json()
    ship = api.post("shipping/reship", {"order_id": "SU-1", "sku": "X", "qty": 1}, key="5").json()

    assert ret["label"].startswith("RL-") and ret["return_id"].startswith("RET-")
    assert rsv["reservation_id"].startswith("RSV-")
    assert ref["refund_id"].startswith("re_")
    assert memo["credit_memo_id"].startswith("CM-")
    assert ship["shipment_id"].startswith("SH-")
