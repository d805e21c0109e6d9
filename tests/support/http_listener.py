"""A real HTTP(S) listener on 127.0.0.1 for the tests of outbound calls: it records every request
it receives (so a test can say it was never reached) and answers as told."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Listener:
    """What the listener heard, and how it answers: `status`, extra `headers`, `body`."""

    url: str = ""
    port: int = 0
    hits: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    # The server name the client asked for in TLS (SNI), per handshake.
    server_names: list[str | None] = field(default_factory=list)

    def json(self, index: int = 0) -> Any:
        return json.loads(self.hits[index]["body"])


@contextmanager
def listening(path: str = "/hook", tls: ssl.SSLContext | None = None) -> Iterator[Listener]:
    """A listener on 127.0.0.1 at a free port, for as long as the block lasts."""
    listener = Listener()

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            listener.hits.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": self.rfile.read(length),
                }
            )
            self.send_response(listener.status)
            for name, value in listener.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(listener.body)))
            self.end_headers()
            self.wfile.write(listener.body)

        do_GET = do_POST = do_PUT = _record

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls is not None:
        tls.sni_callback = lambda sock, name, ctx: listener.server_names.append(name)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    listener.port = server.server_address[1]
    listener.url = f"{scheme}://127.0.0.1:{listener.port}{path}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
