from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from compensations.defaults import catalogue_grant_roles
from sandbox.catalogue import catalogue_seed_defaults


@pytest.fixture(autouse=True)
def sandbox_tool_catalogue() -> Iterator[None]:
    """The sandbox's tools declared (sandbox/seam.py; no sandbox process is needed: nothing is
    called, so nothing need listen at their address)."""
    with override_settings(SEAM_SANDBOX_URL="http://127.0.0.1:8100"):
        yield


@pytest.fixture
def catalogue(transactional_db: None) -> None:
    """The demo's catalogue and the role grants, as the test database's `migrate` leaves them
    (transactional tests flush every table, those rows included)."""
    catalogue_seed_defaults()
    catalogue_grant_roles()
