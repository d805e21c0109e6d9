"""Seam's MCP proxy in front of real third-party MCP servers from the package registry, driven by
the `mcp` SDK's own ClientSession over stdio and over streamable HTTP, each outcome checked
against the server's own state: git's (`mcp-server-git`) and the sqlite file's
(`mcp-server-sqlite`), not against Seam's rows alone.

Each server is installed with pip into its own virtualenv under var/mcp-servers/ (made once, by
the session's first test): mcp-server-sqlite is written for the `mcp` 1.x SDK, ours is 2.x."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import call_command
from seam_client import SeamClient

from devtools.processes import ROOT, free_port
from journal.models import Intent, IntentStatus, Run, RunStatus, Tenant
from tests.clients.mcp_support import (
    agent_token,
    http_mcp_client,
    kill_proxy_and_its_server,
    kill_with_children,
    mcp_client,
    proxy_in_front_of,
    start_http_proxy,
    stop,
)
from tests.support import recovery_figure
from tests.support.in_flight import open_calls_past_in_flight

pytestmark = [pytest.mark.chaos, pytest.mark.django_db(transaction=True)]

SERVERS = ROOT / "var" / "mcp-servers"
PINS = {
    "git": ["mcp-server-git==2026.10.19"],
    "sqlite": ["mcp-server-sqlite==2025.4.25", "mcp<2"],
}
# mcp-server-sqlite has no annotations: its operator declares which tools only read.
SQLITE_DECLARATIONS = """
[tools.read_query]
read_only = true
[tools.list_tables]
read_only = true
[tools.describe_table]
read_only = true
"""


def installed(name: str) -> Path:
    """The server's command, from its own virtualenv (pip, from the package registry)."""
    venv = SERVERS / name
    marker = venv / "pins.txt"
    pins = "\n".join(PINS[name])
    if not marker.exists() or marker.read_text() != pins:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", *PINS[name]],
            check=True,
            timeout=900,
        )
        marker.write_text(pins)
    return venv / "bin" / f"mcp-server-{name}"


@pytest.fixture(scope="session")
def git_server() -> Path:
    return installed("git")


