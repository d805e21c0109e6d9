"""The proxy over streamable HTTP: a bearer token on every request, and sessions that outlive
the proxy's process.

Authentication. Every request must carry `Authorization: Bearer <token>` (the token given with
`--auth-token` or SEAM_MCP_PROXY_TOKEN, compared in constant time); any other request is answered
401 before it is read, so nothing is forwarded or journaled for it. The proxy forwards calls that
are journaled under its Seam agent token: an open endpoint would let any host that reaches it act
in the agent's name.

Sessions. The SDK's session manager keeps its sessions in memory and answers an unknown session
id 404, so a client whose proxy restarted would have to start a new session, and its retried
write would start a new run and be sent again. The proxy therefore serves the SDK's stateless
transport and keeps the sessions itself: it hands out an `Mcp-Session-Id` with the answer to
`initialize` and requires one on every other request; the session's journal (its run) is found by
that id, in memory or, after a restart, in Seam (the run's external id is `mcp-session-<id>`).
DELETE ends a session (its run is completed if every call is settled). The proxy sends no
server-initiated messages, so GET (the optional event stream) is answered 405."""

from __future__ import annotations

import hmac
import json
import logging
import re
import uuid
from collections.abc import Sequence
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .proxy import SESSION_HEADER, Proxy, ProxySettings, running_proxy

logger = logging.getLogger("seam_client.mcp_proxy")

AUTH_TOKEN_ENV = "SEAM_MCP_PROXY_TOKEN"  # noqa: S105 (the variable's name, not a token)
MIN_TOKEN_LENGTH = 16
MAX_BODY = 4 * 1024 * 1024
# Visible ASCII, as the spec requires of a session id; bounded, since it names a run.
SESSION_ID = re.compile(r"[\x21-\x7e]{1,128}")


class SessionGate:
    """ASGI in front of the SDK's stateless streamable HTTP app: the bearer token, then the
    session id."""

    def __init__(self, app: ASGIApp, proxy: Proxy, token: str, *, path: str = "/mcp") -> None:
        if len(token) < MIN_TOKEN_LENGTH:
            raise ValueError(f"the proxy's auth token must be at least {MIN_TOKEN_LENGTH} characters")
        self.app = app
        self.proxy = proxy
        self._token = token.encode()
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan: the SDK's session manager starts and stops
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if not self._authorized(headers.get("authorization", "")):
            await _reply(
                send, 401, "Unauthorized: a bearer token is required", {"www-authenticate": "Bearer"}
            )
            return
        if scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        session_id = headers.get(SESSION_HEADER)
        method = scope["method"]
        if method == "DELETE" and session_id:
            await self.proxy.end_session(session_id)
            await _reply(send, 200, "", {})
        elif method == "POST":
            await self._post(scope, receive, send, session_id)
        else:
            await _reply(send, 405, "Method Not Allowed", {"allow": "POST, DELETE"})

    def _authorized(self, header: str) -> bool:
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(presented.strip().encode(), self._token)

    async def _post(self, scope: Scope, receive: Receive, send: Send, session_id: str | None) -> None:
        body = await _read_body(receive)
        if body is None:
            await _reply(send, 413, "Payload Too Large", {})
            return
        if session_id is None:
            if not _is_initialize(body):
                await _reply(send, 400, "Bad Request: Missing session ID", {})
                return
            send = _with_session_header(send, uuid.uuid4().hex)
        elif not SESSION_ID.fullmatch(session_id):
            await _reply(send, 400, "Bad Request: invalid session ID", {})
            return
        await self.app(scope, _replaying(body, receive), send)


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _is_initialize(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "initialize"


def _with_session_header(send: Send, session_id: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] < 400:
            message = {
                **message,
                "headers": [*message.get("headers", []), (b"mcp-session-id", session_id.encode())],
            }
        await send(message)

    return sending


async def _reply(send: Send, status: int, text: str, headers: dict[str, str]) -> None:
    body = (
        json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}}).encode()
        if text
        else b""
    )
    raw: list[tuple[bytes, bytes]] = [(key.encode(), value.encode()) for key, value in headers.items()]
    if body:
        raw.append((b"content-type", b"application/json"))
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def serve_http(
    settings: ProxySettings,
    *,
    host: str,
    port: int,
    auth_token: str,
    command: Sequence[str] = (),
    url: str = "",
) -> None:
    """Serve MCP clients over streamable HTTP at http://HOST:PORT/mcp, each request with the
    bearer token: a run per client session, kept across restarts of the proxy."""
    async with running_proxy(settings, command=command, url=url, complete_on_exit=False) as proxy:
        app: Any = proxy.server().streamable_http_app(host=host, stateless_http=True)
        gate = SessionGate(app, proxy, auth_token)
        logger.info("serving MCP clients at http://%s:%d/mcp (bearer token required)", host, port)
        config = uvicorn.Config(gate, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
        await uvicorn.Server(config).serve()
