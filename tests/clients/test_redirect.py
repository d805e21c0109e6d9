"""A Seam behind a proxy that redirects (HTTP to HTTPS, or to a login page) is answered with a
SeamError that names where the redirect points, never followed and never a TypeError: a real
HTTP server on loopback answers every request with a 301 or 302."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from seam_client import AsyncSeamClient, ErrorClass, SeamClient, SeamError

from tests.factories import VERSIONS


class Redirecting(BaseHTTPRequestHandler):
    """HTTP → HTTPS for the API, as a TLS-terminating proxy does; a login page for the rest."""

    requests_seen: list[tuple[str, str]] = []

    def _redirect(self) -> None:
        self.requests_seen.append((self.command, self.path))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        host = self.headers["Host"]
        if self.path.startswith("/api/v1/"):
            self.send_response(301)
            self.send_header("Location", f"https://{host}{self.path}")
        else:
            self.send_response(302)
            self.send_header("Location", f"/accounts/login/?next={self.path}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _redirect

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def redirecting() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Redirecting.requests_seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_https_redirect_names_the_base_url_to_use(redirecting: str) -> None:
    https = redirecting.replace("http://", "https://")
    with SeamClient(redirecting, "a-token", retries=0) as seam, pytest.raises(SeamError) as redirected:
        seam.start_run(task_type="returns", versions=VERSIONS)

    assert str(redirected.value) == (
        f"POST /runs/ → 301, redirected to {https}/api/v1/runs/; "
        f"seam-client follows no redirects: use {https} as the base URL"
    )
    assert (redirected.value.status, redirected.value.error_class) == (301, ErrorClass.PERMANENT)
    assert Redirecting.requests_seen == [("POST", "/api/v1/runs/")]  # asked once, not followed


def test_a_redirect_elsewhere_is_named_too(redirecting: str) -> None:
    with (
        SeamClient(f"{redirecting}/seam", "a-token", retries=0) as seam,
        pytest.raises(SeamError) as redirected,
    ):
        seam.run("7").fetch()

    assert str(redirected.value) == (
        f"GET /runs/7/ → 302, redirected to {redirecting}/accounts/login/?next=/seam/api/v1/runs/7/; "
        "seam-client follows no redirects: use the address it names as the base URL"
    )


def test_the_async_client_names_the_redirect(redirecting: str) -> None:
    async def start() -> None:
        async with AsyncSeamClient(redirecting, "a-token", retries=0) as seam:
            await seam.start_run(task_type="returns", versions=VERSIONS)

    with pytest.raises(SeamError, match=r"use https://127\.0\.0\.1:[0-9]+ as the base URL"):
        asyncio.run(start())
