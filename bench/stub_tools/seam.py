"""The benchmarks' stub tool, declared as any installed app declares its tools."""

from __future__ import annotations

from tools.registry import ToolSpec

from . import TOOL, InstantConnector


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
