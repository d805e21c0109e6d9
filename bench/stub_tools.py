"""A tool whose downstream answers at once, for measuring what Seam itself costs per settled row.

Registered only by the benchmarks (SEAM_TOOL_MODULES=bench.stub_tools, in the bench's own worker
processes and settings override), never by the application. `bench_refund`'s lookup answers
without any I/O: a key whose last hex digit is even was "performed" (with a receipt), any other
was never sent. What a worker then spends per row is the claim, the read of the row, the settle
and its journal event: Seam's cost, with the downstream's latency taken out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from journal.tool_errors import DispatchResult
from tools.connectors import LookupQuery, LookupResult, NotPerformed, Performed
from tools.registry import ToolSpec

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


def tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            name=TOOL,
            kind="write",
            args_schema={
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "amount": {"type": "string"}},
                "required": ["order_id", "amount"],
            },
            connector=InstantConnector(),
            receipt_fields=("refund_id", "amount"),
            description="A refund whose downstream answers lookups at once (benchmarks only).",
        )
    ]
