"""The proxy's state: the upstream server's session and tools, Seam's client, and the journal of
each client session it serves; and the proxy over stdio."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from .. import AsyncRun, AsyncSeamClient
from .declarations import Declarations
from .journal import SessionJournal
from .policy import ToolPolicy

logger = logging.getLogger("seam_client.mcp_proxy")

JOURNAL_STATE = "seam_client.journal"
SESSION_HEADER = "mcp-session-id"


@dataclass(frozen=True)
class ProxySettings:
    """What the proxy journals under: Seam's address and agent token, the runs' task type and
    versions, which tools have a catalogue entry, which read-only tools to journal anyway, and
    the operator's declarations."""

    seam_url: str
    token: str
    task_type: str = "mcp_session"
    versions: Mapping[str, str] = field(default_factory=dict)
    catalogued: frozenset[str] = frozenset()
    journal: frozenset[str] = frozenset()
    declarations: Declarations = field(default_factory=lambda: Declarations(tools={}))
    heartbeat_every: float = 15.0
    # A session with no call for this long is ended (its heartbeat stops, its run is completed
    # if all is settled), as the SDK's own session manager ends idle sessions.
    session_idle_timeout: float = 30 * 60


class Proxy:
    """The upstream session and tools, Seam's client, and each client session's journal: keyed
    by the client's MCP session id over HTTP, by the connection over stdio."""

    def __init__(self, settings: ProxySettings, seam: AsyncSeamClient, upstream: ClientSession) -> None:
        self.settings = settings
        self.seam = seam
        self.upstream = upstream
        self.tools: dict[str, types.Tool] = {}
        self.sessions: dict[str, SessionJournal] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._stopped = anyio.Event()

    async def list_tools(self, params: types.PaginatedRequestParams | None = None) -> types.ListToolsResult:
        listing = await self.upstream.list_tools(params=params)
        self.tools.update({tool.name: tool for tool in listing.tools})
        return listing

    async def list_all_tools(self) -> None:
        cursor: str | None = None
        while True:
            listing = await self.list_tools(types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            cursor = listing.next_cursor
            if not cursor:
                return

    async def check_declarations(self) -> None:
        """Refuse (DeclarationsError) declarations that do not fit the server's tools."""
        if self.settings.declarations.tools:
            await self.list_all_tools()
            self.settings.declarations.check_against(
                {name: self.policy_of(name).read_only for name in self.tools}
            )

    async def policy(self, name: str) -> ToolPolicy:
        if name not in self.tools:
            await self.list_all_tools()
        return self.policy_of(name)

    def policy_of(self, name: str) -> ToolPolicy:
        tool = self.tools.get(name)
        return ToolPolicy.from_annotations(
            tool.annotations if tool else None,
            catalogued=name in self.settings.catalogued,
            journal_anyway=name in self.settings.journal,
            declared=self.settings.declarations.of(name),
        )

    def session(self, ctx: ServerRequestContext[Any]) -> SessionJournal:
        """The journal of the session this request belongs to: the client's MCP session id over
        streamable HTTP (so it outlives the proxy's process), else the connection's own state."""
        session_id = _session_id_of(ctx)
        if session_id:
            journal = self.sessions.get(session_id)
            if journal is None:
                journal = self.sessions[session_id] = SessionJournal(self, session_id=session_id)
            return journal
        connection: Connection | None = getattr(ctx.session, "_connection", None)
        if connection is None:  # no connection to hang it on: one journal for the process
            return self.sessions.setdefault("", SessionJournal(self))
        journal = connection.state.get(JOURNAL_STATE)
        if journal is None:
            journal = connection.state[JOURNAL_STATE] = SessionJournal(self)
            key = f"connection-{id(connection)}"
            self.sessions[key] = journal
            connection.exit_stack.push_async_callback(self.end_session, key)
        assert isinstance(journal, SessionJournal)
        return journal

    async def end_session(self, key: str) -> None:
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

    async def _end_idle_sessions(self) -> None:
        timeout = self.settings.session_idle_timeout
        while True:
            await anyio.sleep(min(60.0, timeout / 4))
            now = time.monotonic()
            for key, journal in list(self.sessions.items()):
                if not journal.open_calls and now - journal.last_used > timeout:
                    logger.info("session %s idle for %.0f s: ended", key, now - journal.last_used)
                    await self.end_session(key)

    @contextlib.asynccontextmanager
    async def serving(self, *, complete_on_exit: bool = True) -> AsyncIterator[Proxy]:
        """Serve until the block ends. Then each session's heartbeat stops; with
        `complete_on_exit` (stdio, where the proxy's end is the session's end) each run with
        everything settled is completed. Over HTTP a session outlives the process: a client
        that comes back after a restart continues its run."""
        async with anyio.create_task_group() as group:
            self._task_group = group
            group.start_soon(self._end_idle_sessions)
            try:
                yield self
            finally:
                for journal in list(self.sessions.values()):
                    with anyio.CancelScope(shield=True):
                        await journal.close(complete=complete_on_exit)
                self._stopped.set()
                group.cancel_scope.cancel()

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


def _session_id_of(ctx: ServerRequestContext[Any]) -> str:
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return ""
    return str(headers.get(SESSION_HEADER) or "")


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
    settings: ProxySettings, *, command: Sequence[str] = (), url: str = "", complete_on_exit: bool = True
) -> AsyncIterator[Proxy]:
    async with (
        AsyncSeamClient(settings.seam_url, settings.token) as seam,
        upstream_session(command=command, url=url) as upstream,
    ):
        proxy = Proxy(settings, seam, upstream)
        await proxy.check_declarations()
        async with proxy.serving(complete_on_exit=complete_on_exit):
            yield proxy


async def serve_stdio(settings: ProxySettings, *, command: Sequence[str] = (), url: str = "") -> None:
    """Serve one MCP client on this process's stdin/stdout: one session, one run."""
    async with running_proxy(settings, command=command, url=url) as proxy:
        server = proxy.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
