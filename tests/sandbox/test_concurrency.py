"""Identical requests at the same moment, each thread on its own database connection: one
effect, and every other request answered from it. The second of two concurrent inserts of a key
waits on the first, fails the unique constraint, and replays the winner."""

from __future__ import annotations

import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection

from sandbox import ledger, seeded_world, services
from sandbox.errors import Conflict
from sandbox.models import Effect, Refund, Reservation, WarehouseStock

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8


def _at_once[T](call: Callable[[], T], n: int = THREADS) -> tuple[list[T], list[BaseException]]:
    """Run `call` in n threads released together; each thread uses, then closes, its own
    connection."""
    barrier = threading.Barrier(n)
    results: list[T] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run() -> None:
        try:
            barrier.wait()
            result = call()
            with lock:
                results.append(result)
        except BaseException as exc:
            with lock:
                errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results, errors


def test_identical_writes_at_once_perform_one_effect() -> None:
    outcomes, errors = _at_once(
        lambda: services.refund_create(
            order_id="SU-90317", amount=Decimal("14.95"), currency="USD", idempotency_key="same"
        )
    )

    assert errors == []
    assert len(outcomes) == THREADS
    assert sum(not o.replayed for o in outcomes) == 1
    assert len({o.effect.pk for o in outcomes}) == 1
    assert len({o.receipt["refund_id"] for o in outcomes}) == 1
    assert Effect.objects.count() == 1
    assert Refund.objects.count() == 1


def test_identical_undos_at_once_perform_one_undo_and_no_conflict() -> None:
    reservation_id = services.reservation_create(
        order_id="SU-1", sku="OAK-BENCH", qty=2, idempotency_key="reserve"
    ).receipt["reservation_id"]

    outcomes, errors = _at_once(
        lambda: services.reservation_release(reservation_id=reservation_id, idempotency_key="release")
    )

    assert errors == []
    assert sum(not o.replayed for o in outcomes) == 1
    assert Effect.objects.filter(operation="release").count() == 1
    assert WarehouseStock.objects.get(warehouse__code="LDS-2", sku="OAK-BENCH").available == 12


def test_undos_at_once_under_different_keys_undo_once_and_the_rest_conflict() -> None:
    reservation_id = services.reservation_create(
        order_id="SU-1", sku="OAK-BENCH", qty=2, idempotency_key="reserve"
    ).receipt["reservation_id"]
    keys = iter(range(THREADS))
    key_lock = threading.Lock()

    def release() -> Any:
        with key_lock:
            key = f"release-{next(keys)}"
        return services.reservation_release(reservation_id=reservation_id, idempotency_key=key)

    outcomes, errors = _at_once(release)

    assert len(outcomes) == 1
    assert len(errors) == THREADS - 1
    assert all(isinstance(e, Conflict) and e.code == "already_released" for e in errors)
    assert WarehouseStock.objects.get(warehouse__code="LDS-2", sku="OAK-BENCH").available == 12


def test_reservations_at_once_never_oversell() -> None:
    seeded_world.warehouse_configure(code="LDS-2", stock={"RARE-1": 5})
    counter = iter(range(THREADS))
    lock = threading.Lock()

    def reserve() -> Any:
        with lock:
            key = f"r-{next(counter)}"
        return services.reservation_create(order_id="SU-1", sku="RARE-1", qty=1, idempotency_key=key)

    outcomes, errors = _at_once(reserve)

    assert len(outcomes) == 5
    assert all(isinstance(e, Conflict) and e.code == "insufficient_stock" for e in errors)
    assert WarehouseStock.objects.get(warehouse__code="LDS-2", sku="RARE-1").available == 0
    assert Reservation.objects.count() == 5


def test_losing_the_insert_race_replays_the_winner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The path a concurrent twin takes, made deterministic: the key is already taken when the
    insert runs, though it was not when checked."""
    first = services.refund_create(
        order_id="SU-1", amount=Decimal("5.00"), currency="USD", idempotency_key="k"
    )
    real = ledger._earlier_effect
    checks: list[int] = []

    def missed_the_first_time(**kwargs: Any) -> Effect | None:
        checks.append(1)
        return None if len(checks) % 2 == 1 else real(**kwargs)

    monkeypatch.setattr(ledger, "_earlier_effect", missed_the_first_time)

    replay = services.refund_create(
        order_id="SU-1", amount=Decimal("5.00"), currency="USD", idempotency_key="k"
    )
    with pytest.raises(Conflict) as mismatch:
        services.refund_create(order_id="SU-1", amount=Decimal("6.00"), currency="USD", idempotency_key="k")

    assert replay.replayed and replay.effect.pk == first.effect.pk
    assert mismatch.value.code == "idempotency_key_mismatch"
    assert Refund.objects.count() == 1
    assert Effect.objects.count() == 1
