"""Fixtures for fan-out tests: the shortage flow's fan-out, a shortage run, the sandbox's control
endpoints (warehouse latency and failures, entitlements, fault rules) and its log of calls."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from fanout.spec import GroupSpec
from journal.models import Run
from scenarios.flows import FLOWS
from scenarios.tickets import TICKETS

SHORTAGE_FACTS = TICKETS["T-41207"].facts  # 4 x SKU-4471 on SU-88410


def shortage_spec(
    facts: dict[str, Any] | None = None, *, deadline_ms: int = 5000, only: tuple[str, ...] = ()
) -> GroupSpec:
    """The shortage flow's own fan-out, bound to the ticket's facts; `only` keeps some branches."""
    spec = next(step for step in FLOWS["shortage"].steps if isinstance(step, GroupSpec))
    bound = spec.bind(dict(facts or SHORTAGE_FACTS))
    branches = tuple(b for b in bound.branches if not only or b.name in only)
    return dataclasses.replace(bound, deadline_ms=deadline_ms, branches=branches)


@dataclasses.dataclass
class Sandbox:
    base_url: str

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = requests.post(f"{self.base_url}/sandbox/api/{path}", json=body, timeout=30)
        assert response.status_code in (200, 201), response.text
        answer: dict[str, Any] = response.json()
        return answer

    def warehouse(self, code: str, **config: Any) -> dict[str, Any]:
        return self._post(f"warehouse/{code}/configure", config)

    def entitlement(self, order_id: str, **terms: Any) -> dict[str, Any]:
        return self._post(f"orders/{order_id}/entitlement/configure", terms)

    def fault(self, provider: str, operation: str, fault: str, remaining: int = 1) -> dict[str, Any]:
        return self._post(
            "faults/", {"provider": provider, "operation": operation, "fault": fault, "remaining": remaining}
        )

    def calls(self, operation: str = "", target: str = "") -> list[dict[str, Any]]:
        """The sandbox's log of calls it answered, oldest first."""
        response = requests.get(
            f"{self.base_url}/sandbox/api/calls/",
            params={"operation": operation, "target": target},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        return list(reversed(response.json()["calls"]))

    def settle(self, operation: str, target: str, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Wait until the sandbox has logged `count` calls (a read abandoned at the deadline is
        still answered, later); the world must be quiet before the test ends."""
        ends = time.monotonic() + timeout
        while True:
            found = self.calls(operation, target)
            if len(found) >= count or time.monotonic() > ends:
                return found
            time.sleep(0.1)


@pytest.fixture
def sandbox(sandbox_tools: str) -> Sandbox:
    box = Sandbox(sandbox_tools)
    # A predictable world: every warehouse answers at once and never fails, unless a test says so.
    for code in ("LDS-2", "MAN-1", "BRS-3"):
        box.warehouse(code, latency_ms=0, fail_every=0)
    return box


@pytest.fixture
def shortage_run(make_run: Callable[..., Run]) -> Run:
    flow = FLOWS["shortage"]
    return make_run(
        task_type="shortage",
        ticket_id="T-41207",
        order_id="SU-88410",
        versions=flow.run_versions(),
        plan=flow.plan(dict(SHORTAGE_FACTS)),
    )
