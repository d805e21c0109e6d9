"""Seam's MCP proxy (seam_client.mcp_proxy) between the SDK's own client and a real MCP server
process (examples/mcpdesk): tools listed unchanged, each tools/call journaled as an intent before
and an outcome after under one run per session, the annotations mapped, the idempotency key
reaching the server in `_meta`; and a proxy SIGKILLed after the server accepted a call and
before its outcome was recorded, reconciled by asking the server by that key."""

from __future__ import annotations

import io
import json
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
from seam_client import SeamClient
from seam_client.mcp_proxy import parse_args

from devtools.processes import ROOT, free_port
from journal.models import Intent, IntentStatus, Run, RunStatus, Tenant
from tests.clients.mcp_support import (
    PROXY_AUTH_TOKEN,
    Desk,
    agent_token,
    desk_registered,
    http_mcp_client,
    kill_proxy_and_its_server,
    kill_with_children,
    mcp_client,
    proxy_parameters,
    start_http_proxy,
    stop,
)
from tests.support import recovery_figure
from tests.support.in_flight import open_calls_past_in_flight

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
            # The same credit twice: the agent asked for two, so two are made.
            credit = await client.call_tool("credit_account", {"account": "A-1", "amount": "25.00"})
            again = await client.call_tool("credit_account", {"account": "A-1", "amount": "25.00"})
            balance = await client.call_tool("get_balance", {"account": "A-1"})
            closed = await client.call_tool("close_account", {"account": "A-1", "reason": "asked"})
            refused = await client.call_tool("credit_account", {"account": "A-1", "amount": "5.00"})
            return {
                "listing": listing,
                "credit": credit,
                "again": again,
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
    # The read-only balance was forwarded without an intent; the four writes were journaled.
    assert [(i.turn, i.tool, i.occurrence, i.status) for i in intents] == [
        (1, "credit_account", 0, IntentStatus.PERFORMED),
        (2, "credit_account", 1, IntentStatus.PERFORMED),
        (3, "close_account", 0, IntentStatus.PERFORMED),
        (4, "credit_account", 0, IntentStatus.FAILED),
    ]
    # The desk's own record: two credits of 25.00, each under its own intent's key.
    assert _structured(seen["balance"])["balance"] == "50.00"
    credit, again, closed, refused = intents
    calls = desk.state()["calls"]
    assert set(calls) == {credit.idempotency_key, again.idempotency_key, closed.idempotency_key}
    assert credit.receipt["credit_id"] == calls[credit.idempotency_key]["receipt"]["credit_id"]
    assert again.receipt["credit_id"] == calls[again.idempotency_key]["receipt"]["credit_id"]
    assert seen["credit"].meta["seam/idempotency_key"] == credit.idempotency_key
    assert seen["credit"].meta["seam/step_id"] == credit.step_id
    # Annotations recorded: the credit is idempotent and catalogued; the closure destructive and,
    # with no catalogue entry, irreversible.
    assert credit.receipt["_mcp"] == {"destructiveHint": False, "idempotentHint": True, "irreversible": False}
    assert closed.receipt["_mcp"] == {"destructiveHint": True, "idempotentHint": False, "irreversible": True}
    # The server's own tool error (a closed account) is the client's answer; the credit's errors
    # are declared refusals before acting (examples/mcpdesk/declarations.toml): failed.
    assert seen["refused"].is_error
    assert refused.error_class == "permanent" and "closed" in refused.outcome_summary
    # The session ended with every intent settled: the run is complete.
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.capability_version.startswith("mcp-")


def test_an_error_answer_from_a_tool_that_may_have_acted_leaves_the_step_uncertain(
    desk: Desk, live_server: Any, tenant: Tenant
) -> None:
    token = agent_token(tenant)
    # The desk closes A-9, then answers with an error; nothing declares the closure's errors
    # to be refusals before acting.
    params = proxy_parameters(
        live_server.url,
        token,
        desk,
        declarations=False,
        env={"MCPDESK_FAIL_AFTER_ACCEPT": "close_account:A-9"},
    )

    async def session() -> Any:
        async with mcp_client(params) as client:
            return await client.call_tool("close_account", {"account": "A-9", "reason": "asked"})

    answer = anyio.run(session)

    # The client gets the desk's own error answer.
    assert answer.is_error and "confirmation step failed" in answer.content[0].text
    # The desk did close the account, under the intent's key.
    intent = Intent.objects.get(run__tenant=tenant, tool="close_account")
    assert desk.state()["accounts"]["A-9"]["open"] is False
    assert desk.state()["calls"][intent.idempotency_key]["tool"] == "close_account"
    # Seam: the step is uncertain, the error kept as evidence; the run is not completed.
    assert intent.status == IntentStatus.INTENDED
    assert intent.error_class == "ambiguous" and "confirmation step failed" in intent.outcome_summary
    run = intent.run
    assert run.status == RunStatus.RUNNING

    # Reconciliation has no lookup for the closure: a person is handed the step with the error.
    open_calls_past_in_flight(run=run)
    call_command("reconcile", older_than=0, stdout=io.StringIO())
    intent.refresh_from_db()
    assert intent.status == IntentStatus.UNKNOWN
    handover = SeamClient(live_server.url, token).run(str(run.id)).handover()
    assert [step["tool"] for step in handover.uncertain] == ["close_account"]
    assert "confirmation step failed" in json.dumps(handover.uncertain)
    assert handover.completed == []
    run.refresh_from_db()
    assert run.status != RunStatus.COMPLETED


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
    held_calls = desk.state()
    recovery_figure.record(
        "MCP proxy",
        run,
        point="killed after the server accepted the 3rd call",
        doubled_or_lost=recovery_figure.counted_once(
            {"keyed calls": len(held_calls["calls"]), "unkeyed calls": len(held_calls["unkeyed"])},
            {"keyed calls": 3, "unkeyed calls": 0},
        ),
        false_statements=recovery_figure.handover_against(
            run, [i.step_id for i in run.intents.all() if i.idempotency_key in held_calls["calls"]]
        ),
    )
    assert run.status == RunStatus.ESCALATED
    assert desk.state()["accounts"]["A-1"]["balance"] == "25.00"


def test_clients_over_streamable_http_get_a_run_each(desk: Desk, live_server: Any, tenant: Tenant) -> None:
    token = agent_token(tenant)
    port = free_port()
    proxy = start_http_proxy(
        proxy_parameters(live_server.url, token, desk, options=("--http", "--port", str(port))), port
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:

        async def one_session(account: str) -> Any:
            async with http_mcp_client(url) as client:
                return await client.call_tool("credit_account", {"account": account, "amount": "1.00"})

        async def two_sessions() -> list[Any]:
            return [await one_session("S-1"), await one_session("S-2")]

        results = anyio.run(two_sessions)
        run_ids = {result.meta["seam/run_id"] for result in results}
        assert len(run_ids) == 2
        deadline = time.monotonic() + 30
        # Each session's run is completed when its session closes (the client's DELETE).
        while Run.objects.filter(tenant=tenant, status=RunStatus.COMPLETED).count() < 2:
            assert time.monotonic() < deadline, "the sessions' runs were not completed"
            time.sleep(0.2)
    finally:
        stop(proxy)

    runs = Run.objects.filter(tenant=tenant, task_type="desk_session")
    assert {str(run.id) for run in runs} == run_ids
    for run in runs:
        assert run.external_id.startswith("mcp-session-")
        (intent,) = Intent.objects.filter(run=run)
        assert intent.status == IntentStatus.PERFORMED
        assert intent.idempotency_key in desk.state()["calls"]


def test_the_http_proxy_answers_401_to_a_request_without_its_bearer_token(
    desk: Desk, live_server: Any, tenant: Tenant
) -> None:
    token = agent_token(tenant)
    port = free_port()
    proxy = start_http_proxy(
        proxy_parameters(live_server.url, token, desk, options=("--http", "--port", str(port))), port
    )
    url = f"http://127.0.0.1:{port}/mcp"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "credit_account", "arguments": {"account": "X-1", "amount": "9.00"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "a" * 32}
    try:
        refused = [
            requests.post(url, json=call, headers=headers, timeout=5),
            requests.post(url, json=call, headers={**headers, "Authorization": "Bearer wrong"}, timeout=5),
            requests.post(
                url, json=call, headers={**headers, "Authorization": f"Basic {PROXY_AUTH_TOKEN}"}, timeout=5
            ),
        ]
        accepted = anyio.run(_credit_over_http, url, "X-2")
    finally:
        stop(proxy)

    assert [answer.status_code for answer in refused] == [401, 401, 401]
    assert all(answer.headers["WWW-Authenticate"] == "Bearer" for answer in refused)
    # Nothing of the refused calls was journaled or reached the desk; the authorised one did.
    assert list(Intent.objects.filter(run__tenant=tenant).values_list("args", flat=True)) == [
        {"account": "X-2", "amount": "1.00"}
    ]
    assert "X-1" not in desk.state()["accounts"]
    assert _structured(accepted)["balance"] == "1.00"


async def _credit_over_http(url: str, account: str) -> Any:
    async with http_mcp_client(url) as client:
        return await client.call_tool("credit_account", {"account": account, "amount": "1.00"})


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])  # noqa: S104 (only parsed: nothing binds)
def test_the_proxy_will_not_serve_http_without_a_bearer_token(
    host: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SEAM_MCP_PROXY_TOKEN", raising=False)
    argv = ["--seam-url", "http://127.0.0.1:1", "--token", "t", "--http", "--host", host, "--", "server"]
    with pytest.raises(SystemExit) as stopped:
        parse_args(argv)
    assert stopped.value.code == 2
    assert "SEAM_MCP_PROXY_TOKEN" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args([*argv[:-2], "--auth-token", "short", "--", "server"])
    options, command = parse_args([*argv[:-2], "--auth-token", PROXY_AUTH_TOKEN, "--", "server"])
    assert (options.host, options.auth_token, command) == (host, PROXY_AUTH_TOKEN, ["server"])


LOOKUP_ONLY = '[tools.credit_account]\nlookup = "find_call"\n[tools.find_call]\nread_only = true\n'


# The desk's own declarations say it honours the key (the retry is sent again under it); with
# only a lookup declared, the retry is found by find_call and not sent.
@pytest.mark.parametrize("declared", ["honours_key", "lookup"])
def test_a_write_retried_on_its_session_after_a_proxy_restart_is_not_performed_twice(
    declared: str, desk: Desk, live_server: Any, tenant: Tenant, tmp_path: Path
) -> None:
    token = agent_token(tenant)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    options: tuple[str, ...] = ("--http", "--port", str(port))
    if declared == "lookup":
        (tmp_path / "lookup.toml").write_text(LOOKUP_ONLY)
        options = (*options, "--declarations", str(tmp_path / "lookup.toml"))

    def parameters(env: dict[str, str] | None = None) -> Any:
        return proxy_parameters(
            live_server.url, token, desk, options=options, env=env, declarations=declared == "honours_key"
        )

    proxies = [start_http_proxy(parameters({"MCPDESK_HOLD_AFTER_ACCEPT": "credit_account:R-2"}), port)]

    async def session() -> dict[str, Any]:
        async with http_mcp_client(url) as client:
            first = await client.call_tool("credit_account", {"account": "R-1", "amount": "5.00"})
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "credit_account", {"account": "R-2", "amount": "10.00"})
                with anyio.fail_after(30):
                    while "R-2" not in desk.state()["accounts"]:
                        await anyio.sleep(0.05)
                # The desk credited R-2; its answer is lost with the proxy.
                kill_with_children(proxies[0])
                group.cancel_scope.cancel()
            proxies.append(start_http_proxy(parameters(), port))
            # The client retries on its session: the same call, the same key.
            retried = await client.call_tool("credit_account", {"account": "R-2", "amount": "10.00"})
            # A new credit of the same amount is a new call, counted on from the journal.
            another = await client.call_tool("credit_account", {"account": "R-2", "amount": "10.00"})
            return {"first": first, "retried": retried, "another": another}

    try:
        seen = anyio.run(session)
    finally:
        for proxy in proxies:
            stop(proxy)

    (run,) = Run.objects.filter(tenant=tenant)
    intents = list(Intent.objects.filter(run=run).order_by("turn"))
    assert [(i.turn, i.occurrence, i.status) for i in intents] == [
        (1, 0, IntentStatus.PERFORMED),
        (2, 0, IntentStatus.PERFORMED),
        (3, 1, IntentStatus.PERFORMED),
    ]
    # The desk's own record: R-2 credited twice (the held call and the new one), not three times.
    state = desk.state()
    assert state["accounts"]["R-2"]["balance"] == "20.00"
    assert len(state["calls"]) == 3 and state["unkeyed"] == []
    # The retry was answered with the first call's receipt, found under its key.
    retried = _structured(seen["retried"])
    assert retried["credit_id"] == state["calls"][intents[1].idempotency_key]["receipt"]["credit_id"]
    assert seen["retried"].meta["seam/run_id"] == seen["first"].meta["seam/run_id"] == str(run.id)
    assert _structured(seen["another"])["balance"] == "20.00"


def test_a_malformed_declarations_file_stops_the_proxy_at_start_up(
    desk: Desk, live_server: Any, tenant: Tenant, tmp_path: Path
) -> None:
    token = agent_token(tenant)
    typo = tmp_path / "typo.toml"
    typo.write_text("[tools.credit_account]\nhonors_key = true\n")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[tools.credit_acount]\nhonours_key = true\n")
    for path, words in [(typo, "unknown field 'honors_key'"), (unknown, "is not one the server offers")]:
        params = proxy_parameters(
            live_server.url, token, desk, declarations=False, options=("--declarations", str(path))
        )
        started = subprocess.run(
            [params.command, *params.args],
            env=params.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert started.returncode == 2
        assert f"{path}: tool 'credit_" in started.stderr and words in started.stderr
    assert not Run.objects.filter(tenant=tenant).exists()
