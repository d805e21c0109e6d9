"""Fixtures for the sandbox's tests: a client that speaks the sandbox's HTTP contract in process
(Django's test client), and the ledger as the truth about the world."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

API = "/sandbox/api/"
Response = Any  # the test client's response: an HttpResponse with .json()


@dataclass
class SandboxApi:
    client: Client

    def post(self, path: str, body: Any, *, key: str | None = None, fault: str | None = None) -> Response:
        headers = {}
        if key is not None:
            headers["Idempotency-Key"] = key
        if fault is not None:
            headers["X-Sandbox-Fault"] = fault
        data = body if isinstance(body, str) else json.dumps(body)
        return self.client.post(API + path, data=data, content_type="application/json", headers=headers)

    def get(self, path: str, *, fault: str | None = None, **params: str) -> Response:
        headers = {"X-Sandbox-Fault": fault} if fault else {}
        return self.client.get(API + path, params, headers=headers)

    def delete(self, path: str) -> Response:
        return self.client.delete(API + path)


@pytest.fixture
def api() -> SandboxApi:
    return SandboxApi(Client())


def error_of(response: Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "field"}, body
    return dict(body["error"])
