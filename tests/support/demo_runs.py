"""The demo's runs in a test: `manage.py seed_demo` itself (its runners are child processes,
pointed at the test's database and sandbox through their environment), then one reconciliation
sweep, as the demo's worker makes a minute later: every kind of handover the demo shows."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from devtools.processes import database_url
from journal.models import Run
from sandbox.catalogue import catalogue_seed_defaults
from scenarios.management.commands.seed_demo import DEMO_REPLAYS
from scenarios.policies import policies_seed_defaults
from tests.support.in_flight import open_calls_past_in_flight


def seed_the_demo(sandbox_url: str, monkeypatch: pytest.MonkeyPatch) -> list[Run]:
    """The demo's runs, seeded and swept once, by ticket."""
    monkeypatch.setenv("DATABASE_URL", database_url(connection.settings_dict))
    monkeypatch.setenv("SEAM_SANDBOX_URL", sandbox_url)
    policies_seed_defaults()
    catalogue_seed_defaults()
    call_command("seed_demo", stdout=io.StringIO())
    runs = list(Run.objects.filter(external_id__startswith="demo-").order_by("ticket_id"))
    assert len(runs) == len(DEMO_REPLAYS)
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(
        last_heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    open_calls_past_in_flight(run__in=runs)
    call_command("reconcile", older_than=0, decide=True, stdout=io.StringIO())
    return runs
