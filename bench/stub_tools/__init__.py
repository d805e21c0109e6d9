"""Tools whose downstream is the benchmark's own, for measuring what Seam itself costs per settled
row, and how well it hides a downstream's latency.

Declared only by the benchmarks, which install this app (SEAM_APPS=bench.stub_tools in their own
worker processes, an INSTALLED_APPS override in process; its seam.py), never by the application.
A key whose last hex digit is even was "performed" (with a receipt), any other was never sent.

- `bench_refund`'s lookup answers without any I/O: what a worker then spends per row is the claim,
  the read of the row, the settle and its journal event: Seam's cost, the downstream's taken out.
- `bench_refund_slow`'s lookup answers the same after LOOKUP_LATENCY seconds of waiting, as a
  provider 50 ms away would (the wait is the downstream's, here, not Seam's). Its downstream
  declares SLOW_CONCURRENCY lookups in flight per worker process, and counts how many it really
  had in flight at once: with SEAM_BENCH_PEAK_REDIS_URL set, each process writes its peak to
  Redis (`bench:peak:<pid>`), so the benchmark can check that the bound held.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import redis

from journal.tool_errors import DispatchResult
from tools.connectors import LookupQuery, LookupResult, NotPerformed, Performed

TOOL = "bench_refund"
SLOW_TOOL = "bench_refund_slow"
SLOW_DOWNSTREAM = "bench-slow-provider"
LOOKUP_LATENCY = 0.050
SLOW_CONCURRENCY = 64
ARGS = {"order_id": "SU-90317", "amount": "14.95"}
PEAK_KEY = "bench:peak:"


def performed(idempotency_key: str) -> bool:
    return int(idempotency_key[-1], 16) % 2 == 0


class InstantConnector:
    """Answers every lookup at once, from the key alone."""

    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult:
        return DispatchResult(receipt={"refund_id": f"RF-{idempotency_key[:8]}", "amount": args["amount"]})

    def lookup(self, query: LookupQuery) -> LookupResult:
        if performed(query.idempotency_key):
            return Performed(
                receipt={"refund_id": f"RF-{query.idempotency_key[:8]}", "amount": query.args["amount"]}
            )
        return NotPerformed()


class SlowConnector(InstantConnector):
    """Answers as InstantConnector does, `latency` seconds after being asked; counts the lookups
    it has in flight at once in this process, and publishes a new peak when one is reached."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0

    def lookup(self, query: LookupQuery) -> LookupResult:
        with self._lock:
            self.in_flight += 1
            new_peak = self.in_flight > self.peak
            if new_peak:
                self.peak = self.in_flight
            peak = self.peak
        try:
            if new_peak:
                _publish_peak(peak)
            time.sleep(self.latency)
            return super().lookup(query)
        finally:
            with self._lock:
                self.in_flight -= 1


def _publish_peak(peak: int) -> None:
    url = os.environ.get("SEAM_BENCH_PEAK_REDIS_URL")
    if not url:
        return
    client = redis.Redis.from_url(url)
    # Only ever raised: a slower thread publishing an older peak must not lower it.
    client.eval(
        "local v = tonumber(redis.call('GET', KEYS[1]) or '0') "
        "if tonumber(ARGV[1]) > v then redis.call('SET', KEYS[1], ARGV[1]) end return 0",
        1,
        f"{PEAK_KEY}{os.getpid()}",
        peak,
    )
