from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings


@pytest.fixture
def sandbox_tools(sandbox_server: str) -> Iterator[str]:
    """The sandbox's tool catalogue, pointed at the running sandbox subprocess."""
    with override_settings(SEAM_TOOL_MODULES=["tools.sandbox_tools"], SEAM_SANDBOX_URL=sandbox_server):
        yield sandbox_server


@pytest.fixture
def ledger() -> Any:
    from sandbox.models import Effect

    return Effect.objects
