"""The benchmarks' stub tools, declared as any installed app declares its tools."""

from __future__ import annotations

from tools.registry import ToolSpec

from . import (
    LOOKUP_LATENCY,
    SLOW_CONCURRENCY,
    SLOW_DOWNSTREAM,
    SLOW_TOOL,
    TOOL,
    InstantConnector,
    SlowConnector,
)

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "string"}},
    "required": ["order_id", "amount"],
}


def tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            name=TOOL,
            kind="write",
            args_schema=SCHEMA,
            connector=InstantConnector(),
            receipt_fields=("refund_id", "amount"),
            description="A refund whose downstream answers lookups at once (benchmarks only).",
        ),
        ToolSpec(
            name=SLOW_TOOL,
            kind="write",
            args_schema=SCHEMA,
            connector=SlowConnector(LOOKUP_LATENCY),
            receipt_fields=("refund_id", "amount"),
            description="A refund whose downstream answers lookups after 50 ms (benchmarks only).",
            downstream=SLOW_DOWNSTREAM,
            lookup_concurrency=SLOW_CONCURRENCY,
        ),
    ]
