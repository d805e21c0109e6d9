"""How the MCP proxy reads a tool's annotations (seam_client.mcp_proxy.ToolPolicy), with the
spec's defaults for what a server leaves out: not read-only, destructive, not idempotent."""

from __future__ import annotations

import mcp_types as types
from seam_client.mcp_proxy import ToolPolicy, capability_version


def policy(
    annotations: types.ToolAnnotations | None, *, catalogued: bool = False, journal: bool = False
) -> ToolPolicy:
    return ToolPolicy.from_annotations(annotations, catalogued=catalogued, journal_anyway=journal)


def test_a_tool_without_annotations_is_journaled_as_a_destructive_irreversible_write() -> None:
    assert policy(None) == ToolPolicy(journaled=True, destructive=True, idempotent=False, irreversible=True)
    assert policy(types.ToolAnnotations()) == policy(None)


def test_a_read_only_tool_is_not_journaled_unless_the_operator_says_so() -> None:
    read_only = types.ToolAnnotations(read_only_hint=True, destructive_hint=True)
    assert policy(read_only) == ToolPolicy(
        journaled=False, destructive=False, idempotent=False, irreversible=False
    )
    assert policy(read_only, journal=True).journaled


def test_a_destructive_tool_is_irreversible_only_without_a_catalogue_entry() -> None:
    destructive = types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)
    assert policy(destructive).irreversible
    assert not policy(destructive, catalogued=True).irreversible
    assert policy(destructive).hints() == {
        "destructiveHint": True,
        "idempotentHint": True,
        "irreversible": True,
    }
    additive = types.ToolAnnotations(destructive_hint=False)
    assert not policy(additive).irreversible and policy(additive).journaled


def test_the_capability_version_changes_with_the_tools_annotations() -> None:
    schema = {"type": "object"}
    tool = types.Tool(name="close_account", input_schema=schema)
    hinted = types.Tool(
        name="close_account", input_schema=schema, annotations=types.ToolAnnotations(read_only_hint=True)
    )
    assert capability_version([tool]) != capability_version([hinted])
    assert capability_version([tool]) == capability_version([tool])
    assert len(capability_version([tool])) <= 40  # a run's versions are at most 40 characters
