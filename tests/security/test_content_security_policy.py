"""Every page is served under a Content-Security-Policy that allows no inline script, no string
evaluated as script and no inline style (the browser tests fail on any violation Chromium
reports: tests/browser/conftest.py). The API's Swagger page alone allows its viewer's inline
style block, and its starter script is served from this origin as a file of its own."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _policy(response: Any) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {
        name: values
        for name, *values in (directive.split() for directive in header.split(";") if directive.strip())
    }


def test_the_consoles_pages_allow_scripts_and_styles_from_this_origin_only(persona: Any, tenant: Any) -> None:
    client = Client()
    client.force_login(persona("support_staff", tenant))

    for path in ("/", "/runs/", "/dead-letters/", "/accounts/login/"):
        response = client.get(path)
        assert response.status_code in (200, 302), path
        policy = _policy(response)
        assert policy["script-src"] == ["'self'"], path
        assert policy["style-src"] == ["'self'"], path
        assert policy["frame-ancestors"] == ["'none'"] and policy["object-src"] == ["'none'"], path
        # A template comment is one line; one spread over two is shown to the person as text.
        assert b"{#" not in response.content and b"#}" not in response.content, path


def test_the_api_docs_allow_the_viewers_inline_style_and_serve_its_script_as_a_file() -> None:
    client = Client()
    page = client.get("/api/docs/")
    starter = client.get("/api/docs/?script=")

    assert page.status_code == 200 and starter.status_code == 200
    assert _policy(page)["script-src"] == ["'self'"]
    assert _policy(page)["style-src"] == ["'self'", "'unsafe-inline'"]
    assert b"<script>" not in page.content
    assert b"SwaggerUIBundle" in starter.content
