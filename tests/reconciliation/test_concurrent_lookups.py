"""A batch's lookups asked side by side (reconciliation.lookups), each downstream within the
bound it declared: the downstream's own count of lookups at once never passes it, tools sharing
a downstream share its bound, and a declared rate spaces the starts."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import ModuleType
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from journal import services as journal
from journal.models import Intent, IntentStatus, JournalEvent, Run
from journal.tool_errors import DispatchResult
from reconciliation.services import ReconcileOutcome, intents_reconcile
from tests.reconciliation import slow_downstream
from tests.reconciliation.slow_downstream import CONCURRENCY, LATENCY, SEEN
from tests.support.plugins import declaring
from tools.connectors import LookupQuery, LookupResult, NotPerformed
from tools.registry import ToolSpec

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


class _TurningSlow:
    """A downstream that answers its first `fast` lookups at once and the rest after 20 ms, and
    notes which thread asked each one."""

    def __init__(self, fast: int) -> None:
        self.fast = fast
        self.asked_on: list[str] = []

    def perform(self, args: Any, idempotency_key: str) -> DispatchResult:
        return DispatchResult(summary="done", receipt={"key": idempotency_key})

    def lookup(self, query: LookupQuery) -> LookupResult:
        self.asked_on.append(threading.current_thread().name)
        if len(self.asked_on) > self.fast:
            time.sleep(0.02)
        return NotPerformed()


@override_settings(SEAM_LOOKUP_THREADS=16, SEAM_RECONCILE_BATCH_SIZE=5)
def test_a_downstream_answering_at_once_is_asked_here_until_it_makes_the_sweeper_wait(
    make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Handing a lookup that answers at once to a thread costs more than it saves; a downstream
    # that makes Seam wait is asked side by side again from its next row on.
    downstream = _TurningSlow(fast=10)
    module = ModuleType("tests.reconciliation.turning_slow", "A downstream that turns slow.")
    module.tools = lambda: [  # type: ignore[attr-defined]
        ToolSpec(
            name="turning_write",
            kind="write",
            args_schema={"type": "object"},
            connector=downstream,
            downstream=f"turning-{time.time_ns()}",  # a gate of its own, new to this process
        )
    ]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with declaring(module.__name__):
        run = make_run()
        ids = [
            journal.intent_record(
                run=run, tool="turning_write", args={"n": i}, turn=i + 1, actor=journal.Actor.agent("bot")
            ).intent.pk
            for i in range(15)
        ]
        Intent.objects.filter(pk__in=ids).update(intended_at=timezone.now() - timedelta(minutes=5))
        results = intents_reconcile(intent_ids=ids, actor=SWEEPER)

    assert [r.outcome for r in results] == [ReconcileOutcome.NOT_PERFORMED] * 15
    # The journal says what the downstream said, once per row, whichever thread asked it.
    assert len(downstream.asked_on) == 15
    assert Intent.objects.filter(pk__in=ids, status=IntentStatus.NOT_PERFORMED).count() == 15
    reconciled = JournalEvent.objects.filter(intent_id__in=ids, kind=JournalEvent.Kind.INTENT_RECONCILED)
    assert sorted(reconciled.values_list("intent_id", flat=True)) == sorted(ids)
    here = threading.current_thread().name
    first, second, third = (downstream.asked_on[i : i + 5] for i in (0, 5, 10))
    # Not yet known: asked side by side. Known to answer at once: asked here, in order.
    assert here not in first, first
    assert second == [here] * 5
    # Its 11th lookup took 20 ms: the batch's other rows went to the threads.
    assert third[0] == here and here not in third[1:], third
