"""`manage.py runsandbox` as a real subprocess on the test database: what a client sees over a
real socket, above all that `drop_after` closes the connection without any response (not a
500) after the effect is committed."""

from __future__ import annotations

import json
import socket
import threading
from urllib.parse import urlsplit

import pytest
import requests
from django.db import connection

from devtools.processes import database_url, running_sandbox
from sandbox.models import Effect, Refund

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}


def _raw_post(base_url: str, path: str, body: dict[str, str], headers: dict[str, str]) -> bytes:
    """Send one HTTP request on a bare socket and return every byte the server sent back."""
    parts = urlsplit(base_url)
    payload = json.dumps(body).encode()
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: {parts.hostname}:{parts.port}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    received = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall("\r\n".join(head).encode() + b"\r\n\r\n" + payload)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received


def test_drop_after_closes_the_socket_without_a_byte_after_committing(sandbox_server: str) -> None:
    received = _raw_post(
        sandbox_server,
        "/sandbox/api/payments/refund",
        REFUND,
        {"Idempotency-Key": "dropped-1", "X-Sandbox-Fault": "drop_after"},
    )

    assert received == b""
    effect = Effect.objects.get(idempotency_key="dropped-1")
    assert effect.operation == "refund"
    assert Refund.objects.filter(effect=effect).exists()


def test_a_client_sees_a_connection_error_then_finds_the_effect_by_key(sandbox_server: str) -> None:
    api = sandbox_server + "/sandbox/api/"

    with pytest.raises(requests.ConnectionError):
        requests.post(
            api + "payments/refund",
            json=REFUND,
            headers={"Idempotency-Key": "dropped-2", "X-Sandbox-Fault": "drop_after"},
            timeout=10,
        )

    lookup = requests.get(api + "payments/lookup/dropped-2", timeout=10).json()
    retry = requests.post(
        api + "payments/refund", json=REFUND, headers={"Idempotency-Key": "dropped-2"}, timeout=10
    )
    assert lookup["status"] == "performed"
    assert retry.status_code == 200
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.json() == lookup["receipt"]
    assert Refund.objects.count() == 1


def test_a_drop_after_rule_over_http(sandbox_server: str) -> None:
    api = sandbox_server + "/sandbox/api/"
    requests.post(api + "faults/", json={"provider": "returns", "fault": "drop_after"}, timeout=10)

    with pytest.raises(requests.ConnectionError):
        requests.post(
            api + "returns/start_return",
            json={"order_id": "SU-1"},
            headers={"Idempotency-Key": "k"},
            timeout=10,
        )
    again = requests.post(
        api + "returns/start_return", json={"order_id": "SU-1"}, headers={"Idempotency-Key": "k"}, timeout=10
    )

    assert again.status_code == 200
    assert Effect.objects.count() == 1


def test_fail_before_and_slow_over_http(sandbox_server: str) -> None:
    api = sandbox_server + "/sandbox/api/"

    failed = requests.post(
        api + "payments/refund",
        json=REFUND,
        headers={"Idempotency-Key": "f", "X-Sandbox-Fault": "fail_before"},
        timeout=10,
    )
    with pytest.raises(requests.ReadTimeout):
        requests.post(
            api + "payments/refund",
            json=REFUND,
            headers={"Idempotency-Key": "s", "X-Sandbox-Fault": "slow:800"},
            timeout=0.3,
        )

    assert failed.status_code == 503
    assert failed.json()["error"]["code"] == "unavailable"
    assert list(Effect.objects.values_list("idempotency_key", flat=True)) == ["s"]


def test_identical_http_requests_at_once_perform_one_effect(sandbox_server: str) -> None:
    url = sandbox_server + "/sandbox/api/warehouse/reserve"
    body = {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 1}
    barrier = threading.Barrier(6)
    statuses: list[int] = []

    def post() -> None:
        barrier.wait()
        statuses.append(
            requests.post(url, json=body, headers={"Idempotency-Key": "twins"}, timeout=10).status_code
        )

    threads = [threading.Thread(target=post) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(statuses) == [200] * 5 + [201]
    assert Effect.objects.count() == 1


def test_the_ledger_and_the_page_over_http(sandbox_server: str) -> None:
    api = sandbox_server + "/sandbox/api/"
    receipt = requests.post(
        api + "returns/start_return", json={"order_id": "SU-1"}, headers={"Idempotency-Key": "k"}, timeout=10
    ).json()

    ledger = requests.get(api + "ledger/", timeout=10).json()["effects"]
    page = requests.get(sandbox_server + "/sandbox/", timeout=10)

    assert [(e["provider"], e["operation"], e["idempotency_key"], e["receipt"]) for e in ledger] == [
        ("returns", "start_return", "k", receipt)
    ]
    assert page.status_code == 200
    assert receipt["label"] in page.text


def test_the_subprocess_is_killed_when_its_block_exits(django_db_setup: None) -> None:
    with running_sandbox(database_url(connection.settings_dict)) as (base_url, process):
        assert requests.get(base_url + "/sandbox/api/orders/SU-90502/status", timeout=10).status_code == 200
        assert process.poll() is None

    assert process.poll() is not None
    with pytest.raises(requests.ConnectionError):
        requests.get(base_url + "/sandbox/api/orders/SU-90502/status", timeout=2)
