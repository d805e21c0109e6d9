"""A tool declared for the tests of Edit arguments… (tests/console/test_step_edits.py): its
arguments hold each kind the form draws: a string, a whole number, a number, a choice, a yes/no
and a nested object (typed as JSON)."""

from __future__ import annotations

from tools.registry import ToolSpec

SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "minLength": 1},
        "boxes": {"type": "integer", "minimum": 1},
        "weight_kg": {"type": "number"},
        "speed": {"enum": ["standard", "express"]},
        "signature": {"type": "boolean"},
        "address": {
            "type": "object",
            "properties": {"line": {"type": "string"}, "postcode": {"type": "string"}},
            "required": ["line", "postcode"],
        },
    },
    "required": ["order_id", "boxes", "address"],
    "additionalProperties": False,
}


def tools() -> list[ToolSpec]:
    return [ToolSpec(name="book_courier", kind="write", args_schema=SCHEMA)]
