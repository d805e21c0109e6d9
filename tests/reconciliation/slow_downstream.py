"""A downstream that answers each lookup after LATENCY seconds and counts the lookups it is
answering at once, as a provider's own access log would; its two tools share it, declared with
a bound of CONCURRENCY lookups in flight (tests.support.plugins declares them)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from journal.tool_errors import DispatchResult
from tools.connectors import LookupQuery, LookupResult, NotPerformed
from tools.registry import ToolSpec

LATENCY = 0.05
CONCURRENCY = 3


class Ledger:
    """What the downstream saw: lookups in flight now, the most at once, and when each started."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0
        self.starts: list[float] = []

    def reset(self) -> None:
        with self.lock:
            self.in_flight, self.most, self.starts = 0, 0, []


SEEN = Ledger()


class SlowConnector:
    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult:
        return DispatchResult(summary="done", receipt={"key": idempotency_key})

    def lookup(self, query: LookupQuery) -> LookupResult:
        with SEEN.lock:
            SEEN.in_flight += 1
            SEEN.most = max(SEEN.most, SEEN.in_flight)
            SEEN.starts.append(time.monotonic())
        try:
            time.sleep(LATENCY)
            return NotPerformed()
        finally:
            with SEEN.lock:
                SEEN.in_flight -= 1


def tools(rate: float = 0.0) -> list[ToolSpec]:
    return [
        ToolSpec(
            name=name,
            kind="write",
            args_schema={"type": "object"},
            connector=SlowConnector(),
            downstream="slowledger",
            lookup_concurrency=CONCURRENCY,
            lookup_rate=rate,
        )
        for name in ("slow_write", "slow_undo")
    ]
