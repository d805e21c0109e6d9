"""An MCP proxy that journals tool calls in Seam: it sits between any MCP client and any MCP server
(stdio or streamable HTTP on either side), lists the server's tools unchanged, and records each
`tools/call` as an intent before it is forwarded and an outcome after, under one Seam run per
client session.

    seam-mcp-proxy --seam-url http://127.0.0.1:8000 --token $SEAM_TOKEN --task-type desk \\
        -- python -m examples.mcpdesk.server --state desk.json          # the server over stdio
    seam-mcp-proxy ... --server-url http://127.0.0.1:8310/mcp           # or over streamable HTTP
    SEAM_MCP_PROXY_TOKEN=... seam-mcp-proxy ... --http --port 8320 -- ...   # clients over HTTP too

The server's tool annotations decide how a call is journaled (they are hints from a server that
may not be trusted, so they set defaults an operator can override, never permissions), and a
declarations file (`--declarations PATH`, seam_client.mcp_proxy.declarations) overrides them:

- `readOnlyHint` true (or `read_only` declared): forwarded without an intent; it is not a write.
  `--journal TOOL` journals such a tool anyway.
- `destructiveHint` (true unless the server says false) on a tool that has no catalogue entry in
  Seam (`--catalogued TOOL` or `catalogued` declared): irreversible.
- `idempotentHint` (or `idempotent` declared): recorded with the outcome.
- declared only: `honours_key` (a call found open may be sent again under its key),
  `lookup` (a read tool that finds a call by its key), `errors_mean_not_performed`.

Each forwarded call carries the intent's idempotency key in the request's `_meta`
(`seam/idempotency_key`), so a server can deduplicate a repeated call and, later, be asked by
the key what became of it. The answer's `_meta` carries the run, the step, the key and the
intent's status.

A call is never forwarded unless its intent is recorded; an intent found open (in doubt) is not
sent again (unless the server honours its key); a call whose answer is lost leaves its intent
open for reconciliation. How calls are counted, resumed and how error answers are read:
seam_client.mcp_proxy.journal. Streamable HTTP's token and sessions: seam_client.mcp_proxy.http."""

from __future__ import annotations

from .cli import main, parse_args
from .declarations import Declarations, DeclarationsError, ToolDeclaration, load_declarations
from .http import AUTH_TOKEN_ENV, SessionGate, serve_http
from .journal import HINTS_RECEIPT_KEY, KEY_META, RUN_META, STATUS_META, STEP_META, SessionJournal
from .policy import ToolPolicy, capability_version
from .proxy import Proxy, ProxySettings, running_proxy, serve_stdio, upstream_session

__all__ = [
    "AUTH_TOKEN_ENV",
    "HINTS_RECEIPT_KEY",
    "KEY_META",
    "RUN_META",
    "STATUS_META",
    "STEP_META",
    "Declarations",
    "DeclarationsError",
    "Proxy",
    "ProxySettings",
    "SessionGate",
    "SessionJournal",
    "ToolDeclaration",
    "ToolPolicy",
    "capability_version",
    "load_declarations",
    "main",
    "parse_args",
    "running_proxy",
    "serve_http",
    "serve_stdio",
    "upstream_session",
]
