"""How the proxy journals one tool: its MCP annotations (hints from a server that may not be
trusted, read with the spec's defaults: not read-only, destructive, not idempotent), overridden
by the operator's declarations and flags."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import mcp_types as types

from .._resume import HonoursKey
from .declarations import ToolDeclaration


@dataclass(frozen=True)
class ToolPolicy:
    """What the proxy does with a call of one tool."""

    journaled: bool
    destructive: bool
    idempotent: bool
    irreversible: bool
    read_only: bool = False
    honours_key: bool = False
    key_lifetime: float = 86400.0
    errors_mean_not_performed: bool = False
    lookup: str = ""

    @classmethod
    def from_annotations(
        cls,
        annotations: types.ToolAnnotations | None,
        *,
        catalogued: bool,
        journal_anyway: bool = False,
        declared: ToolDeclaration | None = None,
    ) -> ToolPolicy:
        declared = declared or ToolDeclaration()
        read_only = _first(declared.read_only, bool(annotations and annotations.read_only_hint))
        destructive = not read_only and (annotations is None or annotations.destructive_hint is not False)
        idempotent = _first(declared.idempotent, bool(annotations and annotations.idempotent_hint))
        catalogued = _first(declared.catalogued, catalogued)
        return cls(
            journaled=journal_anyway or not read_only,
            destructive=destructive,
            idempotent=idempotent,
            irreversible=destructive and not catalogued,
            read_only=read_only,
            honours_key=declared.honours_key,
            key_lifetime=declared.key_lifetime,
            errors_mean_not_performed=declared.errors_mean_not_performed,
            lookup=declared.lookup,
        )

    @property
    def honours(self) -> HonoursKey | None:
        """The declaration `perform` reads: a call found open is sent again under its key while
        the server keeps it (seam_client._resume, the rule the client and adapters share)."""
        return HonoursKey(self.key_lifetime) if self.honours_key else None

    @property
    def errors_are_refusals(self) -> bool:
        """An error answer means the tool did nothing: it only reads, or it is declared so."""
        return self.read_only or self.errors_mean_not_performed

    def hints(self) -> dict[str, bool]:
        return {
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "irreversible": self.irreversible,
        }


def _first(declared: bool | None, otherwise: bool) -> bool:
    return otherwise if declared is None else declared


def capability_version(tools: Sequence[types.Tool]) -> str:
    """A fingerprint of the tools the server offered (names and annotations), recorded as the
    run's capability version: two runs under different tool sets say so."""
    listing = sorted(
        (tool.name, tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {})
        for tool in tools
    )
    return "mcp-" + hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()[:16]
