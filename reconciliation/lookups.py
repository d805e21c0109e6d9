"""Asking downstream systems about a claimed batch concurrently, each downstream within what it
declared it takes (ToolSpec.lookup_concurrency and lookup_rate, by ToolSpec.downstream).

At 50 ms a lookup, asking one row at a time settles 20 rows a second; a batch asked side by side
settles as fast as the downstreams allow. The bounds are this worker process's: a semaphore
per downstream caps the lookups in flight, and a pacer spaces their starts to the declared rate.
Two worker processes may each reach the bound (docs/operations.md says so), which a downstream
that must never see more declares for by halving it.

Asking reads no database row (reconciliation.services._ask works from the claimed intents), so
the threads need no connection of their own; each row's lease is checked as its turn comes.

The threads are the process's, kept between batches (SEAM_LOOKUP_THREADS of them), so a sweeper
can start asking about one batch and, while the downstreams answer, settle the batch before it
(start_asking; reconciliation.services.reconcile_sweep): the latency is waited out beside Seam's
own work instead of after it.

A downstream that answers at once (its recent lookups under AT_ONCE_SECONDS, as one in the
worker's own process may) is asked in the sweeper's thread instead: handing it to a thread cost
more than the lookup, and the threads' work then contended for the interpreter with the batch
being settled (bench/reconcile.py, "2 workers / 1 worker")."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from journal.models import Intent
from tools.registry import DEFAULT_LOOKUP_CONCURRENCY, find_tool


@dataclass(frozen=True)
class Bound:
    concurrency: int
    rate: float  # lookups started per second; 0: no limit


# A downstream whose lookups take less than this, lately, is asked in the sweeper's own thread:
# handing a lookup to a thread and its answer back costs more than it waits (a lookup of a
# network service takes longer than this; one in the worker's own process may not).
AT_ONCE_SECONDS = 0.001
# How much each lookup's time moves the downstream's recent time (an exponential average).
RECENT_WEIGHT = 0.2


class _Downstream:
    """One downstream's gate: at most `concurrency` lookups in flight, started no faster than
    `rate` a second; and how long its lookups have taken lately."""

    def __init__(self, bound: Bound) -> None:
        self.bound = bound
        self.slots = threading.BoundedSemaphore(max(1, bound.concurrency))
        self._pace = threading.Lock()
        self._next_start = 0.0
        self.recent_seconds: float | None = None  # none asked yet in this process

    def run[T](self, ask: Callable[[], T]) -> T:
        with self.slots:
            self._wait_turn()
            started = time.monotonic()
            try:
                return ask()
            finally:
                took = time.monotonic() - started
                recent = self.recent_seconds
                # Written under the GIL by whichever thread finishes: an average, not a ledger.
                self.recent_seconds = took if recent is None else recent + RECENT_WEIGHT * (took - recent)

    def answers_at_once(self) -> bool:
        """Whether its lookups lately took less than AT_ONCE_SECONDS (not known before one)."""
        return self.recent_seconds is not None and self.recent_seconds < AT_ONCE_SECONDS

    def _wait_turn(self) -> None:
        """Start no sooner than 1/rate after the last start: the starts pass one at a time, each
        timed from when the one before it really started."""
        if self.bound.rate <= 0:
            return
        with self._pace:
            wait = self._next_start - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._next_start = time.monotonic() + 1.0 / self.bound.rate


_gates: dict[tuple[str, Bound], _Downstream] = {}
_gates_lock = threading.Lock()


def _gate(intent: Intent) -> _Downstream:
    spec = find_tool(intent.tool)
    name = (spec.downstream or spec.name) if spec is not None else intent.tool
    # An undeclared tool (SEAM_UNDECLARED_TOOLS=accept) has the default bound.
    bound = (
        Bound(spec.lookup_concurrency, spec.lookup_rate)
        if spec is not None
        else Bound(DEFAULT_LOOKUP_CONCURRENCY, 0.0)
    )
    with _gates_lock:
        return _gates.setdefault((name, bound), _Downstream(bound))


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _forget_threads() -> None:
    """A forked child (a prefork pool process) has none of its parent's threads: it starts its
    own pools, gates and locks, none of them held by a thread it does not have."""
    global _pools_lock, _gates_lock
    _pools.clear()
    _gates.clear()
    _pools_lock, _gates_lock = threading.Lock(), threading.Lock()


os.register_at_fork(after_in_child=_forget_threads)


def _pool(threads: int) -> ThreadPoolExecutor:
    """The process's lookup threads, at most `threads` of them, started as they are needed."""
    with _pools_lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="seam-lookup")
        return pool


class Asking[T]:
    """The lookups of one claimed batch, under way: `result()` waits for their answers."""

    def __init__(self, claimed: Sequence[Intent], outcomes: Sequence[Future[T | None] | T | None]) -> None:
        self.claimed = claimed
        self._outcomes = outcomes

    def result(self) -> tuple[list[T], list[int]]:
        """(the answers, in the rows' order; the ids of rows whose lease lapsed before their
        turn, not asked about)."""
        outcomes = [o.result() if isinstance(o, Future) else o for o in self._outcomes]
        answers = [answer for answer in outcomes if answer is not None]
        lapsed = [intent.pk for intent, answer in zip(self.claimed, outcomes, strict=True) if answer is None]
        return answers, lapsed


def start_asking[T](
    claimed: Sequence[Intent], ask: Callable[[Intent], T], *, lease_end: datetime
) -> Asking[T]:
    """Start asking about each claimed row, concurrently within each downstream's bound, on the
    process's lookup threads; a row of a downstream that lately answers at once
    (_Downstream.answers_at_once), and with one thread (SEAM_LOOKUP_THREADS=1) every row, one at
    a time, here, before returning."""
    threads = int(settings.SEAM_LOOKUP_THREADS)
    if threads <= 1 or len(claimed) <= 1:
        return Asking(claimed, [_asked(intent, ask, lease_end) for intent in claimed])
    pool = _pool(threads)

    def on_thread(intent: Intent) -> Future[T | None]:
        # Each row's own context (its log fields), as if asked in the sweeper's thread.
        return pool.submit(copy_context().run, _asked, intent, ask, lease_end)

    gates = [_gate(intent) for intent in claimed]
    # The rows of downstreams that make Seam wait go to the threads first; the rest are asked
    # here, in order, until their downstream turns slow, when its remaining rows go too.
    outcomes: list[Future[T | None] | T | None] = [
        None if gate.answers_at_once() else on_thread(intent)
        for intent, gate in zip(claimed, gates, strict=True)
    ]
    for index, (intent, gate) in enumerate(zip(claimed, gates, strict=True)):
        if outcomes[index] is None:
            outcomes[index] = _asked(intent, ask, lease_end) if gate.answers_at_once() else on_thread(intent)
    return Asking(claimed, outcomes)


def ask_each[T](
    claimed: Sequence[Intent], ask: Callable[[Intent], T], *, lease_end: datetime
) -> tuple[list[T], list[int]]:
    """Ask about each claimed row, concurrently within each downstream's bound: (the answers, in
    the rows' order; the ids of rows whose lease lapsed before their turn, not asked about)."""
    return start_asking(claimed, ask, lease_end=lease_end).result()


def _asked[T](intent: Intent, ask: Callable[[Intent], T], lease_end: datetime) -> T | None:
    """The answer about one row, or None when its lease lapsed before its turn: whoever claims it
    next asks about it, and asking now could race them."""
    gate = _gate(intent)

    def within_lease() -> T | None:
        return None if timezone.now() >= lease_end else ask(intent)

    return gate.run(within_lease)
