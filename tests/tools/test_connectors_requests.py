"""tools.connectors: HttpConnector builds requests for any method from path templates, and a
lookup of any shape (by key, by business id, by an object's state) is written with its public
`request` / `get_json` helpers. Against a tiny provider in this process that records what it
was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from journal.tool_errors import ToolError
from tools.connectors import (
    HttpConnector,
    LookupQuery,
    LookupResult,
    NotPerformed,
    Performed,
    Unknown,
    path_fields,
    path_fill,
)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Provider:
    """Answers every request with the next canned (status, body) for its path, or 200 {}."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.answers: dict[str, tuple[int, Any]] = {}
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                provider.seen.append(
                    Seen(self.command, self.path, dict(self.headers), json.loads(raw) if raw else None)
                )
                status, body = provider.answers.get(self.path, (200, {}))
                payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"


@pytest.fixture
def provider() -> Iterator[Provider]:
    p = Provider()
    thread = threading.Thread(target=p.server.serve_forever, daemon=True)
    thread.start()
    yield p
    p.server.shutdown()
    p.server.server_close()


def test_path_templates_name_the_arguments_they_consume() -> None:
    assert path_fields("orders/{order_id}/refunds") == ("order_id",)
    assert path_fields("warehouse/{warehouse}/stock?sku={sku}") == ("warehouse", "sku")
    assert path_fields("payments/refund") == ()


def test_a_path_argument_is_encoded_as_one_segment() -> None:
    assert path_fill("orders/{order_id}/refunds", {"order_id": "SU-1/../admin"}) == (
        "orders/SU-1%2F..%2Fadmin/refunds"
    )


def test_a_template_naming_an_argument_the_call_lacks_is_a_bug() -> None:
    with pytest.raises(ToolError) as failed:
        path_fill("orders/{order_id}/refunds", {"amount": "1.00"})
    assert failed.value.error_class == "bug"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_any_method_fills_its_path_and_sends_the_rest_as_the_body(provider: Provider, method: str) -> None:
    provider.answers["/api/orders/SU-7/refunds"] = (201, {"refund_id": "re_1"})
    connector = HttpConnector(
        base_url=provider.url, path="orders/{order_id}/refunds", method=method, receipt_fields=("refund_id",)
    )
    done = connector.perform({"order_id": "SU-7", "amount": "9.99"}, "key-1")
    assert done.receipt == {"refund_id": "re_1"}
    [seen] = provider.seen
    assert (seen.method, seen.path, seen.body) == (method, "/api/orders/SU-7/refunds", {"amount": "9.99"})
    assert seen.headers["Idempotency-Key"] == "key-1"


def test_a_get_fills_its_path_and_sends_no_body(provider: Provider) -> None:
    provider.answers["/api/orders/SU-7/status"] = (200, {"status": "shipped"})
    connector = HttpConnector(base_url=provider.url, path="orders/{order_id}/status", method="GET")
    assert connector.perform({"order_id": "SU-7"}, "key-2").receipt == {"status": "shipped"}
    assert (provider.seen[0].method, provider.seen[0].body) == ("GET", None)


def test_a_path_without_templates_still_sends_every_argument(provider: Provider) -> None:
    connector = HttpConnector(base_url=provider.url, path="payments/refund")
    connector.perform({"order_id": "SU-7", "amount": "9.99"}, "key-3")
    assert provider.seen[0].body == {"order_id": "SU-7", "amount": "9.99"}


@dataclass(frozen=True)
class OrderStateConnector(HttpConnector):
    """What an integrator writes for a provider without lookup by key: the call cancels an
    order, so reading the order's state says whether it happened. Only public helpers."""

    def lookup(self, query: LookupQuery) -> LookupResult:
        order = self.get_json("orders/{order_id}", args=query.args)
        if order.get("state") == "cancelled":
            return Performed(receipt={"order_id": order["id"], "state": "cancelled"})
        if order.get("state") == "open":
            return NotPerformed()
        return Unknown(f"order is {order.get('state')!r}")


@dataclass(frozen=True)
class ByReferenceConnector(HttpConnector):
    """A lookup by business id through a query string, with only public helpers."""

    def lookup(self, query: LookupQuery) -> LookupResult:
        found = self.get_json("bookings", params={"reference": query.args["reference"]})["results"]
        return Performed(receipt=found[0]) if len(found) == 1 else NotPerformed()


def _query(args: Mapping[str, Any]) -> LookupQuery:
    return LookupQuery(tool="t", idempotency_key="k", args=args, intended_at=datetime.now(UTC))


def test_a_lookup_by_an_objects_state_needs_no_private_helper(provider: Provider) -> None:
    connector = OrderStateConnector(base_url=provider.url, path="orders/{order_id}/cancel")
    provider.answers["/api/orders/SU-8"] = (200, {"id": "SU-8", "state": "cancelled"})
    assert connector.lookup(_query({"order_id": "SU-8"})) == Performed(
        {"order_id": "SU-8", "state": "cancelled"}
    )
    provider.answers["/api/orders/SU-8"] = (200, {"id": "SU-8", "state": "open"})
    assert connector.lookup(_query({"order_id": "SU-8"})) == NotPerformed()


def test_a_lookup_by_business_id_needs_no_private_helper(provider: Provider) -> None:
    connector = ByReferenceConnector(base_url=provider.url, path="bookings", headers={"X-Tenant": "t1"})
    provider.answers["/api/bookings?reference=T-9"] = (200, {"results": [{"booking_id": "b1"}]})
    assert connector.lookup(_query({"reference": "T-9"})) == Performed({"booking_id": "b1"})
    assert provider.seen[0].headers["X-Tenant"] == "t1"  # the connector's headers travel too


@pytest.mark.parametrize(
    ("status", "body", "error_class"),
    [(404, {}, "invalid_input"), (503, {}, "transient"), (502, {}, "ambiguous"), (200, "[1]", "bug")],
)
def test_get_json_classifies_what_it_cannot_use(
    provider: Provider, status: int, body: Any, error_class: str
) -> None:
    provider.answers["/api/orders/SU-9"] = (status, body)
    connector = HttpConnector(base_url=provider.url, path="orders/{order_id}")
    with pytest.raises(ToolError) as failed:
        connector.get_json("orders/{order_id}", args={"order_id": "SU-9"})
    assert failed.value.error_class == error_class


def test_a_request_that_cannot_connect_is_transient() -> None:
    connector = HttpConnector(base_url="http://127.0.0.1:9/", path="x", connect_timeout=0.5)
    with pytest.raises(ToolError) as failed:
        connector.request("POST", "x", json={})
    assert failed.value.error_class == "transient"
