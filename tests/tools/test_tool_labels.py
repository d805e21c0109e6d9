"""A tool's label: a person's words for the call, declared on its ToolSpec, or its name made
readable when it declares none; every tool the demo and the examples declare has one."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tools.registry import ToolSpec, tool_title, tool_title_from_name

SCHEMA: dict[str, Any] = {"type": "object"}


def test_a_declared_label_is_the_title() -> None:
    spec = ToolSpec(name="cancel_pickup", kind="write", args_schema=SCHEMA, label="Cancel the pickup")
    assert spec.title() == "Cancel the pickup"


@pytest.mark.parametrize(
    ("name", "title"),
    [
        ("cancel_pickup", "Cancel pickup"),
        ("issue_refund", "Issue refund"),
        ("reship", "Reship"),
        ("crm.update-contact", "Crm update contact"),
        ("__odd__name", "Odd name"),
    ],
)
def test_a_blank_label_falls_back_to_the_name_made_readable(name: str, title: str) -> None:
    assert ToolSpec(name=name, kind="write", args_schema=SCHEMA).title() == title
    assert ToolSpec(name=name, kind="write", args_schema=SCHEMA, label="   ").title() == title
    assert tool_title_from_name(name) == title


def test_an_undeclared_tool_is_titled_from_its_name(sandbox_tools: str) -> None:
    assert tool_title("cancel_pickup") == "Cancel the pickup"  # the sandbox declares its label
    assert tool_title("never_declared_tool") == "Never declared tool"


@pytest.mark.parametrize("module", ["sandbox.seam", "examples.giftdesk.seam", "examples.mcpdesk.seam"])
def test_every_tool_the_demo_and_the_examples_declare_has_a_label(module: str, settings: Any) -> None:
    settings.SEAM_SANDBOX_URL = "http://127.0.0.1:1"
    specs = importlib.import_module(module).tools()
    assert specs
    unlabelled = [spec.name for spec in specs if not spec.label]
    assert unlabelled == []
    # A label is a person's words: capitalised, no underscore, no full stop.
    assert all(s.label[0].isupper() and "_" not in s.label and not s.label.endswith(".") for s in specs)
