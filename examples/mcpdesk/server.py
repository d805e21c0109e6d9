"""The mcpdesk: an MCP server (built with the official `mcp` SDK) for a small account desk, with
its own state in a JSON file so that what it did survives the processes that asked it.

    python -m examples.mcpdesk.server --state /tmp/mcpdesk.json                      # stdio
    python -m examples.mcpdesk.server --state /tmp/mcpdesk.json --http --port 8310   # streamable HTTP

Tools, with the annotations an MCP client (and Seam's proxy) reads:

    get_balance(account)            readOnlyHint                       what an account holds
    credit_account(account, amount) idempotentHint, not destructive    add an amount (negative takes it back)
    close_account(account, reason)  destructiveHint                    close an account (cannot be reopened)
    find_call(idempotency_key)      readOnlyHint                       what became of a call with that key

The writes are keyed: a caller may put an idempotency key in the request's `_meta`
(`seam/idempotency_key`, as Seam's proxy does). A repeated key answers the first receipt and
changes nothing, and `find_call` says whether a key's call was carried out, with its receipt.
A call without a key is carried out each time it is made.

MCPDESK_HOLD_AFTER_ACCEPT=<tool> (or <tool>:<account>) makes the server keep the answer of those
calls to itself after it has carried them out and written them down: a slow answer, for tests
that stop the caller in that window. MCPDESK_FAIL_AFTER_ACCEPT (same form) makes it answer those
calls with an error after it has carried them out: a tool that fails after acting, as a real one
can (a commit made, then a failing post-commit hook).

`declarations.toml` beside this file is what an operator tells Seam's proxy about the desk's
tools (`seam-mcp-proxy --declarations examples/mcpdesk/declarations.toml`)."""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

KEY_META = "seam/idempotency_key"
EMPTY_STATE: dict[str, Any] = {"accounts": {}, "calls": {}, "unkeyed": []}


class Desk:
    """The desk's state: account balances and every keyed call's receipt, rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        if not path.exists():
            self._write(json.loads(json.dumps(EMPTY_STATE)))

    def read(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.path.read_text())
        return state

    def _write(self, state: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    def write_call(self, tool: str, key: str | None, change: Any) -> dict[str, Any]:
        """Carry out `change(state) -> receipt` once per key, and record the receipt under it."""
        with self.lock:
            state = self.read()
            if key and key in state["calls"]:
                receipt: dict[str, Any] = state["calls"][key]["receipt"]
                return receipt
            receipt = change(state)
            record = {"tool": tool, "receipt": receipt, "at": time.time()}
            if key:
                state["calls"][key] = record
            else:
                state["unkeyed"].append(record)
            self._write(state)
            return receipt


def _amount(value: str) -> Decimal:
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise ToolError(f"amount {value!r} is not a number") from None
    if not amount.is_finite():
        raise ToolError(f"amount {value!r} is not a number")
    return amount


def _key(ctx: Context) -> str | None:
    meta = ctx.request_context.meta or {}
    key = meta.get(KEY_META) if isinstance(meta, dict) else getattr(meta, KEY_META, None)
    return str(key) if key else None


def _hold(tool: str, account: str) -> None:
    if os.environ.get("MCPDESK_HOLD_AFTER_ACCEPT") in (tool, f"{tool}:{account}"):
        time.sleep(3600)
    if os.environ.get("MCPDESK_FAIL_AFTER_ACCEPT") in (tool, f"{tool}:{account}"):
        raise ToolError(f"{tool} for {account}: the desk's confirmation step failed")


def build_server(desk: Desk) -> MCPServer:
    server = MCPServer("mcpdesk", instructions="A small account desk. Writes are keyed by _meta.")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_balance(account: str) -> dict[str, Any]:
        """What an account holds."""
        account_state = desk.read()["accounts"].get(account)
        if account_state is None:
            raise ToolError(f"no account {account}")
        return {"account": account, **account_state}

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
    )
    def credit_account(account: str, amount: str, ctx: Context) -> dict[str, Any]:
        """Add an amount to an account (a negative amount takes it back)."""
        value = _amount(amount)

        def change(state: dict[str, Any]) -> dict[str, Any]:
            entry = state["accounts"].setdefault(account, {"balance": "0.00", "open": True})
            if not entry["open"]:
                raise ToolError(f"account {account} is closed")
            entry["balance"] = str((Decimal(entry["balance"]) + value).quantize(Decimal("0.01")))
            return {"credit_id": f"CR-{uuid.uuid4().hex[:8]}", "balance": entry["balance"]}

        receipt = desk.write_call("credit_account", _key(ctx), change)
        _hold("credit_account", account)
        return receipt

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)
    )
    def close_account(account: str, reason: str, ctx: Context) -> dict[str, Any]:
        """Close an account. A closed account cannot be reopened."""

        def change(state: dict[str, Any]) -> dict[str, Any]:
            entry = state["accounts"].setdefault(account, {"balance": "0.00", "open": True})
            entry["open"] = False
            return {"closure_id": f"CL-{uuid.uuid4().hex[:8]}", "reason": reason}

        receipt = desk.write_call("close_account", _key(ctx), change)
        _hold("close_account", account)
        return receipt

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def find_call(idempotency_key: str) -> dict[str, Any]:
        """What became of the call made with this idempotency key: found (with its tool and
        receipt) or not."""
        record = desk.read()["calls"].get(idempotency_key)
        if record is None:
            return {"found": False}
        return {"found": True, "tool": record["tool"], "receipt": record["receipt"]}

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", required=True, type=Path, help="the JSON file the desk keeps its state in")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8310)
    options = parser.parse_args(argv)
    server = build_server(Desk(options.state))
    if options.http:
        server.run("streamable-http", host=options.host, port=options.port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