@pytest.fixture(scope="session")
def sqlite_server() -> Path:
    return installed("sqlite")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "agent@example.com")
    git(repo, "config", "user.name", "Agent")
    (repo / "README").write_text("a repository an agent works in\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "start")
    return repo


def post_commit_hook(repo: Path, script: str) -> Path:
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\n{script}\n")
    hook.chmod(0o755)
    return hook


def commits(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%s").splitlines()


class Proxied:
    """The proxy in front of one server, reached over stdio (a child of the client) or over
    streamable HTTP (a process of the test's, on a free port)."""

    def __init__(self, seam_url: str, token: str, upstream: list[str], options: tuple[str, ...] = ()) -> None:
        self.token = token
        self.port = free_port()
        self.stdio = proxy_in_front_of(seam_url, token, upstream, options=options)
        self.http = proxy_in_front_of(
            seam_url, token, upstream, options=(*options, "--http", "--port", str(self.port))
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.processes: list[subprocess.Popen[bytes]] = []

    def start_http(self) -> subprocess.Popen[bytes]:
        self.processes.append(start_http_proxy(self.http, self.port))
        return self.processes[-1]

    def stop_all(self) -> None:
        for process in self.processes:
            stop(process)


@pytest.fixture
def proxied() -> Iterator[list[Proxied]]:
    made: list[Proxied] = []
    yield made
    for proxy in made:
        proxy.stop_all()


def in_front_of_git(
    live_server: Any, tenant: Tenant, git_server: Path, repo: Path, made: list[Proxied]
) -> Proxied:
    proxy = Proxied(
        live_server.url,
        agent_token(tenant),
        ["--", str(git_server), "--repository", str(repo)],
        options=("--task-type", "git_session"),
    )
    made.append(proxy)
    return proxy


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_git_add_twice_with_an_edit_between_commits_the_second_edit(
    transport: str, live_server: Any, tenant: Tenant, git_server: Path, repo: Path, proxied: list[Proxied]
) -> None:
    proxy = in_front_of_git(live_server, tenant, git_server, repo, proxied)
    notes = repo / "notes.txt"

    async def agent(client: Any) -> list[Any]:
        notes.write_text("first draft\n")
        first = await client.call_tool("git_add", {"repo_path": str(repo), "files": ["notes.txt"]})
        notes.write_text("second draft\n")
        second = await client.call_tool("git_add", {"repo_path": str(repo), "files": ["notes.txt"]})
        commit = await client.call_tool("git_commit", {"repo_path": str(repo), "message": "notes"})
        return [first, second, commit]

    async def session() -> list[Any]:
        if transport == "stdio":
            async with mcp_client(proxy.stdio) as client:
                return await agent(client)
        proxy.start_http()
        async with http_mcp_client(proxy.url) as client:
            return await agent(client)

    answers = anyio.run(session)

    assert not any(answer.is_error for answer in answers), [text(answer) for answer in answers]
    # Git's own record: the commit holds the second edit.
    assert commits(repo) == ["notes", "start"]
    assert git(repo, "show", "HEAD:notes.txt") == "second draft"
    intents = list(Intent.objects.filter(run__tenant=tenant).order_by("turn"))
    assert [(i.tool, i.occurrence, i.status) for i in intents] == [
        ("git_add", 0, IntentStatus.PERFORMED),
        ("git_add", 1, IntentStatus.PERFORMED),
        ("git_commit", 0, IntentStatus.PERFORMED),
    ]
    assert intents[0].idempotency_key != intents[1].idempotency_key


def test_a_commit_whose_post_commit_hook_fails_is_uncertain_not_failed(
    live_server: Any, tenant: Tenant, git_server: Path, repo: Path, proxied: list[Proxied]
) -> None:
    proxy = in_front_of_git(live_server, tenant, git_server, repo, proxied)
    # Git makes the commit, then runs the hook; the server answers the hook's failure as an error.
    post_commit_hook(repo, "echo 'the post-commit hook failed' >&2; exit 1")
    (repo / "notes.txt").write_text("a change\n")

    async def session() -> Any:
        async with mcp_client(proxy.stdio) as client:
            await client.call_tool("git_add", {"repo_path": str(repo), "files": ["notes.txt"]})
            return await client.call_tool("git_commit", {"repo_path": str(repo), "message": "hooked"})

    answer = anyio.run(session)

    # The client has the server's own error; git has the commit.
    assert answer.is_error and "post-commit" in text(answer)
    assert commits(repo) == ["hooked", "start"]
    commit = Intent.objects.get(run__tenant=tenant, tool="git_commit")
    assert commit.status == IntentStatus.INTENDED and commit.error_class == "ambiguous"
    assert "post-commit" in commit.outcome_summary
    run = commit.run
    assert run.status == RunStatus.RUNNING  # not completed: a step is uncertain

    open_calls_past_in_flight(run=run)
    call_command("reconcile", older_than=0, stdout=io.StringIO())
    handover = SeamClient(live_server.url, proxy.token).run(str(run.id)).handover()
    assert [step["tool"] for step in handover.uncertain] == ["git_commit"]
    assert "post-commit" in json.dumps(handover.uncertain)


def test_a_proxy_killed_mid_commit_leaves_it_uncertain_and_git_holds_it_once(
    live_server: Any, tenant: Tenant, git_server: Path, repo: Path, proxied: list[Proxied]
) -> None:
    proxy = in_front_of_git(live_server, tenant, git_server, repo, proxied)
    post_commit_hook(repo, "exec sleep 600")  # the commit is made; its answer waits on the hook
    (repo / "notes.txt").write_text("a change\n")

    async def session() -> None:
        async with mcp_client(proxy.stdio) as client:
            await client.call_tool("git_add", {"repo_path": str(repo), "files": ["notes.txt"]})
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "git_commit", {"repo_path": str(repo), "message": "held"})
                with anyio.fail_after(30):
                    while commits(repo)[0] != "held":
                        await anyio.sleep(0.05)
                kill_proxy_and_its_server()
                group.cancel_scope.cancel()

    anyio.run(session)

    assert commits(repo) == ["held", "start"]
    commit = Intent.objects.get(run__tenant=tenant, tool="git_commit")
    assert commit.status == IntentStatus.INTENDED
    assert commit.run.status == RunStatus.RUNNING
    open_calls_past_in_flight(run=commit.run)
    call_command("reconcile", older_than=0, stdout=io.StringIO())
    commit.refresh_from_db()
    # Reconciled, not decided: recorded as left open (its decision would be calls_unknown, git_commit
    # being a tool nobody can ask or send again). Git's log is the world; `completed` is not checked.
    recovery_figure.record(
        "MCP proxy",
        commit.run,
        point="git: killed mid commit",
        doubled_or_lost=recovery_figure.counted_once({"held": commits(repo).count("held")}),
        false_statements=(),
    )
    # Nothing can ask git by the key: a person decides, and the commit is still there once.
    assert commit.status == IntentStatus.UNKNOWN
    assert commits(repo) == ["held", "start"]


def test_a_proxy_restarted_mid_session_does_not_commit_twice(
    live_server: Any, tenant: Tenant, git_server: Path, repo: Path, proxied: list[Proxied]
) -> None:
    proxy = in_front_of_git(live_server, tenant, git_server, repo, proxied)
    hook = post_commit_hook(repo, "exec sleep 600")
    notes = repo / "notes.txt"
    add = {"repo_path": str(repo), "files": ["notes.txt"]}

    async def session() -> dict[str, Any]:
        first = proxy.start_http()
        async with http_mcp_client(proxy.url) as client:
            notes.write_text("first\n")
            await client.call_tool("git_add", add)
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "git_commit", {"repo_path": str(repo), "message": "one"})
                with anyio.fail_after(30):
                    while commits(repo)[0] != "one":
                        await anyio.sleep(0.05)
                kill_with_children(first)
                group.cancel_scope.cancel()
            hook.unlink()
            proxy.start_http()
            # The client retries the commit whose answer it lost, on the same session.
            retried = await client.call_tool("git_commit", {"repo_path": str(repo), "message": "one"})
            # And goes on: the same git_add again (a new call), then a second commit.
            notes.write_text("second\n")
            added = await client.call_tool("git_add", add)
            two = await client.call_tool("git_commit", {"repo_path": str(repo), "message": "two"})
            return {"retried": retried, "added": added, "two": two}

    seen = anyio.run(session)

    # Git's record: each commit once, the second with the second edit.
    assert commits(repo) == ["two", "one", "start"]
    assert git(repo, "show", "HEAD:notes.txt") == "second"
    # The retry was not sent again: git cannot be asked by key, so it is left in doubt.
    assert seen["retried"].is_error and "not sent again" in text(seen["retried"])
    assert not seen["added"].is_error and not seen["two"].is_error
    (run,) = Run.objects.filter(tenant=tenant)
    assert run.external_id.startswith("mcp-session-")
    intents = list(Intent.objects.filter(run=run).order_by("turn"))
    assert [(i.turn, i.tool, i.occurrence, i.status) for i in intents] == [
        (1, "git_add", 0, IntentStatus.PERFORMED),
        (2, "git_commit", 0, IntentStatus.INTENDED),
        (3, "git_add", 1, IntentStatus.PERFORMED),
        (4, "git_commit", 0, IntentStatus.PERFORMED),
    ]


def rows(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        return [row[0] for row in connection.execute("SELECT body FROM notes ORDER BY rowid")]


def in_front_of_sqlite(
    live_server: Any, tenant: Tenant, sqlite_server: Path, tmp_path: Path, made: list[Proxied]
) -> tuple[Proxied, Path]:
    database = tmp_path / "notes.db"
    declarations = tmp_path / "sqlite.toml"
    declarations.write_text(SQLITE_DECLARATIONS)
    proxy = Proxied(
        live_server.url,
        agent_token(tenant),
        ["--", str(sqlite_server), "--db-path", str(database)],
        options=("--task-type", "notes_session", "--declarations", str(declarations)),
    )
    made.append(proxy)
    return proxy, database


INSERT_A = {"query": "INSERT INTO notes (body) VALUES ('a')"}


def test_identical_sqlite_inserts_are_two_rows_and_reads_are_not_journaled(
    live_server: Any, tenant: Tenant, sqlite_server: Path, tmp_path: Path, proxied: list[Proxied]
) -> None:
    proxy, database = in_front_of_sqlite(live_server, tenant, sqlite_server, tmp_path, proxied)

    async def session() -> Any:
        async with mcp_client(proxy.stdio) as client:
            await client.call_tool("create_table", {"query": "CREATE TABLE notes (body TEXT)"})
            await client.call_tool("write_query", INSERT_A)
            await client.call_tool("write_query", INSERT_A)
            return await client.call_tool("read_query", {"query": "SELECT count(*) AS n FROM notes"})

    read = anyio.run(session)

    assert rows(database) == ["a", "a"]
    assert "2" in text(read)
    assert list(
        Intent.objects.filter(run__tenant=tenant).order_by("turn").values_list("tool", "occurrence")
    ) == [
        ("create_table", 0),
        ("write_query", 0),
        ("write_query", 1),
    ]


def test_a_sqlite_write_retried_after_a_proxy_restart_is_not_written_twice(
    live_server: Any, tenant: Tenant, sqlite_server: Path, tmp_path: Path, proxied: list[Proxied]
) -> None:
    proxy, database = in_front_of_sqlite(live_server, tenant, sqlite_server, tmp_path, proxied)

    async def session() -> Any:
        first = proxy.start_http()
        async with http_mcp_client(proxy.url) as client:
            await client.call_tool("create_table", {"query": "CREATE TABLE notes (body TEXT)"})
            await client.call_tool("write_query", INSERT_A)
            kill_with_children(first)
            proxy.start_http()
            # The client did not see the insert's answer and sends it again on its session.
            retried = await client.call_tool("write_query", INSERT_A)
            await client.call_tool("write_query", {"query": "INSERT INTO notes (body) VALUES ('b')"})
            return retried

    retried = anyio.run(session)

    # The sqlite file: the retried insert was answered from the journal, not run again.
    assert rows(database) == ["a", "b"]
    assert not retried.is_error and retried.meta["seam/status"] == "performed"
    (run,) = Run.objects.filter(tenant=tenant)
    assert Intent.objects.filter(run=run).count() == 3
