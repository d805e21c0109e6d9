"""What an operator declares about a server's tools, for servers whose annotations are missing,
wrong or silent about what Seam needs to know. Read from a TOML file (`--declarations PATH`; a
name ending in `.json` is read as JSON of the same shape):

    [tools.credit_account]
    idempotent = true
    honours_key = true              # the server deduplicates calls by the `_meta` key
    key_lifetime = 86400            # seconds it keeps a key (default: a day); past it, never resent
    lookup = "find_call"            # a read tool that says what became of a key
    catalogued = true               # Seam's catalogue has an entry that undoes it
    errors_mean_not_performed = true

    [tools.find_call]
    read_only = true

A declaration overrides the tool's annotations (which are a server's hints, not promises). A
malformed file stops the proxy at start-up with a message naming the file, the tool and the
field; so does a declaration of a tool the server does not offer, or a lookup that is not a
read-only tool of the server."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any


class DeclarationsError(ValueError):
    """A declarations file the proxy cannot use: the message names the file, tool and field."""


@dataclass(frozen=True)
class ToolDeclaration:
    """One tool's declared facts; None leaves the server's annotation (or the spec's default)."""

    read_only: bool | None = None
    idempotent: bool | None = None
    # The server keeps the `_meta` key and answers a repeated key with the first call's result
    # without acting again: a call found open may be sent again under its key.
    honours_key: bool = False
    # Seconds the server keeps a key. A call found open is sent again under its key only while
    # the intent is younger than this: past it the server may have forgotten the key and would
    # act a second time (Stripe prunes keys after 24 hours; a day is the default).
    key_lifetime: float = 86400.0
    # The tool's error answers are refusals before acting: an error means nothing happened.
    errors_mean_not_performed: bool = False
    # A read tool called with {"idempotency_key": key} that answers
    # {"found": bool, "tool": name, "receipt": {...}} (the mcpdesk's `find_call` convention).
    lookup: str = ""
    catalogued: bool | None = None


_TYPES: dict[str, type] = {"lookup": str, "key_lifetime": float}  # every other field is a boolean


@dataclass(frozen=True)
class Declarations:
    """The declarations file's tools, and where they came from (for messages)."""

    tools: Mapping[str, ToolDeclaration]
    source: str = ""

    def of(self, tool: str) -> ToolDeclaration | None:
        return self.tools.get(tool)

    def check_against(self, offered: Mapping[str, bool]) -> None:
        """Refuse declarations of tools the server does not offer, and lookups that are not
        read-only tools of the server. `offered`: each tool's name and whether it is read-only
        (its annotation, overridden by its declaration)."""
        for name, declared in sorted(self.tools.items()):
            if name not in offered:
                raise DeclarationsError(
                    f"{self.source}: tool {name!r} is not one the server offers "
                    f"(it offers {', '.join(sorted(offered)) or 'no tools'})"
                )
            if declared.lookup and not offered.get(declared.lookup, False):
                raise DeclarationsError(
                    f"{self.source}: tool {name!r}: field 'lookup' names {declared.lookup!r}, "
                    "which is not a read-only tool of the server"
                )


_WORDS = {str: "a string", bool: "true or false", float: "a positive number of seconds"}


def load_declarations(path: str | Path) -> Declarations:
    """Read and check a declarations file; DeclarationsError if it is malformed."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DeclarationsError(f"{source}: cannot read the declarations file ({exc.strerror})") from exc
    try:
        document = json.loads(text) if source.endswith(".json") else tomllib.loads(text)
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError
        raise DeclarationsError(f"{source}: not valid {_format(source)}: {exc}") from exc
    return Declarations(tools=_tools_of(document, source), source=source)


def _format(source: str) -> str:
    return "JSON" if source.endswith(".json") else "TOML"


def _tools_of(document: Any, source: str) -> dict[str, ToolDeclaration]:
    if not isinstance(document, dict):
        raise DeclarationsError(f"{source}: the file must hold a table of tools under 'tools'")
    unknown = sorted(set(document) - {"tools"})
    if unknown:
        raise DeclarationsError(f"{source}: unknown key {unknown[0]!r} (the file holds only 'tools')")
    tools = document.get("tools", {})
    if not isinstance(tools, dict):
        raise DeclarationsError(f"{source}: 'tools' must be a table of tools by name")
    return {str(name): _declaration(name, facts, source) for name, facts in tools.items()}


def _declaration(name: str, facts: Any, source: str) -> ToolDeclaration:
    if not isinstance(facts, dict):
        raise DeclarationsError(f"{source}: tool {name!r} must be a table of fields")
    known = [field.name for field in fields(ToolDeclaration)]
    values: dict[str, Any] = {}
    for key, value in facts.items():
        if key not in known:
            raise DeclarationsError(
                f"{source}: tool {name!r}: unknown field {key!r} (known: {', '.join(known)})"
            )
        wanted = _TYPES.get(key, bool)
        if wanted is float and type(value) is int:
            value = float(value)  # 86400 and 86400.0 are the same number of seconds
        if type(value) is not wanted or (isinstance(value, float) and not value > 0):
            # not isinstance: True is an int, and 1 is not a boolean
            raise DeclarationsError(
                f"{source}: tool {name!r}: field {key!r} must be {_WORDS[wanted]}, not {value!r}"
            )
        values[key] = value
    declared = ToolDeclaration(**values)
    if declared.lookup == name:
        raise DeclarationsError(f"{source}: tool {name!r}: field 'lookup' cannot name the tool itself")
    if declared.read_only and (declared.honours_key or declared.lookup):
        raise DeclarationsError(
            f"{source}: tool {name!r}: a read-only tool is not journaled, so field "
            f"{'honours_key' if declared.honours_key else 'lookup'!r} means nothing for it"
        )
    return declared
