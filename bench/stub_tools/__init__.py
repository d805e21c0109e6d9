"""A tool whose downstream answers at once, for measuring what Seam itself costs per settled row.

Declared only by the benchmarks, which install this app (SEAM_APPS=bench.stub_tools in their own
worker processes, an INSTALLED_APPS override in process; its seam.py), never by the application. `bench_refund`'s lookup answers
without any I/O: a key whose last hex digit is even was "performed" (with a receipt), any other
was never sent. What a worker then spends per row is the claim, the read of the row, the settle
and its journal event: Seam's cost, with the downstream's latency taken out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from journal.tool_errors import DispatchResult
from tools.connectors import LookupQuery, LookupResult, NotPerformed, Performed

TOOL = "bench_refund"
ARGS = {"order_id": "SU-90317", "amount": "14.95"}


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
