"""The giftdesk provider: a standalone HTTP server (standard library only, no Django) that keeps
its own state in a JSON file, so what it did survives the processes that asked it.

    python -m examples.giftdesk.provider --port 8300 --state /tmp/giftdesk.json

Endpoints:

    POST /cards/{card}/loads      Idempotency-Key   load (or, negative, take back) an amount
    GET  /loads/lookup/{key}                        what became of a load's key
    POST /points                  (no key)          award loyalty points under a reference
    GET  /points/search/{ref}                       every points entry with that reference, timed
    POST /emails                  Idempotency-Key   email the customer (cannot be unsent)
    GET  /emails/lookup/{key}                       what became of an email's key
    GET  /state                                     everything it holds (for tests and people)

A load repeated under the same key answers the first receipt and changes nothing; the points
endpoint, like many legacy systems, books every request it gets. Taking back more than a card
holds takes what is there and says how much could not be recovered (`unrecovered`): the
customer already spent it."""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_PORT = 8300
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
EMPTY_STATE: dict[str, Any] = {"cards": {}, "loads": {}, "points": [], "emails": {}}


class Store:
    """The provider's state, in a JSON file rewritten atomically after each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        if not path.exists():
            self._write(json.loads(json.dumps(EMPTY_STATE)))

    def read(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.path.read_text())
        return state

    def _write(self, state: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    def load(self, card: str, amount: Decimal, key: str) -> dict[str, Any]:
        with self.lock:
            state = self.read()
            if key in state["loads"]:
                receipt: dict[str, Any] = state["loads"][key]
                return receipt
            balance = Decimal(state["cards"].get(card, "0"))
            moved = amount if amount >= 0 else -min(-amount, balance)
            receipt = {
                "load_id": f"ld_{len(state['loads']) + 1}",
                "card": card,
                "amount": str(moved),
                "balance": str(balance + moved),
                "created_at": _now(),
            }
            if moved != amount:
                receipt["unrecovered"] = str(moved - amount)
            state["cards"][card] = str(balance + moved)
            state["loads"][key] = receipt
            self._write(state)
            return receipt

    def award(self, customer: str, points: int, reference: str) -> dict[str, Any]:
        with self.lock:
            state = self.read()
            entry = {
                "entry_id": f"pt_{len(state['points']) + 1}",
                "customer": customer,
                "points": points,
                "reference": reference,
                "created_at": _now(),
            }
            state["points"].append(entry)
            self._write(state)
            return entry

    def email(self, customer: str, template: str, key: str) -> dict[str, Any]:
        with self.lock:
            state = self.read()
            if key not in state["emails"]:
                state["emails"][key] = {
                    "message_id": f"msg_{len(state['emails']) + 1}",
                    "customer": customer,
                    "template": template,
                    "sent_at": _now(),
                }
                self._write(state)
            receipt: dict[str, Any] = state["emails"][key]
            return receipt


def _now() -> str:
    return datetime.now(UTC).isoformat()


def handler_for(store: Store) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _refuse(self, status: int, message: str) -> None:
            self._answer(status, {"error": {"message": message}})

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            return body if isinstance(body, dict) else {}

        def do_POST(self) -> None:
            body = self._body()
            key = self.headers.get("Idempotency-Key", "")
            if match := re.fullmatch(r"/cards/([^/]+)/loads", self.path):
                try:
                    amount = Decimal(str(body["amount"]))
                except (KeyError, InvalidOperation):
                    return self._refuse(422, "amount must be a decimal")
                if not key:
                    return self._refuse(400, "loads need an Idempotency-Key")
                return self._answer(201, store.load(match[1], amount, key))
            if self.path == "/points":
                if not isinstance(body.get("points"), int) or not body.get("reference"):
                    return self._refuse(422, "points (an integer) and reference are required")
                return self._answer(
                    201, store.award(str(body.get("customer")), body["points"], body["reference"])
                )
            if self.path == "/emails":
                if not key:
                    return self._refuse(400, "emails need an Idempotency-Key")
                return self._answer(
                    201, store.email(str(body.get("customer")), str(body.get("template")), key)
                )
            return self._refuse(404, "no such endpoint")

        def do_GET(self) -> None:
            state = store.read()
            if self.path == "/state":
                return self._answer(200, state)
            if match := re.fullmatch(r"/(loads|emails)/lookup/([^/]+)", self.path):
                found = state[match[1]].get(match[2])
                if found is None:
                    return self._answer(200, {"status": "not_performed"})
                return self._answer(200, {"status": "performed", "receipt": found})
            if match := re.fullmatch(r"/points/search/([^/]+)", self.path):
                results = [entry for entry in state["points"] if entry["reference"] == match[1]]
                return self._answer(200, {"results": results})
            return self._refuse(404, "no such endpoint")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="The giftdesk provider: gift-card loads, loyalty points, emails."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--state", type=Path, required=True, help="the JSON file holding the provider's state"
    )
    options = parser.parse_args(argv)
    server = ThreadingHTTPServer((options.host, options.port), handler_for(Store(options.state)))
    print(f"Giftdesk provider listening on http://{options.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
