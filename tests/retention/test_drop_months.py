"""Dropping a month: once it is past every tenant's retention and every run created in it is
archived, its two partitions go (journal.partitions.detach_month, then discard_month) with an audit row per tenant;
its runs stay findable, their archives verify and so does the audit chain."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditAction, AuditEntry
from journal.models import Run, Tenant
from journal.partitions import detached_months, month_of, month_tables
from retention.models import Archive
from retention.services import drop_archived_months, retention_apply, verify_archive

pytestmark = pytest.mark.django_db


def _partitions_of(month: Any) -> list[str]:
    tables = month_tables(month)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relname IN (%s, %s)", [tables.intent, tables.event]
        )
        return sorted(name for (name,) in cursor.fetchall())


def _month_past(tenant: Tenant) -> datetime:
    """A moment when this month is past every tenant's retention (a month and more after a run
    that ends now is past its own)."""
    return timezone.now() + timedelta(days=tenant.retention_days + 40)


def test_a_wholly_archived_month_is_dropped_and_its_runs_stay_findable(
    completed_run: Callable[[str], Run], resolved_run: Callable[[str], Run], persona: Callable[..., Any]
) -> None:
    runs = [completed_run("T-1201"), resolved_run("T-1202")]
    month = month_of(runs[0].created_at)
    assert len(_partitions_of(month)) == 2
    # The rows were written inside this test's transaction, so their deferred foreign-key checks
    # are still pending and PostgreSQL refuses to drop their table; in production they committed
    # months before. Checking them now is what their commit would have done. (A transactional
    # test would drop the month for every later test of the session.)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    done = retention_apply(_month_past(runs[0].tenant))

    assert sorted(run_id for outcome in done.archived for run_id in outcome.marked) == sorted(
        str(run.pk) for run in runs
    )
    assert [dropped.month for dropped in done.dropped] == [month]
    assert done.dropped[0].runs_by_tenant == {"sundry": 2}
    assert _partitions_of(month) == []
    assert detached_months() == []  # the files were freed too, not only taken out of the journal
    entry = AuditEntry.objects.get(action=AuditAction.MONTH_DROPPED)
    assert (entry.tenant_id, entry.new_state["month"], entry.new_state["runs"]) == (
        runs[0].tenant_id,
        f"{month:%Y-%m}",
        2,
    )

    call_command("verify_audit")
    assert [verify_archive(archive) for archive in Archive.objects.all()] == [[]]
    client = Client()
    client.force_login(persona("team_lead", runs[0].tenant, username="lena-lead"))
    found = client.get(reverse("handover:run_list"), {"q": "1202"}).content.decode()
    assert reverse("handover:run_detail", args=[runs[1].pk]) in found
    page = client.get(reverse("handover:run_detail", args=[runs[1].pk]))
    assert page.status_code == 200 and "was archived on" in page.content.decode()


def test_a_month_some_run_holds_is_not_dropped(
    completed_run: Callable[[str], Run], make_run: Callable[..., Run]
) -> None:
    done = completed_run("T-1301")
    make_run(ticket_id="T-1302")  # still running
    month = month_of(done.created_at)

    result = retention_apply(_month_past(done.tenant))

    assert [outcome.marked for outcome in result.archived] == [[str(done.pk)]]
    assert result.dropped == []
    assert drop_archived_months(_month_past(done.tenant)) == []
    assert len(_partitions_of(month)) == 2
    assert not AuditEntry.objects.filter(action=AuditAction.MONTH_DROPPED).exists()


def test_a_month_within_some_tenants_retention_is_not_dropped(
    completed_run: Callable[[str], Run], other_tenant: Tenant
) -> None:
    run = completed_run("T-1401")
    Tenant.objects.filter(pk=other_tenant.pk).update(retention_days=run.tenant.retention_days + 365)

    result = retention_apply(_month_past(run.tenant))

    assert [outcome.marked for outcome in result.archived] == [[str(run.pk)]]
    assert result.dropped == []
    assert len(_partitions_of(month_of(run.created_at))) == 2
