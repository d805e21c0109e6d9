"""An MCP proxy that journals tool calls in Seam: it sits between any MCP client and any MCP server
(stdio or streamable HTTP on either side), lists the server's tools unchanged, and records each
`tools/call` as an intent before it is forwarded and an outcome after, under one Seam run per
client session.

    seam-mcp-proxy --seam-url http://127.0.0.1:8000 --token $SEAM_TOKEN --task-type desk \\
        -- python -m examples.mcpdesk.server --state desk.json          # the server over stdio
    seam-mcp-proxy ... --server-url http://127.0.0.1:8310/mcp           # or over streamable HTTP
    seam-mcp-proxy ... --http --port 8320 -- ...                        # clients over HTTP too

The server's tool annotations decide how a call is journaled (they are hints from a server that
may not be trusted, so they set defaults an operator can override, never permissions):

- `readOnlyHint` true: forwarded without an intent; it is not a write. `--journal TOOL` journals
  such a tool anyway.
- `destructiveHint` (true unless the server says false) on a tool that has no catalogue entry in
  Seam (`--catalogued TOOL` names the ones that do): irreversible. Seam's handover already offers
  no undo for a tool without an entry; the proxy records the judgement with the outcome.
- `idempotentHint`: recorded with the outcome.

Each forwarded call carries the intent's idempotency key in the request's `_meta`
(`seam/idempotency_key`), so a server can deduplicate a repeated call and, later, be asked by
the key what became of it: that is how Seam's reconciliation settles a call whose proxy died
after the server accepted it. The answer's `_meta` carries the run, the step and the key.

A call is never forwarded unless its intent is recorded; an intent found open (in doubt) is not
sent again; a call whose answer is lost (the server's connection broke) leaves its intent open
for reconciliation."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import mcp_types as types
import uvicorn
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from . import AsyncRun, AsyncSeamClient, ErrorClass, IntentInDoubt, Outcome, SeamError, ToolError

logger = logging.getLogger("seam_client.mcp_proxy")

KEY_META = "seam/idempotency_key"
STEP_META = "seam/step_id"
RUN_META = "seam/run_id"
STATUS_META = "seam/status"
# Where the proxy's own notes go in an outcome's receipt, beside the server's structured result.
HINTS_RECEIPT_KEY = "_mcp"
JOURNAL_STATE = "seam_client.journal"
SUMMARY_LIMIT = 4000
# JSON-RPC errors that say the server refused the request before any tool ran.
REFUSED_CODES = {types.INVALID_PARAMS, types.METHOD_NOT_FOUND, types.INVALID_REQUEST, types.PARSE_ERROR}


@dataclass(frozen=True)
class ToolPolicy:
    """How the proxy journals one tool, read from its MCP annotations (spec defaults: not
    read-only, destructive, not idempotent)."""

    journaled: bool
    destructive: bool
    idempotent: bool
    irreversible: bool

    @classmethod
    def from_annotations(
        cls, annotations: types.ToolAnnotations | None, *, catalogued: bool, journal_anyway: bool = False
    ) -> ToolPolicy:
        read_only = bool(annotations and annotations.read_only_hint)
        destructive = not read_only and (annotations is None or annotations.destructive_hint is not False)
        idempotent = bool(annotations and annotations.idempotent_hint)
        return cls(
            journaled=journal_anyway or not read_only,
            destructive=destructive,
            idempotent=idempotent,
            irreversible=destructive and not catalogued,
        )

    def hints(self) -> dict[str, bool]:
        return {
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "irreversible": self.irreversible,
        }


@dataclass(frozen=True)
class ProxySettings:
    """What the proxy journals under: Seam's address and agent token, the runs' task type and
    versions, which tools have a catalogue entry, and which read-only tools to journal anyway."""

    seam_url: str
    token: str
    task_type: str = "mcp_session"
    versions: Mapping[str, str] = field(default_factory=dict)
    catalogued: frozenset[str] = frozenset()
    journal: frozenset[str] = frozenset()
    heartbeat_every: float = 15.0


def capability_version(tools: Sequence[types.Tool]) -> str:
    """A fingerprint of the tools the server offered (names and annotations), recorded as the
    run's capability version: two runs under different tool sets say so."""
    listing = sorted(
        (tool.name, tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {})
        for tool in tools
    )
    return "mcp-" + hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()[:16]


