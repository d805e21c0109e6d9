"""The retention job runs as the application's role (`manage.py seam_db_roles`), as beat and the
workers do: it reads every row of a run, writes the archive's rows, marks the runs and audits it
with that role's grants alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from audit.models import AuditAction, AuditEntry
from journal.models import Run, Tenant
from retention.models import Archive
from retention.services import archive_due_runs, verify_archive
from tests.retention.conftest import past_retention
from tests.security.test_db_roles import app_role  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_application_role_archives_due_runs(
    app_role: str,  # noqa: F811
    tenant: Tenant,
    completed_run: Callable[[str], Run],
    archive_dir: Path,
) -> None:
    run = completed_run("T-1501")
    owner = connection.settings_dict["USER"]
    connection.close()
    connection.settings_dict["USER"] = app_role
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone() == (app_role,)
        outcomes = archive_due_runs(past_retention(tenant))
        assert [outcome.marked for outcome in outcomes] == [[str(run.pk)]]
        assert verify_archive(Archive.objects.get()) == []
    finally:
        connection.close()
        connection.settings_dict["USER"] = owner
    run.refresh_from_db()
    assert run.archived_at is not None
    assert AuditEntry.objects.filter(action=AuditAction.RUNS_ARCHIVED, tenant=tenant).count() == 1
