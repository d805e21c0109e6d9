"""Fan-out with a deadline: read branches dispatched together against one shared
deadline, each declared `required` or best-effort; at the deadline the group's outcome is
computed by code — all good, some good (proceed, labelled partial, with coverage), a required
branch missing, none good — and the results are merged by declared rules (fanout.merge).

A failed branch is retried once, with jitter, and only if the time left before the deadline
exceeds the observed p95 latency of its tool (fanout.selectors.tool_latency_p95, from recorded
latencies); otherwise the retry is not sent and the record says why.

Every state change — dispatched, each attempt settled, each retry sent or not, the group
settled — commits with its journal event in one durable transaction. The reads themselves run in
worker threads that touch no database; only this thread writes."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from journal import services as journal
from journal.models import JournalEvent, OutcomeReason, Run
from journal.tool_errors import ToolError
from journal.why import RunWhy, why
from tools.services import tool_read

from .merge import MERGES, Decision, Merge, Reading
from .models import BranchStatus, FanOut, FanOutBranch, Outcome
from .selectors import tool_latency_p95
from .spec import GroupSpec

# A retry waits a random 0..JITTER_MAX_MS first, so a group's retries do not land together.
JITTER_MAX_MS = 50
# Reads are safe to repeat; these classes say the downstream may answer next time.
RETRYABLE = frozenset({"transient", "ambiguous"})
# A read's own HTTP timeout is the time left plus this, so the deadline (not the read's timeout)
# is what ends a branch that is still out: it is recorded missing, not failed.
READ_GRACE_S = 0.25

Reader = Callable[[str, dict[str, Any], float], dict[str, Any]]


def tool_reader(tool: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The default reader: a registered read tool through its connector."""

    return tool_read(tool=tool, args=args, timeout=timeout)


@dataclass(frozen=True)
class Attempt:
    """What one read came to, as seen by the worker thread that made it."""

    result: dict[str, Any] | None
    error_class: str
    message: str
    latency_ms: int
    started_at: datetime
    finished_at: datetime


def _read(reader: Reader, tool: str, args: dict[str, Any], timeout: float, delay_s: float) -> Attempt:
    if delay_s > 0:
        time.sleep(delay_s)
    started_at = timezone.now()
    began = time.monotonic()
    result: dict[str, Any] | None = None
    error_class = message = ""
    try:
        result = reader(tool, args, timeout)
    except ToolError as exc:
        error_class, message = exc.error_class, exc.message
    except journal.JournalError as exc:  # refused arguments, unknown tool
        error_class, message = "invalid_input", exc.message
    except Exception as exc:  # a reader that broke: recorded, never raised past the group
        error_class, message = "bug", f"{type(exc).__name__}: {exc}"
    return Attempt(
        result=result,
        error_class=error_class,
        message=message[:500],
        latency_ms=round((time.monotonic() - began) * 1000),
        started_at=started_at,
        finished_at=timezone.now(),
    )


@dataclass(frozen=True)
class FanOutResult:
    fanout: FanOut
    outcome: str
    coverage: str
    readings: tuple[Reading, ...]
    decision: Decision

    @property
    def proceed(self) -> bool:
        return self.outcome in (Outcome.ALL_GOOD, Outcome.SOME_GOOD) and self.decision.proceed

    @property
    def missing(self) -> list[Reading]:
        return [r for r in self.readings if r.result is None]

    def result_of(self, branch: str) -> dict[str, Any] | None:
        return next((r.result for r in self.readings if r.branch == branch), None)


def outcome_of(branches: Sequence[tuple[bool, bool]]) -> str:
    """The group's outcome from (required, answered) per branch."""
    answered = [ok for _required, ok in branches]
    if not any(answered):
        return Outcome.NONE_GOOD
    if any(required and not ok for required, ok in branches):
        return Outcome.REQUIRED_MISSING
    if all(answered):
        return Outcome.ALL_GOOD
    return Outcome.SOME_GOOD


# --- recording --------------------------------------------------------------------------------


def _event(run: Run, kind: str, actor: journal.Actor, at: datetime, data: dict[str, Any]) -> None:
    journal.event_record(run=run, kind=kind, actor=actor, at=at, data=data)


