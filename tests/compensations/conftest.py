from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings


@pytest.fixture(autouse=True)
def sandbox_tool_catalogue() -> Iterator[None]:
    """The sandbox's tools declared (sandbox/seam.py; no sandbox process is needed: nothing is
    called, so nothing need listen at their address)."""
    with override_settings(SEAM_SANDBOX_URL="http://127.0.0.1:8100"):
        yield
