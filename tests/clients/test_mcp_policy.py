"""How the MCP proxy reads a tool's annotations (seam_client.mcp_proxy.ToolPolicy), with the
spec's defaults for what a server leaves out (not read-only, destructive, not idempotent), and
how an operator's declarations file overrides them; a malformed file names the file, the tool
and the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import mcp_types as types
import pytest
from seam_client import Intent
from seam_client.mcp_proxy import (
    Declarations,
    DeclarationsError,
    ToolDeclaration,
    ToolPolicy,
    capability_version,
    load_declarations,
)
from seam_client.mcp_proxy.journal import within_key_lifetime

from devtools.processes import ROOT


def policy(
    annotations: types.ToolAnnotations | None,
    *,
    catalogued: bool = False,
    journal: bool = False,
    declared: ToolDeclaration | None = None,
) -> ToolPolicy:
    return ToolPolicy.from_annotations(
        annotations, catalogued=catalogued, journal_anyway=journal, declared=declared
    )


def test_a_tool_without_annotations_is_journaled_as_a_destructive_irreversible_write() -> None:
    assert policy(None) == ToolPolicy(journaled=True, destructive=True, idempotent=False, irreversible=True)
    assert policy(types.ToolAnnotations()) == policy(None)
    assert not policy(None).errors_are_refusals  # an error answer is evidence, not proof


def test_a_read_only_tool_is_not_journaled_unless_the_operator_says_so() -> None:
    read_only = types.ToolAnnotations(read_only_hint=True, destructive_hint=True)
    assert policy(read_only) == ToolPolicy(
        journaled=False, destructive=False, idempotent=False, irreversible=False, read_only=True
    )
    assert policy(read_only, journal=True).journaled
    assert policy(read_only, journal=True).errors_are_refusals  # a read cannot have acted


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


def test_declarations_override_the_annotations() -> None:
    hinted_read_only = types.ToolAnnotations(read_only_hint=True)
    assert policy(hinted_read_only, declared=ToolDeclaration(read_only=False)).journaled
    declared = ToolDeclaration(
        idempotent=True, catalogued=True, honours_key=True, lookup="find_call", errors_mean_not_performed=True
    )
    seen = policy(None, declared=declared)
    assert (seen.journaled, seen.idempotent, seen.irreversible) == (True, True, False)
    assert (seen.honours_key, seen.lookup, seen.errors_are_refusals) == (True, "find_call", True)
    assert not policy(None, declared=ToolDeclaration(read_only=True)).journaled


def test_the_mcpdesk_declarations_file_reads_as_written() -> None:
    declarations = load_declarations(ROOT / "examples" / "mcpdesk" / "declarations.toml")
    assert declarations.of("credit_account") == ToolDeclaration(
        catalogued=True, honours_key=True, lookup="find_call", errors_mean_not_performed=True
    )
    assert declarations.of("find_call") == ToolDeclaration(read_only=True)
    assert declarations.of("get_balance") is None


def test_a_json_declarations_file_has_the_same_shape(tmp_path: Path) -> None:
    path = tmp_path / "declarations.json"
    path.write_text('{"tools": {"git_add": {"idempotent": true, "errors_mean_not_performed": false}}}')
    assert load_declarations(path).of("git_add") == ToolDeclaration(idempotent=True)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[tools.git_add]\nidempotant = true\n", ["'git_add'", "unknown field 'idempotant'"]),
        ('[tools.git_add]\nread_only = "yes"\n', ["'git_add'", "'read_only'", "true or false"]),
        ("[tools.git_add]\nread_only = 1\n", ["'git_add'", "'read_only'"]),
        ("[tools.git_add]\nlookup = true\n", ["'git_add'", "'lookup'", "a string"]),
        ('[tools.git_add]\nlookup = "git_add"\n', ["'git_add'", "'lookup'", "itself"]),
        ("[tools.git_add]\nhonours_key = true\nkey_lifetime = 0\n", ["'key_lifetime'", "positive"]),
        ('[tools.git_add]\nkey_lifetime = "1d"\n', ["'git_add'", "'key_lifetime'", "seconds"]),
        ('[tools.git_log]\nread_only = true\nlookup = "x"\n', ["'git_log'", "'lookup'"]),
        ("[tool.git_add]\nread_only = true\n", ["unknown key 'tool'"]),
        ("tools = 3\n", ["'tools'"]),
        ("[tools]\ngit_add = true\n", ["'git_add'", "table"]),
        ("[tools.git_add\n", ["not valid TOML"]),
    ],
)
def test_a_malformed_declarations_file_is_refused_naming_the_file_the_tool_and_the_field(
    tmp_path: Path, text: str, named: list[str]
) -> None:
    path = tmp_path / "declarations.toml"
    path.write_text(text)
    with pytest.raises(DeclarationsError) as refused:
        load_declarations(path)
    message = str(refused.value)
    assert message.startswith(str(path))
    for part in named:
        assert part in message


def test_declarations_must_name_the_servers_tools_and_a_read_only_lookup() -> None:
    declarations = Declarations(
        tools={"credit_account": ToolDeclaration(lookup="find_call")}, source="desk.toml"
    )
    declarations.check_against({"credit_account": False, "find_call": True})
    with pytest.raises(
        DeclarationsError, match=r"desk.toml: tool 'credit_account'.*'find_call'.*not a read-only"
    ):
        declarations.check_against({"credit_account": False, "find_call": False})
    misspelt = Declarations(tools={"credit_acount": ToolDeclaration()}, source="desk.toml")
    with pytest.raises(
        DeclarationsError, match=r"desk.toml: tool 'credit_acount' is not one the server offers"
    ):
        misspelt.check_against({"credit_account": False})


def test_the_capability_version_changes_with_the_tools_annotations() -> None:
    schema = {"type": "object"}
    tool = types.Tool(name="close_account", input_schema=schema)
    hinted = types.Tool(
        name="close_account", input_schema=schema, annotations=types.ToolAnnotations(read_only_hint=True)
    )
    assert capability_version([tool]) != capability_version([hinted])
    assert capability_version([tool]) == capability_version([tool])
    assert len(capability_version([tool])) <= 40  # a run's versions are at most 40 characters


def test_a_key_lifetime_in_whole_seconds_is_read_as_seconds(tmp_path: Path) -> None:
    path = tmp_path / "declarations.toml"
    path.write_text("[tools.git_add]\nhonours_key = true\nkey_lifetime = 3600\n")
    assert load_declarations(path).of("git_add") == ToolDeclaration(honours_key=True, key_lifetime=3600.0)


def _intent(recorded_ago: timedelta | None) -> Intent:
    return Intent(
        step_id="run:1:credit_account",
        idempotency_key="k",
        status="intended",
        replayed=True,
        intended_at=None if recorded_ago is None else datetime.now(UTC) - recorded_ago,
    )


@pytest.mark.parametrize(
    ("recorded_ago", "resent"),
    [(timedelta(minutes=5), True), (timedelta(hours=25), False), (None, False)],
)
def test_a_call_found_open_is_sent_again_only_while_the_server_keeps_its_key(
    recorded_ago: timedelta | None, resent: bool
) -> None:
    # A day's lifetime (the default): past it the server may have forgotten the key and would
    # act again, and an intent of unknown age cannot be shown to be within it.
    assert within_key_lifetime(_intent(recorded_ago), ToolDeclaration().key_lifetime) is resent