def _fanout_open(
    *, run: Run, spec: GroupSpec, turn: int, actor: journal.Actor
) -> tuple[FanOut, list[FanOutBranch]]:
    now = timezone.now()
    with journal.durable():
        fanout = FanOut.objects.create(
            run=run,
            turn=turn,
            name=spec.name,
            deadline_ms=spec.deadline_ms,
            started_at=now,
            deadline_at=now + timedelta(milliseconds=spec.deadline_ms),
        )
        rows = FanOutBranch.objects.bulk_create(
            [
                FanOutBranch(
                    fanout=fanout,
                    name=branch.name,
                    tool=branch.tool,
                    args=branch.args,
                    required=branch.required,
                    started_at=now,
                )
                for branch in spec.branches
            ]
        )
        _event(
            run,
            JournalEvent.Kind.FANOUT_STARTED,
            actor,
            now,
            {
                "fanout": fanout.pk,
                "name": spec.name,
                "deadline_ms": spec.deadline_ms,
                "branches": [{"name": b.name, "tool": b.tool, "required": b.required} for b in spec.branches],
            },
        )
    return fanout, rows


def _branch_settle(*, run: Run, row: FanOutBranch, attempt: Attempt, actor: journal.Actor) -> None:
    row.status = BranchStatus.OK if attempt.result is not None else BranchStatus.ERROR
    row.result = attempt.result or {}
    row.error_class = attempt.error_class
    row.error_message = attempt.message
    row.latency_ms = attempt.latency_ms
    row.started_at = attempt.started_at
    row.finished_at = attempt.finished_at
    with journal.durable():
        FanOutBranch.objects.filter(pk=row.pk, status=BranchStatus.PENDING).update(
            status=row.status,
            result=row.result,
            error_class=row.error_class,
            error_message=row.error_message,
            latency_ms=row.latency_ms,
            started_at=row.started_at,
            finished_at=row.finished_at,
        )
        _event(
            run,
            JournalEvent.Kind.FANOUT_BRANCH_SETTLED,
            actor,
            attempt.finished_at,
            {
                "fanout": row.fanout_id,
                "branch": row.name,
                "attempt": row.attempt,
                "status": row.status,
                "error_class": row.error_class,
                "latency_ms": row.latency_ms,
            },
        )


def _branches_missing(*, run: Run, rows: Sequence[FanOutBranch], actor: journal.Actor) -> None:
    """The deadline came first: each attempt still out is missing, its latency the time waited."""
    now = timezone.now()
    with journal.durable():
        for row in rows:
            row.status = BranchStatus.MISSING
            row.finished_at = now
            row.latency_ms = max(0, round((now - row.started_at).total_seconds() * 1000))
            FanOutBranch.objects.filter(pk=row.pk, status=BranchStatus.PENDING).update(
                status=row.status, finished_at=now, latency_ms=row.latency_ms
            )
            _event(
                run,
                JournalEvent.Kind.FANOUT_BRANCH_SETTLED,
                actor,
                now,
                {
                    "fanout": row.fanout_id,
                    "branch": row.name,
                    "attempt": row.attempt,
                    "status": row.status,
                    "why": "deadline",
                    "latency_ms": row.latency_ms,
                },
            )


@dataclass(frozen=True)
class RetryChoice:
    send: bool
    note: str
    remaining_ms: int
    p95_ms: int | None
    jitter_ms: int


def retry_choose(*, row: FanOutBranch, remaining_ms: int, rng: random.Random) -> RetryChoice:
    """Once, with jitter, only for a class worth retrying, and only if the time left after the
    jitter exceeds the tool's observed p95 (its recorded latencies; with none recorded yet, the
    failed attempt's own latency is the only observation there is)."""
    jitter_ms = rng.randint(0, JITTER_MAX_MS)
    if row.error_class not in RETRYABLE:
        return RetryChoice(
            False, f"not attempted: {row.error_class} is not worth retrying", remaining_ms, None, 0
        )
    p95 = tool_latency_p95(row.tool)
    basis = "p95"
    if p95 is None:
        p95, basis = row.latency_ms or 0, "no recorded latencies; this attempt took"
    left = remaining_ms - jitter_ms
    if left > p95:
        note = f"sent after {jitter_ms} ms jitter: remaining {left} ms > {basis} {p95} ms"
        return RetryChoice(True, note, remaining_ms, p95, jitter_ms)
    note = f"not attempted: remaining {max(left, 0)} ms <= {basis} {p95} ms"
    return RetryChoice(False, note, remaining_ms, p95, jitter_ms)


