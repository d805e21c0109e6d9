"""The sandbox's own HTTP server: wsgiref with a thread per request, and one thing no ordinary
server does — when a view raises DropConnection (the `drop_after` fault), it hangs up without
writing a byte, after the effect has been committed. That is the ambiguity window a client must
survive: the request left, the world changed, no answer came back.

wsgiref's handler answers any exception escaping the application with a 500, and a 500 is an
answer; so its request loop is overridden here to let DropConnection reach the request handler,
which owns the socket."""

from __future__ import annotations

import contextlib
import logging
import socket
from socketserver import ThreadingMixIn
from typing import IO, Any, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer
from wsgiref.types import WSGIApplication

from django.db import connections

from .errors import DropConnection

logger = logging.getLogger("sandbox.server")


class SandboxServerHandler(ServerHandler):
    """wsgiref's per-request handler, except that DropConnection passes through untouched."""

    def run(self, application: WSGIApplication) -> None:
        # BaseHandler.run, with DropConnection let through instead of rendered as a 500.
        try:
            self.setup_environ()
            self.result = application(self.environ, self.start_response)  # type: ignore[attr-defined]
            self.finish_response()
        except DropConnection:
            raise
        except (ConnectionAbortedError, BrokenPipeError, ConnectionResetError):
            return  # the client hung up on us
        except Exception:
            try:
                self.handle_error()
            except Exception:
                self.close()
                raise


class SandboxRequestHandler(WSGIRequestHandler):
    """One request per connection. On DropConnection it shuts the socket down, both ways, with
    nothing written: the client sees the connection close with no response."""

    def handle(self) -> None:
        # WSGIRequestHandler.handle, with our ServerHandler and the drop.
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = ""
            self.request_version = ""
            self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():
            return
        handler = SandboxServerHandler(
            self.rfile, cast("IO[bytes]", self.wfile), self.get_stderr(), self.get_environ(), multithread=True
        )
        handler.request_handler = self  # type: ignore[attr-defined]  # wsgiref's back-pointer for logging
        try:
            handler.run(self.server.get_app())  # type: ignore[attr-defined]
        except DropConnection as drop:
            logger.info("dropped the connection without answering: %s", drop)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            self.connection.close()

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.address_string(), format % args)


class SandboxServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog is 5. Reconciliation asks a downstream many lookups side by
    # side (each worker process up to its declared concurrency), and a real provider does not
    # refuse connections at six; a short backlog here would fail lookups the world would answer.
    request_queue_size = 256

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            # Each request has a thread, and each thread its own database connection; a dropped
            # request never reaches Django's request_finished, so close them here.
            connections.close_all()


def make_server(host: str, port: int, app: WSGIApplication) -> SandboxServer:
    server = SandboxServer((host, port), SandboxRequestHandler)
    server.set_app(app)
    return server
