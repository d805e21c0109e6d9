"""The connector of the mcpdesk's writes as Seam tools (examples.mcpdesk.seam), so that Seam's
reconciliation can ask the desk what became of a call whose caller died. `McpDeskConnector`
speaks MCP to the desk (a stdio child process on the desk's state file,
MCPDESK_STATE, or the desk's streamable HTTP address, MCPDESK_URL) and asks `find_call` by the
intent's idempotency key.

Only `credit_account` is registered. `close_account` is destructive and has no catalogue entry:
Seam journals its calls (through the proxy) without knowing it, treats it as irreversible, and
hands a call of it left in doubt to a person."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from journal.tool_errors import DispatchResult, ToolError
from tools.connectors import LookupQuery, LookupResult, NotPerformed, Performed, Unknown

from .server import KEY_META

ROOT = Path(__file__).resolve().parents[2]
CALL_TIMEOUT = 5.0


@dataclass(frozen=True)
class McpDeskConnector:
    """Calls the desk's tool over MCP with the intent's key in `_meta`, and looks a key up with
    the desk's read-only `find_call`."""

    tool: str
    state_file: str = ""
    url: str = ""

    @property
    def call_timeout(self) -> float:
        return CALL_TIMEOUT

    async def _call(
        self, name: str, arguments: Mapping[str, Any], meta: dict[str, Any] | None
    ) -> types.CallToolResult:
        async with _session(self.state_file, self.url) as session:
            result = await session.call_tool(
                name,
                dict(arguments),
                read_timeout_seconds=CALL_TIMEOUT,
                meta=cast(types.RequestParamsMeta, meta) if meta else None,
            )
        assert isinstance(result, types.CallToolResult)
        return result

    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult:
        try:
            result = anyio.run(self._call, self.tool, args, {KEY_META: idempotency_key})
        except Exception as exc:
            raise ToolError("ambiguous", f"{self.tool}: no answer from the desk ({exc!r})") from exc
        if result.is_error:
            raise ToolError("permanent", _text(result))
        return DispatchResult(summary=_text(result), receipt=dict(result.structured_content or {}))

    def lookup(self, query: LookupQuery) -> LookupResult:
        try:
            result = anyio.run(self._call, "find_call", {"idempotency_key": query.idempotency_key}, None)
        except Exception as exc:
            return Unknown(f"the desk did not answer ({exc!r})")
        found = dict(result.structured_content or {})
        if result.is_error or "found" not in found:
            return Unknown(_text(result) or "the desk's answer said nothing")
        if not found["found"]:
            return NotPerformed()
        if found.get("tool") != query.tool:
            return Unknown(f"the key belongs to a {found.get('tool')} call, not {query.tool}")
        return Performed(receipt=dict(found["receipt"]))


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@asynccontextmanager
async def _session(state_file: str, url: str) -> AsyncIterator[ClientSession]:
    """An MCP session with the desk: its HTTP address, or a child process on its state file."""
    if url:
        async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as client:
            await client.initialize()
            yield client
    else:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "examples.mcpdesk.server", "--state", state_file],
            cwd=str(ROOT),
        )
        async with stdio_client(params) as (read, write, *_), ClientSession(read, write) as client:
            await client.initialize()
            yield client