class SessionJournal:
    """The run of one client session: opened at its first journaled call, kept alive by a
    heartbeat while the proxy serves the session, and completed when the proxy closes with
    every intent settled. Turns number the journaled calls 1, 2, …"""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.external_id = f"mcp-{uuid.uuid4()}"
        self.run: AsyncRun | None = None
        self.turns = 0
        self.open_calls = 0
        self.closed = anyio.Event()
        self._lock = anyio.Lock()

    async def ensure_run(self) -> AsyncRun:
        async with self._lock:
            if self.run is None:
                settings = self.proxy.settings
                versions = {
                    "schema": "1",
                    "flow": "mcp",
                    "policy": "1",
                    "capability": capability_version(list(self.proxy.tools.values())),
                    **settings.versions,
                }
                self.run = await self.proxy.seam.start_run(
                    task_type=settings.task_type, versions=versions, plan=[], external_id=self.external_id
                )
                self.proxy.keep_alive(self.run, until=self.closed)
            return self.run

    async def call(
        self, upstream: ClientSession, name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        policy = await self.proxy.policy(name)
        if not policy.journaled:
            return await _forward(upstream, name, arguments, meta=None)
        try:
            run = await self.ensure_run()
        except SeamError as exc:
            return _refusal(f"Seam could not open a run for this session, so {name} was not sent: {exc}")
        self.turns += 1
        turn = self.turns
        answered: dict[str, types.CallToolResult] = {}

        async def send(args: dict[str, Any], key: str) -> Outcome:
            try:
                result = await _forward(upstream, name, args, meta={KEY_META: key})
            except MCPError as exc:
                if exc.code in REFUSED_CODES:
                    raise ToolError(ErrorClass.INVALID_INPUT, f"{name} refused: {exc.message}") from exc
                raise ToolError(
                    ErrorClass.AMBIGUOUS, f"{name}: the server's answer was an error: {exc}"
                ) from exc
            except Exception as exc:  # the connection broke: the server may have acted
                raise ToolError(ErrorClass.AMBIGUOUS, f"{name}: no answer from the server ({exc!r})") from exc
            answered["result"] = result
            text = _text_of(result)
            if result.is_error:
                raise ToolError(ErrorClass.PERMANENT, text[:SUMMARY_LIMIT] or f"{name} failed")
            receipt = dict(result.structured_content or {})
            receipt[HINTS_RECEIPT_KEY] = policy.hints()
            return Outcome(summary=text[:SUMMARY_LIMIT], receipt=receipt)

        self.open_calls += 1
        try:
            intent = await run.perform(name, arguments, send, turn=turn)
        except IntentInDoubt as exc:
            return _refusal(
                f"{name} is already recorded without an outcome (step {exc.intent.step_id}); it is not "
                "sent again: Seam's reconciliation asks the server about it."
            )
        except ToolError as exc:
            result = answered.get("result")
            if result is not None:  # the server answered with a tool error: recorded as failed
                return result
            return _refusal(exc.message)
        except SeamError as exc:
            result = answered.get("result")
            if result is not None:  # performed, but the outcome could not be recorded
                return result
            return _refusal(f"Seam did not record the intent, so {name} was not sent: {exc}")
        finally:
            self.open_calls -= 1
        result = answered.get("result")
        if result is None:  # a settled intent replayed: the call was not made again
            result = types.CallToolResult(
                content=[types.TextContent(type="text", text=intent.summary)],
                structured_content={k: v for k, v in intent.receipt.items() if k != HINTS_RECEIPT_KEY}
                or None,
            )
        meta = dict(result.meta or {})
        meta.update(
            {
                RUN_META: run.id,
                STEP_META: intent.step_id,
                KEY_META: intent.idempotency_key,
                STATUS_META: intent.status,
            }
        )
        return result.model_copy(update={"meta": meta})

    async def close(self) -> None:
        """Complete the run if every intent it recorded is settled; otherwise leave it running
        (reconciliation settles what is open once the heartbeat stops)."""
        self.closed.set()  # its heartbeat stops: a run left open goes stale for reconciliation
        if self.run is None or self.open_calls:
            return
        try:
            await self.run.complete()
        except SeamError as exc:
            logger.warning("run %s left running: %s", self.run.id, exc)


async def _forward(
    upstream: ClientSession, name: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None
) -> types.CallToolResult:
    result = await upstream.call_tool(
        name, arguments, meta=cast(types.RequestParamsMeta, meta) if meta else None
    )
    if not isinstance(result, types.CallToolResult):
        raise MCPError(
            types.INTERNAL_ERROR,
            f"{name} answered with a {type(result).__name__}, which the proxy does not relay",
        )
    return result


def _text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _refusal(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class Proxy:
    """The proxy's state: the upstream server's session and tools, Seam's client, and the run of
    each client session it serves."""

    def __init__(self, settings: ProxySettings, seam: AsyncSeamClient, upstream: ClientSession) -> None:
        self.settings = settings
        self.seam = seam
        self.upstream = upstream
        self.tools: dict[str, types.Tool] = {}
        self.sessions: dict[int, SessionJournal] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._stopped = anyio.Event()

    async def list_tools(self, params: types.PaginatedRequestParams | None = None) -> types.ListToolsResult:
        listing = await self.upstream.list_tools(params=params)
        self.tools.update({tool.name: tool for tool in listing.tools})
        return listing

    async def policy(self, name: str) -> ToolPolicy:
        if name not in self.tools:
            cursor: str | None = None
            while True:
                listing = await self.list_tools(
                    types.PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                cursor = listing.next_cursor
                if not cursor:
                    break
        tool = self.tools.get(name)
        return ToolPolicy.from_annotations(
            tool.annotations if tool else None,
            catalogued=name in self.settings.catalogued,
            journal_anyway=name in self.settings.journal,
        )

    def session(self, ctx: ServerRequestContext[Any]) -> SessionJournal:
        """The journal of the client connection this request came on: kept in the connection's
        own state, and closed (the run completed if all is settled) when the connection closes.
        The low-level context reaches the connection only through its session."""
        connection: Connection | None = getattr(ctx.session, "_connection", None)
        if connection is None:  # no connection to hang it on: one journal for the process
            return self.sessions.setdefault(0, SessionJournal(self))
        journal = connection.state.get(JOURNAL_STATE)
        if journal is None:
            journal = connection.state[JOURNAL_STATE] = SessionJournal(self)
            self.sessions[id(connection)] = journal
            connection.exit_stack.push_async_callback(self._close, id(connection))
        assert isinstance(journal, SessionJournal)
        return journal

    async def _close(self, key: int) -> None:
        journal = self.sessions.pop(key, None)
        if journal is not None:
            await journal.close()

    def keep_alive(self, run: AsyncRun, *, until: anyio.Event) -> None:
        """Beat for the run until its session closes (or the proxy stops)."""
        if self._task_group is not None:
            self._task_group.start_soon(self._heartbeat, run, until)

    async def _heartbeat(self, run: AsyncRun, until: anyio.Event) -> None:
        async with run.heartbeat(every=self.settings.heartbeat_every), anyio.create_task_group() as group:

            async def stop_on(event: anyio.Event) -> None:
                await event.wait()
                group.cancel_scope.cancel()

            group.start_soon(stop_on, until)
            group.start_soon(stop_on, self._stopped)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Proxy]:
        async with anyio.create_task_group() as group:
            self._task_group = group
            try:
                yield self
            finally:
                for journal in list(self.sessions.values()):
                    with anyio.CancelScope(shield=True):
                        await journal.close()
                self._stopped.set()

    def server(self) -> Server[Any]:
        async def on_list_tools(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return await self.list_tools(params)

        async def on_call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            journal = self.session(ctx)
            return await journal.call(self.upstream, params.name, dict(params.arguments or {}))

        return Server("seam-mcp-proxy", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


@contextlib.asynccontextmanager
async def upstream_session(*, command: Sequence[str] = (), url: str = "") -> AsyncIterator[ClientSession]:
    """A client session with the proxied server: a child process over stdio, or a URL."""
    async with contextlib.AsyncExitStack() as stack:
        if url:
            read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
        else:
            params = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ))
            read, write, *_ = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def running_proxy(
    settings: ProxySettings, *, command: Sequence[str] = (), url: str = ""
) -> AsyncIterator[Proxy]:
    async with (
        AsyncSeamClient(settings.seam_url, settings.token) as seam,
        upstream_session(command=command, url=url) as upstream,
    ):
        proxy = Proxy(settings, seam, upstream)
        async with proxy.serving():
            yield proxy


async def serve_stdio(settings: ProxySettings, *, command: Sequence[str] = (), url: str = "") -> None:
    """Serve one MCP client on this process's stdin/stdout: one session, one run."""
    async with running_proxy(settings, command=command, url=url) as proxy:
        server = proxy.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


async def serve_http(
    settings: ProxySettings, *, host: str, port: int, command: Sequence[str] = (), url: str = ""
) -> None:
    """Serve MCP clients over streamable HTTP at http://HOST:PORT/mcp: a run per client session."""
    async with running_proxy(settings, command=command, url=url) as proxy:
        app = proxy.server().streamable_http_app(host=host)
        await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    args = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args:
        split = args.index("--")
        args, command = args[:split], args[split + 1 :]
    parser = argparse.ArgumentParser(prog="seam-mcp-proxy", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seam-url", default=os.environ.get("SEAM_URL", ""), help="Seam's address (SEAM_URL)"
    )
    parser.add_argument(
        "--token", default=os.environ.get("SEAM_TOKEN", ""), help="an agent token (SEAM_TOKEN)"
    )
    parser.add_argument("--task-type", default="mcp_session", help="the task type of each session's run")
    parser.add_argument("--server-url", default="", help="the proxied server's streamable HTTP URL")
    parser.add_argument(
        "--catalogued", action="append", default=[], help="a tool with a catalogue entry in Seam"
    )
    parser.add_argument("--journal", action="append", default=[], help="journal this tool even if read-only")
    parser.add_argument("--version", action="append", default=[], metavar="NAME=VALUE", help="a run version")
    parser.add_argument("--http", action="store_true", help="serve clients over streamable HTTP, not stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8320)
    options = parser.parse_args(args)
    if not options.seam_url or not options.token:
        parser.error("--seam-url and --token (or SEAM_URL and SEAM_TOKEN) are required")
    if bool(command) == bool(options.server_url):
        parser.error("give the server as either --server-url URL or -- COMMAND ARGS")
    return options, command


def main(argv: Sequence[str] | None = None) -> None:
    options, command = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    settings = ProxySettings(
        seam_url=options.seam_url,
        token=options.token,
        task_type=options.task_type,
        versions=dict(item.split("=", 1) for item in options.version),
        catalogued=frozenset(options.catalogued),
        journal=frozenset(options.journal),
    )
    if options.http:
        anyio.run(
            lambda: serve_http(
                settings, host=options.host, port=options.port, command=command, url=options.server_url
            )
        )
    else:
        anyio.run(lambda: serve_stdio(settings, command=command, url=options.server_url))


if __name__ == "__main__":
    main()
