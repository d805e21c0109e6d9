"""The sweep's query is served by the partial index on open intents, so its cost follows the
rows in doubt, not the size of the journal."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from journal.models import Intent, IntentStatus, Run
from journal.selectors import stale_intents

pytestmark = pytest.mark.django_db(transaction=True)


def _journal_of(run: Run, *, settled: int, open_: int) -> None:
    long_ago = timezone.now() - timedelta(days=1)
    Intent.objects.bulk_create(
        Intent(
            run=run,
            step_id=f"{run.pk}:{n}:issue_refund",
            turn=n,
            tool="issue_refund",
            args={"n": n},
            idempotency_key=f"key-{n:08d}",
            status=IntentStatus.INTENDED if n < open_ else IntentStatus.PERFORMED,
            intended_at=long_ago + timedelta(seconds=n),
        )
        for n in range(settled + open_)
    )
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=long_ago)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE handover_intent")
        cursor.execute("ANALYZE handover_run")


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(lambda: stale_intents(older_than=timedelta(seconds=60)), id="one-threshold"),
        pytest.param(lambda: _with_per_tool_thresholds(), id="per-tool-thresholds"),
    ],
)
def test_the_sweep_query_uses_the_partial_index_on_open_intents(
    make_run: Callable[..., Run], query: Callable[[], object]
) -> None:
    # A realistic journal: almost every row settled, a handful in doubt. With the statistics
    # fresh, the planner picks the partial index by itself (no enable_seqscan games).
    _journal_of(make_run(), settled=5_000, open_=20)

    plan = query().explain()  # type: ignore[attr-defined]

    assert "intent_open_idx" in plan, plan
    assert len(list(query())) == 20  # type: ignore[call-overload]


def _with_per_tool_thresholds() -> object:
    with override_settings(SEAM_STALE_AFTER_SECONDS=60, SEAM_STALE_AFTER_BY_TOOL={"notify_seller": 300}):
        return stale_intents()
