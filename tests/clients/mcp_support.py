"""Seam's MCP proxy under test: the mcpdesk example server (examples/mcpdesk, built with the
official SDK) as a real process behind a real proxy process, driven by the SDK's own client, and
the settings pointed at the example's tools, catalogue and policy."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import requests
from django.core.management import call_command
from django.test import modify_settings, override_settings
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from devtools.processes import ROOT
from journal.models import AgentToken, Tenant

# The example's Django app, whose seam.py declares its tool, catalogue entry and policy.
APP = "examples.mcpdesk"
# The desk declares only credit_account to Seam; its other writes (close_account) reach Seam
# through the proxy, journaled without a connector, as a proxied server's tools may.
UNDECLARED_TOOLS = "accept"
CLIENT_SRC = ROOT / "clients" / "python" / "src"
DESK_DECLARATIONS = ROOT / "examples" / "mcpdesk" / "declarations.toml"
# The bearer token the tests' HTTP proxies require (SEAM_MCP_PROXY_TOKEN).
PROXY_AUTH_TOKEN = "test-proxy-token-0123456789"


@dataclass(frozen=True)
class Desk:
    state_file: Path

    def state(self) -> dict[str, Any]:
        """The desk's own record of what it did."""
        state: dict[str, Any] = json.loads(self.state_file.read_text())
        return state


@contextlib.contextmanager
def desk_registered(tmp_path: Path) -> Iterator[Desk]:
    """The example's app installed (seeded), its state file where its lookups look."""
    desk = Desk(tmp_path / "mcpdesk.json")
    previous = os.environ.get("MCPDESK_STATE")
    os.environ["MCPDESK_STATE"] = str(desk.state_file)
    try:
        with (
            modify_settings(INSTALLED_APPS={"append": APP}),
            override_settings(SEAM_UNDECLARED_TOOLS=UNDECLARED_TOOLS),
        ):
            call_command("seam_seed", stdout=io.StringIO())
            yield desk
    finally:
        if previous is None:
            os.environ.pop("MCPDESK_STATE", None)
        else:
            os.environ["MCPDESK_STATE"] = previous


def agent_token(tenant: Tenant, name: str = "mcp-proxy") -> str:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name=name, digest=AgentToken.digest_of(secret))
    return secret


def proxy_parameters(
    seam_url: str,
    token: str,
    desk: Desk,
    *,
    server: list[str] | None = None,
    options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    declarations: bool = True,
) -> StdioServerParameters:
    """`python -m seam_client.mcp_proxy` in front of the desk (a stdio child of the proxy unless
    `server` says otherwise), as an MCP client such as a desktop app would start it; with the
    desk's declarations file unless `declarations` is false (then only the annotations and
    `--catalogued credit_account`)."""
    upstream = server or [
        "--",
        sys.executable,
        "-m",
        "examples.mcpdesk.server",
        "--state",
        str(desk.state_file),
    ]
    declared = (
        ("--declarations", str(DESK_DECLARATIONS)) if declarations else ("--catalogued", "credit_account")
    )
    return proxy_in_front_of(
        seam_url, token, upstream, options=("--task-type", "desk_session", *declared, *options), env=env
    )


def proxy_in_front_of(
    seam_url: str,
    token: str,
    upstream: list[str],
    *,
    options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> StdioServerParameters:
    """`python -m seam_client.mcp_proxy OPTIONS UPSTREAM` (`-- COMMAND…` or `--server-url URL`),
    with the client package on the path and the bearer token its HTTP mode requires."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "seam_client.mcp_proxy", "--seam-url", seam_url, "--token", token, *options, *upstream],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(CLIENT_SRC), str(ROOT), os.environ.get("PYTHONPATH")])
            ),
            "SEAM_MCP_PROXY_TOKEN": PROXY_AUTH_TOKEN,
            **(env or {}),
        },
        cwd=str(ROOT),
    )


@contextlib.asynccontextmanager
async def mcp_client(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    async with stdio_client(params) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: the parent id follows it.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def proxy_pid() -> int:
    """The proxy process this test process started (through the SDK's stdio client)."""
    for pid in children_of(os.getpid()):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"seam_client.mcp_proxy" in cmdline:
            return pid
    raise AssertionError("no proxy process is running")


def kill_proxy_and_its_server() -> int:
    """SIGKILL the proxy (the kill under test), then its orphaned server and whatever that was
    running. The proxy's id."""
    pid = proxy_pid()
    servers = descendants_of(pid)
    os.kill(pid, signal.SIGKILL)
    for server in servers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(pid):  # dead once a zombie: the SDK's client reaps it
        assert time.monotonic() < deadline, "the proxy survived SIGKILL"
        time.sleep(0.05)
    return pid


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def start_http_proxy(params: StdioServerParameters, port: int) -> subprocess.Popen[bytes]:
    """The proxy serving clients over streamable HTTP on `port` (the parameters' options hold
    `--http --port PORT`), once it answers."""
    proxy = subprocess.Popen(
        [params.command, *params.args],
        cwd=ROOT,
        env=params.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
            return proxy
        except requests.RequestException:
            assert time.monotonic() < deadline and proxy.poll() is None, "the proxy did not start"
            time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait(timeout=15)


def kill_with_children(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a proxy this test started (the kill under test), then everything it had started
    (its server, and whatever the server was running)."""
    descendants = descendants_of(process.pid)
    process.kill()
    process.wait(timeout=10)
    for pid in descendants:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def descendants_of(pid: int) -> list[int]:
    found = []
    for child in children_of(pid):
        found += [child, *descendants_of(child)]
    return found


@contextlib.asynccontextmanager
async def http_mcp_client(url: str, token: str = PROXY_AUTH_TOKEN) -> AsyncIterator[ClientSession]:
    """The SDK's own client over streamable HTTP, presenting the proxy's bearer token."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)
        ) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
