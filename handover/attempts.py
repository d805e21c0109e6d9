"""A run's attempts counted apart, from its rows: each tool's calls by how they ended, and the
run's retries, repairs, replans, reflections and escalations, with the loop flag. One selector
(`run_attempts` over a handover's rows; `attempts_of` over any run's calls, as insights reads
them) feeds the run page, the handover's API and insights.

What the journal's calls show, walked in the order they were recorded:

- a **retry** is a call with the same tool and canonical arguments as an earlier *failed* call of
  the run, whatever that failure's class: the taxonomy calls a same-call repeat a retry, and a
  repeat after a `permanent` or `invalid_input` answer is exactly the blind retry to be counted;
- a **repair** is a call of the same tool with changed arguments when that tool's latest failure
  was `invalid_input`;
- a **replan** is the first call after a `conflict` failure that is not the same call again (a
  different tool, or the same tool with changed arguments): the state was read and the plan
  changed. A plan upgraded on resumption (run_plan_upgraded) is the versions', not the agent's,
  and is not counted.

Reflections and escalations are the agent's own acts; only it can report them (the counters
endpoint). For retries, repairs and replans the larger of the derived and the reported number is
the count, and both are kept (`derived`, `reported`): a runtime that never calls the counters
endpoint is still measured, and one that counts more than the rows show (retries inside one
call) is believed.

A handover cut to its first items reads some old performed steps without their arguments
(handover.rows.PerformedStep with `args` None). Such a step after a failure of its tool is taken
for the same call unless that failure was `invalid_input` or `permanent`, after which the journal
refuses the same call (journal.attempts), so it was a changed one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from journal.models import ErrorClass, IntentStatus, Run

from .objects import AttemptCounts, ToolAttempts
from .rows import HandoverRows

# The run's reason code (journal.why.RunWhy) when it was stopped for looping on a failing call.
LOOPING = "looping"
OK = "ok"
# The counters the agent reports (Run's fields, the counters endpoint's names).
REPORTED = ("retries", "repairs", "replans", "reflections", "escalations")
DERIVED = ("retries", "repairs", "replans")
# After these, the journal refuses the same call: an argument-less step was a changed one.
SAME_CALL_REFUSED = (ErrorClass.INVALID_INPUT, ErrorClass.PERMANENT)


# Not frozen, with slots: a long run builds one per call, and a frozen dataclass's __init__ costs
# three times as much. Nothing assigns to one after it is built.
@dataclass(slots=True)
class Call:
    """What the counts read of one call: `args` None when they were not read. Any value equal
    exactly when the arguments are will do (insights reads a digest of them)."""

    tool: str
    args: object | None
    status: str
    error_class: str = ""


def outcome_code(call: Call) -> str:
    """How a call ended, as the counts key it: ok, its error class, or its status."""
    if call.status == IntentStatus.PERFORMED:
        return OK
    if call.status == IntentStatus.FAILED:
        return call.error_class or IntentStatus.FAILED
    return call.status


@dataclass
class CallWalk:
    """The counts of a run's calls, walked in order: each tool's calls by how they ended
    (`by_tool`), and its retries, repairs and replans (`per_tool`; a replan is the conflicting
    tool's), with the run's totals (`counts`)."""

    by_tool: dict[str, Counter[str]] = field(default_factory=dict)
    per_tool: dict[str, Counter[str]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    failed: dict[str, list[Call]] = field(default_factory=dict)
    conflict_of: str = ""  # the tool of a conflict not yet followed by a replan

    def same_call(self, call: Call) -> bool:
        earlier = self.failed.get(call.tool, [])
        if not earlier:
            return False
        if call.args is None:
            return earlier[-1].error_class not in SAME_CALL_REFUSED
        return any(f.args == call.args for f in earlier)

    def count(self, name: str, tool: str) -> None:
        self.counts[name] += 1
        self.per_tool.setdefault(tool, Counter())[name] += 1

    def tally(self, call: Call) -> None:
        outcomes = self.by_tool.get(call.tool)
        if outcomes is None:
            outcomes = self.by_tool[call.tool] = Counter()
        outcomes[outcome_code(call)] += 1

    def step(self, call: Call) -> None:
        self.tally(call)
        if call.status != IntentStatus.FAILED and not self.conflict_of and call.tool not in self.failed:
            return  # no failure of its tool before it and no conflict to follow: counted, nothing more
        same = self.same_call(call)
        earlier = self.failed.get(call.tool)
        if same:
            self.count("retries", call.tool)
        elif earlier and earlier[-1].error_class == ErrorClass.INVALID_INPUT:
            self.count("repairs", call.tool)
        if self.conflict_of and not same:
            self.count("replans", self.conflict_of)
            self.conflict_of = ""
        if call.status == IntentStatus.FAILED:
            self.failed.setdefault(call.tool, []).append(call)
            if call.error_class == ErrorClass.CONFLICT:
                self.conflict_of = call.tool


def walk(calls: Iterable[Call]) -> CallWalk:
    """Walk a run's calls, in the order they were recorded."""
    walked = CallWalk()
    by_tool = walked.by_tool
    for call in calls:
        # What CallWalk.step does for a performed call no failure of its tool came before and no
        # conflict awaits a replan after: counted, nothing more. Inline, as most calls are so.
        if (
            call.status == IntentStatus.PERFORMED
            and not walked.conflict_of
            and call.tool not in walked.failed
        ):
            outcomes = by_tool.get(call.tool)
            if outcomes is None:
                outcomes = by_tool[call.tool] = Counter()
            outcomes[OK] += 1
        else:
            walked.step(call)
    return walked


def reported_counts(run: Run) -> dict[str, int]:
    """What the agent reported through the counters endpoint."""
    return {name: int(getattr(run, name) or 0) for name in REPORTED}


def is_looping(outcome_why: Mapping[str, Any] | None) -> bool:
    return bool(outcome_why) and (outcome_why or {}).get("code") == LOOPING


def attempts_of(calls: Iterable[Call], *, reported: Mapping[str, int], looping: bool) -> AttemptCounts:
    """The counts of a run's calls (in the order they were recorded) and its reported counters."""
    walked = walk(calls)
    derived = {name: walked.counts[name] for name in DERIVED}
    classes: Counter[str] = Counter()
    for outcomes in walked.by_tool.values():
        classes.update({code: n for code, n in outcomes.items() if code in ErrorClass.values})
    return AttemptCounts(
        attempts=sum(sum(c.values()) for c in walked.by_tool.values()),
        retries=max(derived["retries"], reported.get("retries", 0)),
        repairs=max(derived["repairs"], reported.get("repairs", 0)),
        replans=max(derived["replans"], reported.get("replans", 0)),
        reflections=reported.get("reflections", 0),
        escalations=reported.get("escalations", 0),
        derived=derived,
        reported={name: reported.get(name, 0) for name in REPORTED},
        by_tool=[
            ToolAttempts(tool=tool, attempts=sum(c.values()), outcomes=dict(c.most_common()))
            for tool, c in walked.by_tool.items()
        ],
        error_classes=dict(sorted(classes.items(), key=lambda item: (-item[1], item[0]))),
        looping=looping,
    )


def calls_of(rows: HandoverRows) -> list[Call]:
    """The handover rows' calls in order, whole or not (rows.steps: no query)."""
    return [Call(step.tool, step.args, step.status, step.error_class) for step in rows.steps]


def run_attempts(rows: HandoverRows) -> AttemptCounts:
    """The run's counts, from the rows its handover already loaded."""
    run = rows.run
    return attempts_of(calls_of(rows), reported=reported_counts(run), looping=is_looping(run.outcome_why))