def _retry_record(
    *, run: Run, row: FanOutBranch, choice: RetryChoice, actor: journal.Actor
) -> FanOutBranch | None:
    """Record the retry decision on the failed attempt; when sent, open the second attempt."""
    now = timezone.now()
    retry: FanOutBranch | None = None
    with journal.durable():
        FanOutBranch.objects.filter(pk=row.pk).update(retry_note=choice.note)
        row.retry_note = choice.note
        if choice.send:
            retry = FanOutBranch.objects.create(
                fanout_id=row.fanout_id,
                name=row.name,
                tool=row.tool,
                args=row.args,
                required=row.required,
                attempt=row.attempt + 1,
                started_at=now,
            )
        _event(
            run,
            JournalEvent.Kind.FANOUT_RETRY,
            actor,
            now,
            {
                "fanout": row.fanout_id,
                "branch": row.name,
                "sent": choice.send,
                "note": choice.note,
                "remaining_ms": choice.remaining_ms,
                "p95_ms": choice.p95_ms,
                "jitter_ms": choice.jitter_ms,
            },
        )
    return retry


def _why(row: FanOutBranch) -> str:
    if row.status == BranchStatus.MISSING:
        return "deadline"
    return f"{row.error_class}: {row.error_message}" if row.error_message else row.error_class


def readings_of(rows: Sequence[FanOutBranch]) -> tuple[Reading, ...]:
    """One reading per branch, in declared order: the answered attempt if any, else the last."""
    latest: dict[str, FanOutBranch] = {}
    answered: dict[str, FanOutBranch] = {}
    for row in sorted(rows, key=lambda r: r.attempt):
        latest[row.name] = row
        if row.status == BranchStatus.OK:
            answered[row.name] = row
    readings = []
    for name, row in latest.items():
        ok = answered.get(name)
        if ok is not None:
            readings.append(Reading(branch=name, tool=ok.tool, required=ok.required, result=ok.result))
        else:
            readings.append(
                Reading(branch=name, tool=row.tool, required=row.required, result=None, why=_why(row))
            )
    return tuple(readings)


def _decide(outcome: str, readings: Sequence[Reading], merge: Merge | None) -> Decision:
    checked = tuple(f"{r.branch}: answered" for r in readings if r.checked)
    missing = [r for r in readings if not r.checked]
    if outcome in (Outcome.NONE_GOOD, Outcome.REQUIRED_MISSING):
        lost = [r for r in missing if r.required] if outcome == Outcome.REQUIRED_MISSING else missing
        return Decision(
            proceed=False,
            rule=outcome,
            summary="no decision without "
            + ", ".join(f"{r.branch} ({r.why})" for r in lost)
            + "; a person finishes the job with what was gathered",
            rests_on=checked,
        )
    if merge is None:
        return Decision(
            proceed=True, rule="gathered", summary="results gathered; no merge declared", rests_on=checked
        )
    try:
        return merge(readings)
    except Exception as exc:  # a merge that cannot decide must not decide at random
        return Decision(
            proceed=False, rule="merge_failed", summary=f"{type(exc).__name__}: {exc}", rests_on=checked
        )


def _fanout_settle(
    *, run: Run, fanout: FanOut, rows: Sequence[FanOutBranch], merge: Merge | None, actor: journal.Actor
) -> FanOutResult:
    readings = readings_of(rows)
    outcome = outcome_of([(r.required, r.checked) for r in readings])
    coverage = f"{sum(r.checked for r in readings)}/{len(readings)}"
    decision = _decide(outcome, readings, merge)
    now = timezone.now()
    with journal.durable():
        FanOut.objects.filter(pk=fanout.pk).update(
            outcome=outcome, coverage=coverage, decision=decision.as_json(), settled_at=now
        )
        _event(
            run,
            JournalEvent.Kind.FANOUT_SETTLED,
            actor,
            now,
            {
                "fanout": fanout.pk,
                "name": fanout.name,
                "outcome": outcome,
                "coverage": coverage,
                "missing": [{"branch": r.branch, "why": r.why} for r in readings if not r.checked],
                "rule": decision.rule,
                "proceed": decision.proceed,
                "conflict": decision.conflict is not None,
            },
        )
    fanout.outcome, fanout.coverage, fanout.decision, fanout.settled_at = (
        outcome,
        coverage,
        decision.as_json(),
        now,
    )
    return FanOutResult(
        fanout=fanout, outcome=outcome, coverage=coverage, readings=readings, decision=decision
    )


