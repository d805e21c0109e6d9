"""Seam's MCP proxy (seam_client.mcp_proxy) between the SDK's own client and a real MCP server
process (examples/mcpdesk): tools listed unchanged, each tools/call journaled as an intent before
and an outcome after under one run per session, the annotations mapped, the idempotency key
reaching the server in `_meta`; and a proxy SIGKILLed after the server accepted a call and
before its outcome was recorded, reconciled by asking the server by that key."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import requests
from django.core.management import call_command
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from seam_client import SeamClient

from journal.models import Intent, IntentStatus, Run, RunStatus, Tenant
from tests.clients.mcp_support import (
    Desk,
    agent_token,
    desk_registered,
    kill_proxy_and_its_server,
    mcp_client,
    proxy_parameters,
)
from tests.support.in_flight import open_calls_past_in_flight
from tests.support.processes import ROOT, free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def desk(tmp_path: Path) -> Any:
    with desk_registered(tmp_path) as registered:
        yield registered


def _structured(result: Any) -> dict[str, Any]:
    assert isinstance(result, types.CallToolResult), result
    assert not result.is_error, result.content
    return dict(result.structured_content or {})


def test_the_proxy_lists_the_servers_tools_and_journals_each_write_under_one_run(
    desk: Desk, live_server: Any, tenant: Tenant
) -> None:
    token = agent_token(tenant)

    async def session() -> dict[str, Any]:
        async with mcp_client(proxy_parameters(live_server.url, token, desk)) as client:
            listing = await client.list_tools()
            credit = await client.call_tool("credit_account", {"account": "A-1", "amount": "25.00"})
            balance = await client.call_tool("get_balance", {"account": "A-1"})
            closed = await client.call_tool("close_account", {"account": "A-1", "reason": "asked"})
            refused = await client.call_tool("credit_account", {"account": "A-1", "amount": "5.00"})
            return {
                "listing": listing,
                "credit": credit,
                "balance": balance,
                "closed": closed,
                "refused": refused,
            }

    seen = anyio.run(session)

    # The server's tools, with their annotations, as the server lists them.
    annotations = {tool.name: tool.annotations for tool in seen["listing"].tools}
    assert set(annotations) == {"get_balance", "credit_account", "close_account", "find_call"}
    assert annotations["credit_account"].idempotent_hint is True
    assert annotations["close_account"].destructive_hint is True

    run = Run.objects.get(tenant=tenant, task_type="desk_session")
    intents = list(Intent.objects.filter(run=run).order_by("turn"))
    # The read-only balance was forwarded without an intent; the three writes were journaled.
    assert [(i.turn, i.tool, i.status) for i in intents] == [
        (1, "credit_account", IntentStatus.PERFORMED),
        (2, "close_account", IntentStatus.PERFORMED),
        (3, "credit_account", IntentStatus.FAILED),
    ]
    assert _structured(seen["balance"])["balance"] == "25.00"
    credit, closed, refused = intents
    # Each key reached the server in `_meta`: the desk recorded each call under its intent's key.
    calls = desk.state()["calls"]
    assert set(calls) == {credit.idempotency_key, closed.idempotency_key}
    assert credit.receipt["credit_id"] == calls[credit.idempotency_key]["receipt"]["credit_id"]
    assert seen["credit"].meta["seam/idempotency_key"] == credit.idempotency_key
    assert seen["credit"].meta["seam/step_id"] == credit.step_id
    # Annotations recorded: the credit is idempotent and catalogued; the closure destructive and,
    # with no catalogue entry, irreversible.
    assert credit.receipt["_mcp"] == {"destructiveHint": False, "idempotentHint": True, "irreversible": False}
    assert closed.receipt["_mcp"] == {"destructiveHint": True, "idempotentHint": False, "irreversible": True}
    # The server's own tool error (a closed account) is the client's answer and a failed outcome.
    assert seen["refused"].is_error
    assert refused.error_class == "permanent" and "closed" in refused.outcome_summary
    # The session ended with every intent settled: the run is complete.
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.capability_version.startswith("mcp-")


def test_the_proxy_reaches_a_server_over_streamable_http(
    desk: Desk, live_server: Any, tenant: Tenant
) -> None:
    token = agent_token(tenant)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "examples.mcpdesk.server",
            "--state",
            str(desk.state_file),
            "--http",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                requests.get(url, timeout=1)
                break
            except requests.RequestException:
                assert time.monotonic() < deadline and server.poll() is None, "the desk did not start"
                time.sleep(0.1)

        async def session() -> Any:
            params = proxy_parameters(live_server.url, token, desk, server=["--server-url", url])
            async with mcp_client(params) as client:
                return await client.call_tool("credit_account", {"account": "H-1", "amount": "3.50"})

        result = anyio.run(session)
    finally:
        server.terminate()
        server.wait(timeout=10)

    intent = Intent.objects.get(run__tenant=tenant, tool="credit_account")
    assert intent.status == IntentStatus.PERFORMED
    assert _structured(result)["balance"] == "3.50"
    assert (
        desk.state()["calls"][intent.idempotency_key]["receipt"]["credit_id"] == intent.receipt["credit_id"]
    )


def test_a_proxy_killed_after_the_server_accepted_is_reconciled_by_its_key_and_handed_over(
    desk: Desk, live_server: Any, tenant: Tenant
) -> None:
    token = agent_token(tenant)
    # The desk carries out the credit to A-2 and keeps its answer: the proxy is killed meanwhile.
    params = proxy_parameters(
        live_server.url, token, desk, env={"MCPDESK_HOLD_AFTER_ACCEPT": "credit_account:A-2"}
    )

    async def session() -> None:
        async with mcp_client(params) as client:
            _structured(await client.call_tool("credit_account", {"account": "A-1", "amount": "25.00"}))
            _structured(await client.call_tool("close_account", {"account": "A-3", "reason": "fraud"}))
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "credit_account", {"account": "A-2", "amount": "10.00"})
                with anyio.fail_after(30):
                    while "A-2" not in desk.state()["accounts"]:
                        await anyio.sleep(0.05)
                # Accepted and written down by the server; its answer has not reached the proxy.
                kill_proxy_and_its_server()
                group.cancel_scope.cancel()

    anyio.run(session)

    run = Run.objects.get(tenant=tenant, task_type="desk_session")
    assert run.status == RunStatus.RUNNING
    held = Intent.objects.get(run=run, turn=3)
    assert (held.tool, held.status) == ("credit_account", IntentStatus.INTENDED)
    # The server did it, under the intent's key; the journal could not know.
    assert desk.state()["calls"][held.idempotency_key]["receipt"]["balance"] == "10.00"

    open_calls_past_in_flight(run=run)
    call_command("reconcile", older_than=0, stdout=io.StringIO())

    held.refresh_from_db()
    assert held.status == IntentStatus.PERFORMED
    assert held.receipt == desk.state()["calls"][held.idempotency_key]["receipt"]
    # Nothing twice: two credits and one closure, each under its own intent's key.
    state = desk.state()
    assert len(state["calls"]) == 3 and state["unkeyed"] == []
    assert state["accounts"]["A-2"]["balance"] == "10.00"

    # The handover, read through Seam's API with the client package.
    handover = SeamClient(live_server.url, token).run(str(run.id)).handover()
    completed = {step["tool"]: step for step in handover.completed if step["tool"] != "credit_account"}
    credits = [step for step in handover.completed if step["tool"] == "credit_account"]
    assert len(credits) == 2 and set(completed) == {"close_account"}
    assert handover.uncertain == [] and handover.not_done == []
    assert {step["receipt"]["credit_id"] for step in credits} == {
        state["calls"][key]["receipt"]["credit_id"]
        for key, call in state["calls"].items()
        if call["tool"] == "credit_account"
    }
    # The closure has no catalogue entry: nothing can undo it. The credits can be taken back.
    assert completed["close_account"]["reversibility"]["kind"] == "none"
    assert {step["reversibility"]["kind"] for step in credits} == {"yes"}

    # The policy hands the session to a person, nothing undone.
    call_command("reconcile", older_than=0, decide=True, stdout=io.StringIO())
    run.refresh_from_db()
    assert run.status == RunStatus.ESCALATED
    assert desk.state()["accounts"]["A-1"]["balance"] == "25.00"


def test_clients_over_streamable_http_get_a_run_each(desk: Desk, live_server: Any, tenant: Tenant) -> None:
    token = agent_token(tenant)
    port = free_port()
    params = proxy_parameters(live_server.url, token, desk, options=("--http", "--port", str(port)))
    proxy = subprocess.Popen(
        [params.command, *params.args],
        cwd=ROOT,
        env=params.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(url, timeout=1)
                break
            except requests.RequestException:
                assert time.monotonic() < deadline and proxy.poll() is None, "the proxy did not start"
                time.sleep(0.1)

        async def one_session(account: str) -> Any:
            async with (
                streamable_http_client(url) as (read, write, *_),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                return await client.call_tool("credit_account", {"account": account, "amount": "1.00"})

        async def two_sessions() -> list[Any]:
            return [await one_session("S-1"), await one_session("S-2")]

        results = anyio.run(two_sessions)
        run_ids = {result.meta["seam/run_id"] for result in results}
        assert len(run_ids) == 2
        deadline = time.monotonic() + 30
        # Each session's run is completed when its session closes.
        while Run.objects.filter(tenant=tenant, status=RunStatus.COMPLETED).count() < 2:
            assert time.monotonic() < deadline, "the sessions' runs were not completed"
            time.sleep(0.2)
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)

    runs = Run.objects.filter(tenant=tenant, task_type="desk_session")
    assert {str(run.id) for run in runs} == run_ids
    for run in runs:
        (intent,) = Intent.objects.filter(run=run)
        assert intent.status == IntentStatus.PERFORMED
        assert intent.idempotency_key in desk.state()["calls"]
