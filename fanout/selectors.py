"""Reads of the fan-out record: a tool's recent latencies (for the retry rule's p95) and a run's
coverage (for the handover object and the run page). Each is one or two bounded queries."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet

from journal.models import Run

from .models import BranchStatus, FanOut, FanOutBranch

# The p95 is taken over this many of the tool's most recent recorded latencies.
P95_WINDOW = 100
# Latencies that say how long the tool takes: answers, and waits cut short by a deadline (a lower
# bound, so a slow tool is not flattered). A fast refusal says nothing about the answer's time.
TIMED_STATUSES = (BranchStatus.OK, BranchStatus.MISSING)


def recent_latencies(tool: str, *, window: int = P95_WINDOW) -> QuerySet[FanOutBranch, int | None]:
    """The tool's latest `window` recorded latencies, newest first: served by
    fanout_branch_latency_idx (tool, finished_at DESC), a partial index on exactly these
    statuses, walked from the newest entry and stopped by the LIMIT."""
    return (
        FanOutBranch.objects.filter(tool=tool, status__in=TIMED_STATUSES)
        .order_by("-finished_at")
        .values_list("latency_ms", flat=True)[:window]
    )


def p95_of(latencies: Sequence[int]) -> int | None:
    """Nearest-rank 95th percentile, or None of nothing."""
    if not latencies:
        return None
    ordered = sorted(latencies)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def tool_latency_p95(tool: str) -> int | None:
    """The p95 of the tool's recent latencies, or None when none are recorded."""
    return p95_of([value for value in recent_latencies(tool) if value is not None])


def _latest_fanout(run: Run) -> FanOut | None:
    return FanOut.objects.filter(run=run).order_by("-started_at", "-id").prefetch_related("branches").first()


def run_coverage(run: Run) -> dict[str, Any] | None:
    """What the run's latest fan-out covered, for the handover: None when the run had none;
    else its outcome, `coverage` ("2/3"), each missing branch with why and what became of its
    retry, each checked branch with its result, and what the merged decision rests on. Two
    queries: the fan-out, then its branches."""
    fanout = _latest_fanout(run)
    if fanout is None:
        return None
    by_name: dict[str, list[FanOutBranch]] = {}
    for row in sorted(fanout.branches.all(), key=lambda r: (r.pk, r.attempt)):
        by_name.setdefault(row.name, []).append(row)
    missing: list[dict[str, Any]] = []
    checked: list[dict[str, Any]] = []
    for name, attempts in by_name.items():
        answered = next((a for a in attempts if a.status == BranchStatus.OK), None)
        if answered is not None:
            checked.append(_checked_branch(name, answered, attempts))
        else:
            missing.append(_missing_branch(name, attempts))
    return {
        "fanout": fanout.name,
        "turn": fanout.turn,
        "deadline_ms": fanout.deadline_ms,
        "coverage": fanout.coverage,
        "outcome": fanout.outcome,
        "outcome_label": fanout.get_outcome_display() if fanout.outcome else "not settled",
        "missing": missing,
        "checked": checked,
        "decision": _decision(fanout.decision or {}),
    }


def _checked_branch(name: str, answered: FanOutBranch, attempts: list[FanOutBranch]) -> dict[str, Any]:
    """A branch that answered: its result, from the attempt that gave it."""
    return {
        "branch": name,
        "tool": answered.tool,
        "required": answered.required,
        "result": answered.result,
        "latency_ms": answered.latency_ms,
        "attempts": len(attempts),
    }


def _missing_branch(name: str, attempts: list[FanOutBranch]) -> dict[str, Any]:
    """A branch with no answer: why its last attempt has none, and what became of the retry."""
    last = attempts[-1]
    first = attempts[0]
    if last.status == BranchStatus.MISSING:
        why = "deadline"
    elif last.status == BranchStatus.PENDING:
        why = "still out (the fan-out has not settled)"
    else:
        why = f"{last.error_class}: {last.error_message}" if last.error_message else last.error_class
    retry = first.retry_note or (
        "not attempted: the deadline came first" if first.status == BranchStatus.MISSING else ""
    )
    return {
        "branch": name,
        "tool": last.tool,
        "required": last.required,
        "why": why,
        "retry": retry,
        "attempts": len(attempts),
    }


def _decision(decision: dict[str, Any]) -> dict[str, Any]:
    """The merged decision as stored, with every key present for the page."""
    return {
        "proceed": bool(decision.get("proceed")),
        "rule": decision.get("rule", ""),
        "summary": decision.get("summary", ""),
        "rests_on": list(decision.get("rests_on", [])),
        "promise": decision.get("promise") or {},
        "conflict": decision.get("conflict"),
    }