# --- the service ------------------------------------------------------------------------------


def fanout_run(
    *,
    run: Run,
    spec: GroupSpec,
    turn: int,
    actor: journal.Actor,
    merge: Merge | None = None,
    facts: dict[str, Any] | None = None,
    reader: Reader = tool_reader,
    rng: random.Random | None = None,
) -> FanOutResult:
    """Dispatch `spec`'s branches at once, wait for them until the shared deadline (retrying a
    failed one once when the budget allows), settle the group and merge its results. `merge`
    defaults to the one `spec.merge` names, built from `facts`. Returns within about
    `spec.deadline_ms`; reads still out at the deadline are abandoned, recorded missing."""
    if merge is None and spec.merge:
        if facts is None:
            raise ValueError(f"fan-out {spec.name} declares the merge {spec.merge}; pass the ticket's facts")
        merge = MERGES[spec.merge](facts)
    rng = rng or random.Random()
    fanout, rows = _fanout_open(run=run, spec=spec, turn=turn, actor=actor)
    deadline = time.monotonic() + spec.deadline_ms / 1000
    every: list[FanOutBranch] = list(rows)
    executor = ThreadPoolExecutor(max_workers=len(rows), thread_name_prefix=f"fanout-{fanout.pk}")

    def send(row: FanOutBranch, delay_s: float = 0.0) -> Future[Attempt]:
        timeout = max(deadline - time.monotonic() - delay_s, 0) + READ_GRACE_S
        return executor.submit(_read, reader, row.tool, row.args, timeout, delay_s)

    try:
        in_flight: dict[Future[Attempt], FanOutBranch] = {send(row): row for row in rows}
        while in_flight:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            done, _ = wait(in_flight, timeout=remaining, return_when=FIRST_COMPLETED)
            for future in done:
                row = in_flight.pop(future)
                _branch_settle(run=run, row=row, attempt=future.result(), actor=actor)
                if row.status != BranchStatus.ERROR or row.attempt > 1:
                    continue
                remaining_ms = max(0, round((deadline - time.monotonic()) * 1000))
                choice = retry_choose(row=row, remaining_ms=remaining_ms, rng=rng)
                retry = _retry_record(run=run, row=row, choice=choice, actor=actor)
                if retry is not None:
                    every.append(retry)
                    in_flight[send(retry, delay_s=choice.jitter_ms / 1000)] = retry
        if in_flight:
            _branches_missing(run=run, rows=list(in_flight.values()), actor=actor)
    finally:
        # Reads still out are abandoned; their own timeouts end them shortly after the deadline.
        executor.shutdown(wait=False, cancel_futures=True)
    return _fanout_settle(run=run, fanout=fanout, rows=every, merge=merge, actor=actor)


def fanout_hand_over(*, result: FanOutResult, actor: journal.Actor) -> bool:
    """Degrade to a person — a designed outcome, not a failure: the run is escalated with what
    was gathered, what is missing and why, and what the decision rests on (the handover's
    coverage). False when the run had already ended."""
    run = result.fanout.run
    incomplete = why(
        RunWhy.FANOUT_INCOMPLETE,
        name=result.fanout.name,
        outcome=str(result.outcome),
        coverage=str(result.coverage),
        missing=[{"branch": r.branch, "why": r.why} for r in result.missing],
        rule=result.decision.rule,
        summary=result.decision.summary[:4000],
    )
    with journal.durable():
        handed = journal.run_hand_over(
            run=run,
            reason=OutcomeReason.POLICY,
            why=incomplete,
            actor=actor,
            event_data={"fanout": result.fanout.pk},
        )
    return handed is not None
