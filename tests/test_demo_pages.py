"""The demo's pages as people meet them: `manage.py runserver` under the demo's settings
(config.settings.local, as scripts/serve-demo.sh runs it, with no DJANGO_DEBUG set) answers an
unknown address with the styled 404, never Django's debug page listing the URL patterns, and
still serves the stylesheet that page uses. And the styled 500 renders as Django renders it,
with no request and no context."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest
import requests
from django.db import connection
from django.test import RequestFactory
from django.views.defaults import server_error

from devtools.processes import ROOT, database_url, free_port, wait_until_serving


@pytest.fixture
def demo_server(catalogue: None) -> Iterator[str]:
    """`manage.py runserver` under the demo's settings on the test database, with the demo's
    catalogue committed (its system checks refuse to serve without it); its base URL."""
    port = free_port()
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"DJANGO_DEBUG", "DJANGO_SETTINGS_MODULE", "SEAM_APPS", "CELERY_BROKER_URL"}
    }
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": database_url(connection.settings_dict),
        "PYTHONUNBUFFERED": "1",
    }
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(base, server, "/accounts/login/", what="serve the login page", timeout=120)
            yield base
        except BaseException:
            log.seek(0)
            print(log.read().decode(errors="replace")[-3000:])
            raise
        finally:
            os.killpg(server.pid, signal.SIGTERM)  # its own session: only what it started
            server.wait(timeout=30)


def test_the_demo_answers_an_unknown_address_with_the_styled_404(demo_server: str) -> None:
    answer = requests.get(f"{demo_server}/no-such-page/", timeout=30)

    assert answer.status_code == 404
    assert 'class="error-page" data-status="404"' in answer.text
    assert "There is nothing here" in answer.text
    # Not the debug page: no list of the URL patterns tried, no settings.
    assert "URLconf" not in answer.text and "api/v1/" not in answer.text
    # With DEBUG off the page's stylesheet is still served (WhiteNoise, not runserver's handler).
    [stylesheet] = re.findall(r'<link rel="stylesheet" href="([^"]+)"', answer.text)
    css = requests.get(demo_server + stylesheet, timeout=30)
    assert css.status_code == 200 and ".error-page" in css.text


def test_the_500_page_is_styled_and_needs_no_request_context() -> None:
    answer = server_error(RequestFactory().get("/"))

    page = answer.content.decode()
    assert answer.status_code == 500
    assert 'class="error-page" data-status="500"' in page
    assert "Something went wrong on our side" in page
    assert '<link rel="stylesheet" href="/static/seam.css">' in page
