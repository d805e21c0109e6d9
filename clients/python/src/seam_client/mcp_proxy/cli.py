"""`seam-mcp-proxy`: the command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import anyio

from .declarations import Declarations, DeclarationsError, load_declarations
from .http import AUTH_TOKEN_ENV, MIN_TOKEN_LENGTH, serve_http
from .proxy import ProxySettings, serve_stdio

DESCRIPTION = "An MCP proxy that journals tool calls in Seam."


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    args = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args:
        split = args.index("--")
        args, command = args[:split], args[split + 1 :]
    parser = argparse.ArgumentParser(prog="seam-mcp-proxy", description=DESCRIPTION)
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
    parser.add_argument(
        "--declarations",
        default="",
        metavar="PATH",
        help="a TOML (or .json) file of declarations about the tools",
    )
    parser.add_argument("--version", action="append", default=[], metavar="NAME=VALUE", help="a run version")
    parser.add_argument("--http", action="store_true", help="serve clients over streamable HTTP, not stdio")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to serve HTTP on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8320)
    parser.add_argument(
        "--auth-token",
        default=os.environ.get(AUTH_TOKEN_ENV, ""),
        help=f"the bearer token HTTP clients must present ({AUTH_TOKEN_ENV}; required with --http)",
    )
    options = parser.parse_args(args)
    if not options.seam_url or not options.token:
        parser.error("--seam-url and --token (or SEAM_URL and SEAM_TOKEN) are required")
    if bool(command) == bool(options.server_url):
        parser.error("give the server as either --server-url URL or -- COMMAND ARGS")
    if options.http and len(options.auth_token) < MIN_TOKEN_LENGTH:
        parser.error(
            f"--http requires a bearer token of at least {MIN_TOKEN_LENGTH} characters: set {AUTH_TOKEN_ENV} "
            "(or --auth-token); every client must send it as 'Authorization: Bearer <token>'"
        )
    return options, command


def main(argv: Sequence[str] | None = None) -> None:
    options, command = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    try:
        declarations = (
            load_declarations(options.declarations) if options.declarations else Declarations(tools={})
        )
        settings = ProxySettings(
            seam_url=options.seam_url,
            token=options.token,
            task_type=options.task_type,
            versions=dict(item.split("=", 1) for item in options.version),
            catalogued=frozenset(options.catalogued),
            journal=frozenset(options.journal),
            declarations=declarations,
        )
        if options.http:
            anyio.run(
                lambda: serve_http(
                    settings,
                    host=options.host,
                    port=options.port,
                    auth_token=options.auth_token,
                    command=command,
                    url=options.server_url,
                )
            )
        else:
            anyio.run(lambda: serve_stdio(settings, command=command, url=options.server_url))
    except Exception as exc:
        refused = _declarations_error(exc)
        if refused is None:
            raise
        print(f"seam-mcp-proxy: error: {refused}", file=sys.stderr)
        raise SystemExit(2) from None


def _declarations_error(exc: BaseException) -> DeclarationsError | None:
    """The declarations' refusal, also when it comes out of the task groups that were serving
    the upstream session (checked once its tools are listed)."""
    if isinstance(exc, DeclarationsError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _declarations_error(inner)
            if found is not None:
                return found
    return None
