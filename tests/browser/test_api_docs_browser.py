"""The API's Swagger page draws the schema in Chromium under its Content-Security-Policy (the
browser fixture fails the test on any violation Chromium reports)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_swagger_page_draws_the_journal_api_under_the_sites_policy(
    browser: Browser, live_server: Any
) -> None:
    page = browser.new_context(base_url=live_server.url).new_page()
    page.goto("/api/docs/")

    expect(page.get_by_role("heading", name="Seam API")).to_be_visible()
    expect(page.get_by_text("/api/v1/runs/", exact=True).first).to_be_visible()
