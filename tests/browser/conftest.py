"""Fixtures of the browser tests: Debian's Chromium driven by Playwright (never a downloaded
browser), the pages served by pytest-django's live server (a thread of this process, on the test
database), and a real `celery worker` subprocess executing what the pages queue.

The live server enqueues through this process's Celery app, whose broker is the test settings'
CELERY_BROKER_URL (Redis db 15); the worker is started on that same URL."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, expect, sync_playwright

from devtools.processes import Fleet, emptied_redis
from tests.reconciliation.test_workers import fleet_env  # noqa: F401 (fixture, on `broker` below)

CHROMIUM = os.environ.get("SEAM_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"]
PASSWORD = "correct horse battery staple"
# Generous: a loaded two-core machine runs Chromium, the server, a worker and the sandbox at once.
TIMEOUT_MS = 30_000


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Chromium, launched once for a module's tests (a launch costs about a second on two
    cores); each test opens its own contexts through `browser`. Missing Chromium fails under CI
    (`make test` installs it first) and is skipped, naming the fix, on a developer's machine."""
    if shutil.which(CHROMIUM) is None:
        message = (
            f"Chromium is not installed at {CHROMIUM}: run `apt-get install -y chromium` "
            "(or `make chromium`), or point SEAM_CHROMIUM at it"
        )
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    with pytest.MonkeyPatch.context() as patch:
        # Playwright's sync API keeps its asyncio loop marked as running in this thread for as
        # long as it is open, which makes Django refuse ORM calls from the module's tests and
        # fixtures; the loop never runs concurrently with them.
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        expect.set_options(timeout=TIMEOUT_MS)
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            try:
                yield launched
            finally:
                # While that loop is marked running, Django keeps this thread's connections in
                # a context of their own; close them here, or they outlive the test database.
                connections.close_all()
                launched.close()


@pytest.fixture
def browser(chromium: Browser) -> Iterator[Browser]:
    """The module's Chromium for one test: every context the test opens is closed after it, and
    reports what Chromium refused under the pages' Content-Security-Policy, which fails the test."""
    violations: list[str] = []
    opened: list[BrowserContext] = []
    new_context = chromium.new_context

    def reporting_context(*args: Any, **kwargs: Any) -> BrowserContext:
        context = new_context(*args, **kwargs)
        opened.append(context)
        context.on(
            "console",
            lambda message: (
                violations.append(message.text) if "Content Security Policy" in message.text else None
            ),
        )
        return context

    chromium.new_context = reporting_context  # type: ignore[method-assign]
    try:
        yield chromium
    finally:
        chromium.new_context = new_context  # type: ignore[method-assign]
        for context in opened:
            context.close()
        connections.close_all()  # this test's, before its database is flushed
    assert not violations, "pages broke the Content-Security-Policy:\n" + "\n".join(violations)


@pytest.fixture
def log_in(browser: Browser, live_server: Any) -> Callable[..., Page]:
    """log_in(user) → a page of a new browser context (its own cookies), logged in through the
    login form and showing the queue; log_in(user, viewport={"width": 390, "height": 844}) for
    another screen than the default 1280 by 900."""

    def open_as(user: Any, viewport: ViewportSize | None = None) -> Page:
        context = browser.new_context(
            base_url=live_server.url, viewport=viewport or {"width": 1280, "height": 900}
        )
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto("/accounts/login/?next=/")
        page.get_by_label("Username").fill(user.get_username())
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name=re.compile(r"^Queue"))).to_be_visible()
        page.wait_for_load_state()  # the deferred scripts (shortcuts, dialogs) have run
        return page

    return open_as


@pytest.fixture
def broker() -> Iterator[str]:
    """The Redis database the live server enqueues to, emptied of what earlier tests queued
    there (and of what this one did). No Redis is a failure, never a skip."""
    url = str(settings.CELERY_BROKER_URL)
    with emptied_redis(url):
        yield url


@pytest.fixture
def worker(fleet_env: dict[str, str], tmp_path: Path) -> Iterator[Fleet]:  # noqa: F811
    """One real `celery worker` on the test database, the sandbox and the live server's broker."""
    fleet = Fleet(env=fleet_env, logs_dir=tmp_path)
    fleet.start(
        "worker", "worker", "--pool=prefork", "--concurrency=1", "--without-gossip", "--without-mingle"
    )
    try:
        yield fleet
    finally:
        fleet.stop_all()
