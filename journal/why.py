"""Why, as codes with their facts: what settled a call the runtime did not (Intent.verdict) and
why a run went to a person (Run.outcome_why, Escalation.why).

The domain stores a `Why` as JSON, `{"code": ..., **facts}`; handover.words says each code in
words (tests/handover/test_words.py checks every code has its words). The facts are what the
words need and what an integrator's tooling can read: names, keys, counts, times in ISO 8601, and
the downstream's or the agent's own text where one was given, kept as evidence.

A run's `Why` answers the question a person asks first — why could a machine not finish this? —
so its codes are the reasons a machine stops: a call nobody can settle, the policy, the clock,
the versions, a step or an undo that failed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class CallVerdict(StrEnum):
    """What settled a call its runtime left open (Intent.verdict)."""

    # The downstream, asked about the call's key.
    FOUND_PERFORMED = "found_performed"
    FOUND_NOT_PERFORMED = "found_not_performed"
    # facts: at (the evidence's time, or ""), detail (the downstream's words)
    FOUND_ALREADY_SO = "found_already_so"
    # The agent's own success, whose evidence predates the intent. facts: at, intended_at
    ANSWER_PREDATES_INTENT = "answer_predates_intent"
    # Unknown, for a person. facts: attempts, last_error
    LOOKUP_BUDGET_SPENT = "lookup_budget_spent"
    # facts: error_class, message
    LOOKUP_REFUSED = "lookup_refused"
    # facts: answer (the downstream's own reason)
    DOWNSTREAM_CANNOT_SAY = "downstream_cannot_say"
    # No connector declares a lookup for the tool. facts: tool_said (the agent's report of the
    # tool's error when it may have acted, else ""), error (why no lookup: the registry's words)
    NO_LOOKUP = "no_lookup"
    # Sent again under its key to a provider that deduplicates by it (ToolSpec.honours_key),
    # after no lookup could settle it. facts: lookup (why no lookup could: a CallVerdict)
    RESENT_UNDER_KEY = "resent_under_key"
    # The resend was refused for good: nothing was done. facts: lookup, error_class, message
    RESEND_REFUSED = "resend_refused"
    # The provider refused the key (it holds it for something else): for a person.
    # facts: lookup, error_class, message
    KEY_REFUSED = "key_refused"
    # The resend failed in a way that proves nothing. facts: lookup, error_class, message
    RESEND_FAILED = "resend_failed"
    # A person marked the call. facts: status, by, note
    MARKED_BY_PERSON = "marked_by_person"


class RunWhy(StrEnum):
    """Why a run went to a person, or ended without finishing (Run.outcome_why)."""

    # facts: calls, each {tool, key, verdict} (verdict: the call's own Why)
    CALLS_UNKNOWN = "calls_unknown"
    # facts: steps, limit
    PLAN_TOO_LONG = "plan_too_long"
    # facts: task_type
    NO_POLICY = "no_policy"
    # facts: policy_version
    POLICY_ALWAYS_COMPENSATES = "policy_always_compensates"
    # facts: max_age_seconds
    TOO_OLD_TO_RESUME = "too_old_to_resume"
    # facts: phase, tools
    ENTERED_PHASE = "entered_phase"
    # facts: deadline
    DEADLINE_PASSED = "deadline_passed"
    VERSIONS_UNDECLARED = "versions_undeclared"
    # facts: task_type
    NO_FLOW = "no_flow"
    # facts: field, recorded, running
    VERSION_CHANGED = "version_changed"
    UPGRADE_INTERRUPTED = "upgrade_interrupted"
    # facts: tool, error_class, message
    STEP_FAILED = "step_failed"
    RESUME_FAILED = "resume_failed"
    # facts: tool, error
    RESUME_IMPOSSIBLE = "resume_impossible"
    # facts: tool, error_class, error
    UNDO_FAILED = "undo_failed"
    # A fan-out that could not gather what its decision needs. facts: name, outcome, coverage,
    # missing (each {branch, why}), rule, summary (the merge's own account)
    FANOUT_INCOMPLETE = "fanout_incomplete"
    # The agent kept repeating calls the taxonomy refuses (journal.attempts). facts: refusals,
    # minutes, calls (each {tool, error_class, attempts})
    LOOPING = "looping"
    # A call answered with a bug: the run stops. facts: tool, step_id, message
    BUG_ANSWER = "bug_answer"
    # facts: by, note
    RESOLVED_BY_PERSON = "resolved_by_person"


class CleanupCode(StrEnum):
    """What becomes of a cancelled run's call in doubt."""

    # Its outcome is unknown: a person decides.
    PERSON_DECIDES = "person_decides"
    # Reconciliation asks the downstream about its key once it has been quiet for quiet_seconds;
    # if the downstream cannot say, the run goes to a person.
    RECONCILE_WHEN_QUIET = "reconcile_when_quiet"


@dataclass(frozen=True)
class Why:
    """A code and its facts. `undo`, on a run's Why, is what undoing its writes first came to:
    {undone, partial, not_undone, failed, pending}, each a list (RunCompensation.facts)."""

    code: str
    facts: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {**self.facts, "code": str(self.code)}

    def with_facts(self, **more: Any) -> Why:
        return Why(self.code, {**self.facts, **more})


def why(code: str, **facts: Any) -> Why:
    return Why(code, facts)
