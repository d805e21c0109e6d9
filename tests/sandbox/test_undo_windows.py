"""Undos that only work for a while: a pickup can be cancelled until the courier collects the
parcel; a shipment can be cancelled free until its recall cutoff, and after it only recalled, at
a fee."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from sandbox.models import Effect, Return, Shipment, ShipmentStatus

from .conftest import SandboxApi, error_of

pytestmark = pytest.mark.django_db(transaction=True)


def _start_return(api: SandboxApi) -> str:
    label: str = api.post("returns/start_return", {"order_id": "SU-90317"}, key="start").json()["label"]
    return label


def test_a_pickup_can_be_cancelled_before_the_courier_collects(api: SandboxApi) -> None:
    label = _start_return(api)

    response = api.post("returns/cancel_pickup", {"label": label}, key="cancel")

    assert response.status_code == 201
    assert response.json() == {"label": label, "status": "cancelled"}


def test_a_pickup_cannot_be_cancelled_once_collected(api: SandboxApi) -> None:
    label = _start_return(api)
    collected = api.post("returns/collect", {"label": label})

    response = api.post("returns/cancel_pickup", {"label": label}, key="cancel")

    assert collected.status_code == 200
    assert collected.json()["status"] == "collected"
    assert response.status_code == 409
    error = error_of(response)
    assert error["code"] == "already_collected"
    assert error["field"] == "label"
    assert label in error["message"]
    ret = Return.objects.get()
    assert ret.collected and not ret.cancelled
    assert list(Effect.objects.values_list("operation", flat=True)) == ["start_return"]


def test_collecting_twice_changes_nothing_and_a_cancelled_pickup_cannot_be_collected(api: SandboxApi) -> None:
    label = _start_return(api)
    first = api.post("returns/collect", {"label": label}).json()
    again = api.post("returns/collect", {"label": label}).json()
    assert first == again

    other = api.post("returns/start_return", {"order_id": "SU-88410"}, key="start-2").json()["label"]
    api.post("returns/cancel_pickup", {"label": other}, key="cancel-2")
    response = api.post("returns/collect", {"label": other})

    assert response.status_code == 409
    assert error_of(response)["code"] == "pickup_cancelled"


def _reship(api: SandboxApi) -> dict[str, str]:
    receipt: dict[str, str] = api.post(
        "shipping/reship", {"order_id": "SU-88410", "sku": "SKU-4471", "qty": 4}, key="reship"
    ).json()
    return receipt


def test_a_shipment_cancelled_before_its_recall_cutoff_is_cancelled_free(api: SandboxApi) -> None:
    receipt = _reship(api)
    cutoff = datetime.fromisoformat(receipt["recall_cutoff"])
    assert cutoff > timezone.now() + timedelta(minutes=30)

    response = api.post("shipping/cancel", {"shipment_id": receipt["shipment_id"]}, key="cancel")

    assert response.status_code == 201
    assert response.json() == {"shipment_id": receipt["shipment_id"], "status": "cancelled"}
    shipment = Shipment.objects.get()
    assert shipment.status == ShipmentStatus.CANCELLED
    assert shipment.recall_fee is None


def test_a_shipment_cancelled_after_its_recall_cutoff_is_only_recalled_at_a_fee(api: SandboxApi) -> None:
    receipt = _reship(api)
    advanced = api.post("shipping/advance", {"shipment_id": receipt["shipment_id"]})

    response = api.post("shipping/cancel", {"shipment_id": receipt["shipment_id"]}, key="cancel")

    assert advanced.status_code == 200
    assert datetime.fromisoformat(advanced.json()["recall_cutoff"]) <= timezone.now()
    assert response.status_code == 201
    assert response.json() == {
        "shipment_id": receipt["shipment_id"],
        "status": "recalled",
        "recall_fee": "7.50",
        "currency": "GBP",
    }
    shipment = Shipment.objects.get()
    assert shipment.status == ShipmentStatus.RECALLED
    assert shipment.recall_fee == Decimal("7.50")
    undo = Effect.objects.get(operation="cancel")
    assert undo.undoes == Effect.objects.get(operation="reship")


def test_controls_answer_404_for_unknown_ids(api: SandboxApi) -> None:
    assert api.post("returns/collect", {"label": "RL-NOPE"}).status_code == 404
    assert api.post("shipping/advance", {"shipment_id": "SH-NOPE"}).status_code == 404
