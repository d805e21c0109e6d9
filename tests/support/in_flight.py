"""Time passing for reconciliation: it leaves alone an open intent younger than its tool's call
timeout plus the margin (its call may still be acting downstream), whatever `--older-than` says.
A test that sweeps right after killing a runner moves the open intents back first, as a sweep a
few minutes later would find them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import F

from journal.models import Intent, IntentStatus

AGO = timedelta(minutes=5)


def open_calls_past_in_flight(**filters: Any) -> int:
    """Move the open intents (matching `filters`) AGO into the past; how many moved."""
    return Intent.objects.filter(status=IntentStatus.INTENDED, **filters).update(
        intended_at=F("intended_at") - AGO
    )
