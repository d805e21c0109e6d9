"""Settings for the suite: the machine's real PostgreSQL and Redis unless the environment says
otherwise. There is no SQLite fallback here: what the suite proves, it proves on PostgreSQL."""

import os

from .base import *  # noqa: F403
from .base import DEMO_APPS, INSTALLED_APPS, database_from_env, env

# `make test` runs the suite in pytest-xdist workers side by side (gw0, gw1, ...: PYTEST_XDIST_WORKER,
# set before these settings load). Each has its own test database (pytest-django names it
# test_<name>_gwN) and three Redis databases of its own, counted down from 15: the broker's, and
# the two that the tests of workers and of Redis faults empty (SEAM_TEST_REDIS_URLS).
XDIST_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
if XDIST_WORKER > 4:
    raise RuntimeError("Redis has 16 databases: the suite runs in at most 5 workers (pytest -n 5)")
SEAM_TEST_REDIS_URLS = {
    purpose: f"redis://127.0.0.1:6379/{15 - 3 * XDIST_WORKER - offset}"
    for offset, purpose in enumerate(("broker", "workers", "reliability"))
}

DATABASES = {"default": database_from_env("postgres://postgres@127.0.0.1:5432/test")}
# Django's PostgreSQL backend, whose `flush` (after each transactional test) empties the tables
# past the audit trail's guards, which refuse TRUNCATE to everyone else (tests/support/postgresql).
if DATABASES["default"]["ENGINE"] == "journal.postgresql":
    DATABASES["default"]["ENGINE"] = "tests.support.postgresql"
# 0 (a new connection per request) keeps the suite's connections short-lived; a server run from
# these settings (the benchmark's) may ask for persistent ones, as production has by default.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DJANGO_CONN_MAX_AGE", default=0)
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=SEAM_TEST_REDIS_URLS["broker"])
# A message taken by a worker that then died whole (not just a pool process) comes back only
# after the visibility timeout, found by a live worker's periodic scan of unacknowledged
# messages; the tests that kill whole workers shorten both to see it happen. (Redis's options:
# the demo's broker, which tests/reliability/test_demo_broker.py runs, takes none of them.)
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "visibility_timeout": env.int("SEAM_BROKER_VISIBILITY_TIMEOUT", default=3600),
        "unacked_restore_interval": env.int("SEAM_BROKER_RESTORE_INTERVAL", default=10),
        "unacked_restore_throttle": env.int("SEAM_BROKER_RESTORE_THROTTLE", default=10),
    }
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
    else {}
)
# Every test database begins a new trail, and transactional tests empty it between cases: a
# file witness shared by them would see each fresh start as a wipe. The suite witnesses to the
# log; the witness's own tests point it at a file of their own (tests/audit/test_audit_witness.py).
SEAM_AUDIT_WITNESS = env("SEAM_AUDIT_WITNESS", default="log")
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Serve static files from the app and static/ folders directly; no collectstatic in development.
# The sandbox of downstream systems is served at /sandbox/ beside Seam's pages.
SEAM_SANDBOX_ENABLED = env.bool("SEAM_SANDBOX_ENABLED", default=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# The demo is what the suite drives: the sandbox of downstream systems and the scripted flows
# (with their running versions), each app declaring its plug-ins in its seam.py; the sandbox's
# compensation catalogue and the flows' recovery policies are seeded when the test database is
# migrated (sandbox.catalogue, scenarios.policies).
INSTALLED_APPS = [*INSTALLED_APPS, *DEMO_APPS]
SEAM_RUNNING_VERSIONS = env("SEAM_RUNNING_VERSIONS", default="scenarios.registry.running_versions")
SEAM_FLOWS = env("SEAM_FLOWS", default="scenarios.registry.all_flows")
# No sandbox listens until a test starts one, so the sandbox declares no tools (sandbox/seam.py)
# and the journal's own tests record arbitrary tool names and arguments; tests of tools, flows and
# reconciliation start one and point its tools at it with the `sandbox_tools` fixture.
SEAM_SANDBOX_URL = env("SEAM_SANDBOX_URL", default="")
