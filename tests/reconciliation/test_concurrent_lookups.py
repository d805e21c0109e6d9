"""A batch's lookups asked side by side (reconciliation.lookups), each downstream within the
bound it declared: the downstream's own count of lookups at once never passes it, tools sharing
a downstream share its bound, and a declared rate spaces the starts."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import ModuleType

import pytest
from django.test import override_settings
from django.utils import timezone

from journal import services as journal
from journal.models import Intent, IntentStatus, Run
from reconciliation.services import ReconcileOutcome, intents_reconcile
from tests.reconciliation import slow_downstream
from tests.reconciliation.slow_downstream import CONCURRENCY, LATENCY, SEEN
from tests.support.plugins import declaring

pytestmark = pytest.mark.django_db(transaction=True)

SWEEPER = journal.Actor.system("test-sweeper")


@pytest.fixture
def slow_tools() -> Iterator[None]:
    SEEN.reset()
    with declaring("tests.reconciliation.slow_downstream"):
        yield


def _open_calls(run: Run, n: int) -> list[int]:
    ids = []
    for i in range(n):
        tool = "slow_write" if i % 2 else "slow_undo"  # two tools, one downstream
        ids.append(
            journal.intent_record(
                run=run, tool=tool, args={"n": i}, turn=i + 1, actor=journal.Actor.agent("bot")
            ).intent.pk
        )
    Intent.objects.filter(pk__in=ids).update(intended_at=timezone.now() - timedelta(minutes=5))
    return ids


@override_settings(SEAM_LOOKUP_THREADS=16, SEAM_RECONCILE_BATCH_SIZE=50)
def test_lookups_run_side_by_side_and_never_past_the_downstreams_bound(
    slow_tools: None, make_run: Callable[..., Run]
) -> None:
    ids = _open_calls(make_run(), 30)

    started = time.monotonic()
    results = intents_reconcile(intent_ids=ids, actor=SWEEPER)
    took = time.monotonic() - started

    assert [r.outcome for r in results] == [ReconcileOutcome.NOT_PERFORMED] * 30
    assert Intent.objects.filter(pk__in=ids, status=IntentStatus.NOT_PERFORMED).count() == 30
    assert SEEN.most == CONCURRENCY  # reached, and never passed
    # One at a time would take 30 x 50 ms; three at a time about a third of that.
    assert took < 30 * LATENCY * 0.7


@override_settings(SEAM_LOOKUP_THREADS=1)
def test_one_thread_asks_one_row_at_a_time(slow_tools: None, make_run: Callable[..., Run]) -> None:
    ids = _open_calls(make_run(), 6)
    intents_reconcile(intent_ids=ids, actor=SWEEPER)
    assert SEEN.most == 1


@override_settings(SEAM_LOOKUP_THREADS=16)
def test_a_declared_rate_spaces_the_lookups_starts(
    make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    SEEN.reset()
    rated = ModuleType(
        "tests.reconciliation.slow_rated", "The slow downstream, declared at 20 lookups a second."
    )
    rated.tools = lambda: slow_downstream.tools(rate=20.0)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, rated.__name__, rated)
    with declaring("tests.reconciliation.slow_rated"):
        ids = _open_calls(make_run(), 8)
        intents_reconcile(intent_ids=ids, actor=SWEEPER)
    starts = sorted(SEEN.starts)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(starts) == 8 and min(gaps) >= 1 / 20.0 * 0.9  # 20 a second: 50 ms apart
