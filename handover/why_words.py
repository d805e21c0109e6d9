"""The domain's reasons in words (journal.why): what settled a call its runtime left open, why
a machine could not finish a run, what undoing its writes first came to, and what becomes of a
cancelled run's calls in doubt. A sibling of handover.words, whose helpers (say, tool_words,
when_words) and conventions it follows: each sentence a gettext_lazy template with named
placeholders. tests/handover/test_words.py checks every code has its words here."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.utils.translation import gettext_lazy as _

from compensations.models import CompensationStatus
from journal.why import CallVerdict, CleanupCode, RunWhy

from .words import (
    NO_TEXT,
    NOT_EVERYTHING,
    NOTHING,
    STEP_WITH_DETAIL,
    Template,
    say,
    step_words,
    tool_words,
    tools_words,
    when_words,
)

# What settled a call its runtime left open (Intent.verdict), each code with its facts.
VERDICT_WORDS: dict[str, Template] = {
    CallVerdict.FOUND_PERFORMED: _("reconciliation asked the downstream system: the call was performed"),
    CallVerdict.FOUND_NOT_PERFORMED: _(
        "reconciliation asked the downstream system: it has no record of this call"
    ),
    CallVerdict.FOUND_ALREADY_SO: _(
        "reconciliation asked the downstream system: it was already so before the call (evidence "
        "from %(at)s), so this is not the run's work%(detail)s"
    ),
    CallVerdict.ANSWER_PREDATES_INTENT: _(
        "already so before the call: the downstream's answer dates from %(at)s, the call from "
        "%(intended_at)s, so this is not the run's work"
    ),
    CallVerdict.LOOKUP_BUDGET_SPENT: _(
        "the downstream system could not be asked after %(attempts)s tries; the last answer: %(last_error)s"
    ),
    CallVerdict.LOOKUP_REFUSED: _("the lookup failed (%(error_class)s): %(message)s"),
    CallVerdict.DOWNSTREAM_CANNOT_SAY: _("the downstream system cannot say: %(answer)s"),
    CallVerdict.NO_LOOKUP: _("no lookup can ask the downstream system about it (%(error)s)"),
    CallVerdict.MARKED_BY_PERSON: _("marked %(status)s by %(by)s: %(note)s"),
    CallVerdict.RESENT_UNDER_KEY: _(
        "%(lookup)s; so reconciliation sent it again under its key, which the downstream system "
        "deduplicates: it answered with the call's one effect"
    ),
    CallVerdict.RESEND_REFUSED: _(
        "%(lookup)s; sent again under its key, the downstream system refused it (%(error_class)s: "
        "%(message)s), so it was not done"
    ),
    CallVerdict.KEY_REFUSED: _(
        "%(lookup)s; sent again under its key, the downstream system refused the key "
        "(%(error_class)s: %(message)s), so whether the call acted is unknown"
    ),
    CallVerdict.RESEND_FAILED: _(
        "%(lookup)s; sending it again under its key failed too (%(error_class)s: %(message)s)"
    ),
}
# A NO_LOOKUP verdict on a call whose tool answered with an error and may have acted.
NO_LOOKUP_AFTER_ERROR = _(
    "the tool answered with an error (%(tool_said)s) and may have acted; no lookup can ask the "
    "downstream system about it (%(error)s)"
)
UNSTATED_TIME = _("an unstated time")
VERDICT_AND_TOOL_SAID = "%(verdict)s: %(said)s"

# Why a run went to a person (Run.outcome_why): why a machine could not finish it.
RUN_WHY_WORDS: dict[str, Template] = {
    RunWhy.CALLS_UNKNOWN: _("nobody could find out what these calls did: %(calls)s"),
    RunWhy.PLAN_TOO_LONG: _(
        "the plan has %(steps)s steps, more than reconciliation carries out unattended (%(limit)s): a person decides"
    ),
    RunWhy.NO_POLICY: _(
        "no recovery policy covers task type %(task_type)s, and the deployment declares no default "
        "(SEAM_DEFAULT_RECOVERY_POLICY), so no machine may decide whether to resume it"
    ),
    RunWhy.POLICY_ALWAYS_COMPENSATES: _(
        "the recovery policy (v%(policy_version)s) says: undo what was done and hand the run to a person"
    ),
    RunWhy.TOO_OLD_TO_RESUME: _("the run is older than its policy resumes (%(max_age)s)"),
    # The flow's phase names ("act", "notify") are the integrator's code words: the steps say it.
    RunWhy.ENTERED_PHASE: _(
        "the run had already done %(tools)s, past the point where its policy resumes on its own: a person decides"
    ),
    RunWhy.DEADLINE_PASSED: _("its deadline, %(deadline)s, passed"),
    RunWhy.VERSIONS_UNDECLARED: _(
        "the deployment declares no running versions, so the versions this run was recorded "
        "under cannot be compared with the running code"
    ),
    RunWhy.NO_FLOW: _("the running code has no flow for task type %(task_type)s"),
    RunWhy.VERSION_CHANGED: _(
        "the %(field)s version changed: %(recorded)s was recorded, the running code has %(running)s"
    ),
    RunWhy.UPGRADE_INTERRUPTED: _("the run stopped running while its plan was being upgraded"),
    RunWhy.STEP_FAILED: _("%(tool)s failed (%(error_class)s): %(message)s"),
    RunWhy.RESUME_FAILED: _("resuming %(tool)s failed (%(error_class)s): %(message)s"),
    RunWhy.RESUME_IMPOSSIBLE: _("%(tool)s cannot be sent again: %(error)s"),
    RunWhy.UNDO_FAILED: _("undoing %(tool)s failed (%(error_class)s): %(error)s"),
    RunWhy.FANOUT_INCOMPLETE: _(
        "fan-out %(name)s: %(outcome)s, coverage %(coverage)s; missing: %(missing)s; %(rule)s: %(summary)s"
    ),
    RunWhy.LOOPING: _(
        "looping on a permanent error: %(refusals)s calls refused in %(minutes)s minutes (%(calls)s)"
    ),
    RunWhy.BUG_ANSWER: _("%(tool)s answered with something it does not expect (a bug): %(message)s"),
    RunWhy.RESOLVED_BY_PERSON: _("resolved by %(by)s: %(note)s"),
}
# Each reason by a short name, for a chart's rows and a filter.
RUN_WHY_LABELS: dict[str, Template] = {
    RunWhy.CALLS_UNKNOWN: _("calls nobody could settle"),
    RunWhy.PLAN_TOO_LONG: _("plan too long to resume unattended"),
    RunWhy.NO_POLICY: _("no recovery policy"),
    RunWhy.POLICY_ALWAYS_COMPENSATES: _("the policy always hands over"),
    RunWhy.TOO_OLD_TO_RESUME: _("too old to resume"),
    RunWhy.ENTERED_PHASE: _("past the phase the policy resumes"),
    RunWhy.DEADLINE_PASSED: _("deadline passed"),
    RunWhy.VERSIONS_UNDECLARED: _("no running versions declared"),
    RunWhy.NO_FLOW: _("no flow in the running code"),
    RunWhy.VERSION_CHANGED: _("versions changed"),
    RunWhy.UPGRADE_INTERRUPTED: _("upgrade interrupted"),
    RunWhy.STEP_FAILED: _("a step failed"),
    RunWhy.RESUME_FAILED: _("resuming failed"),
    RunWhy.RESUME_IMPOSSIBLE: _("a step cannot be sent again"),
    RunWhy.UNDO_FAILED: _("an undo failed"),
    RunWhy.FANOUT_INCOMPLETE: _("a fan-out without what it needs"),
    RunWhy.LOOPING: _("looping on a permanent error"),
    RunWhy.BUG_ANSWER: _("a tool answered with a bug"),
    RunWhy.RESOLVED_BY_PERSON: _("resolved by a person"),
}
NOT_RECORDED = _("not recorded")
CALL_IN_DOUBT = "%(tool)s (%(why)s)"
LOOPED_CALL = _("%(tool)s failed %(attempts)s times (%(error_class)s)")
BRANCH_MISSING = "%(branch)s (%(why)s)"
# What undoing the run's writes first came to (a Why's `undo`), each part when it has tools.
UNDO_PART_WORDS: dict[str, Template] = {
    "undone": _("undone: %(tools)s"),
    "partial": _("partly undone: %(tools)s"),
    "not_undone": _("could not undo: %(tools)s"),
    "failed": _("the undo failed and is with a person: %(tools)s"),
    "pending": _("the undo is in doubt: %(tools)s"),
}
NOTHING_UNDONE = _("nothing was undone")
WHY_THEN_UNDO = "%(why)s; %(undo)s"

# What becomes of a cancelled run's call in doubt (journal.why.CleanupCode).
CLEANUP_WORDS: dict[str, Template] = {
    CleanupCode.PERSON_DECIDES: _("settle %(step)s: its outcome is unknown; a person decides"),
    CleanupCode.RECONCILE_WHEN_QUIET: _(
        "reconcile %(step)s: once the call has been quiet for %(quiet_seconds)s s, "
        "reconciliation asks the downstream about it by its key; if it cannot say, the run goes to a person"
    ),
}
# A compensation with no note of why nothing undoes its tool, or of what a partial undo left.
NOTHING_UNDOES = _("nothing undoes %(tool)s")


def run_why_label(code: str) -> str:
    """A reason by its short name; "not recorded" for a run handed over before reasons were typed."""
    label = RUN_WHY_LABELS.get(code)
    return str(label if label is not None else NOT_RECORDED)


def verdict_words(verdict: Mapping[str, Any]) -> str:
    """What settled a call, from its Intent.verdict; "" for a row with none."""
    code = verdict.get("code", "")
    facts = dict(verdict)
    if code == CallVerdict.NO_LOOKUP and facts.get("ambiguous"):
        return say(
            NO_LOOKUP_AFTER_ERROR, tool_said=facts.get("tool_said") or str(NO_TEXT), error=facts["error"]
        )
    if code == CallVerdict.FOUND_ALREADY_SO:
        facts["at"] = _when_iso(facts.get("at", "")) or str(UNSTATED_TIME)
        facts["detail"] = f": {facts['detail']}" if facts.get("detail") else ""
    if "lookup" in facts:  # a resend's verdict carries the lookup's, which says why it was resent
        facts["lookup"] = verdict_words(facts["lookup"])
    if code == CallVerdict.ANSWER_PREDATES_INTENT:
        facts["at"], facts["intended_at"] = _when_iso(facts["at"]), _when_iso(facts["intended_at"])
    template = VERDICT_WORDS.get(code)
    return say(template, **facts) if template is not None else ""


def call_verdict_words(intent: Any) -> str:
    """Why a call is uncertain or how it was settled: its verdict's words, with what the tool
    said where it said something; else the words a row settled before verdicts existed keeps
    (unknown_reason, then outcome_summary)."""
    if intent.verdict:
        verdict = verdict_words(intent.verdict)
        said = intent.outcome_summary.strip()
        return say(VERDICT_AND_TOOL_SAID, verdict=verdict, said=said) if said else verdict
    return str(intent.unknown_reason or intent.outcome_summary)


def run_why_words(why: Mapping[str, Any], detail: str = "") -> str:
    """Why a machine could not finish the run, from its outcome_why (with what undoing first came
    to, when it did); `detail` (Run.outcome_detail: a run ended before the codes, or the agent's
    own words when it cancelled) when there is no code."""
    template = RUN_WHY_WORDS.get(why.get("code", ""))
    if template is None:
        return detail
    text = say(template, **_run_why_facts(why))
    undo = why.get("undo")
    return say(WHY_THEN_UNDO, why=text, undo=undo_facts_words(undo)) if undo else text


def _run_why_facts(why: Mapping[str, Any]) -> dict[str, Any]:
    """The facts as the words show them: lists joined, times in the active zone."""
    facts = dict(why)
    code = facts.get("code")
    if code == RunWhy.CALLS_UNKNOWN:
        facts["calls"] = "; ".join(
            say(
                CALL_IN_DOUBT,
                tool=tool_words(call["tool"]),
                why=verdict_words(call.get("verdict") or {}) or call.get("reason", ""),
            )
            for call in facts.get("calls", [])
        )
    elif code == RunWhy.LOOPING:
        facts["calls"] = "; ".join(
            say(LOOPED_CALL, tool=tool_words(c["tool"]), error_class=c["error_class"], attempts=c["attempts"])
            for c in facts.get("calls", [])
        )
    elif code == RunWhy.ENTERED_PHASE:
        facts["tools"] = tools_words(facts.get("tools", []))
    elif code == RunWhy.DEADLINE_PASSED:
        facts["deadline"] = _when_iso(facts["deadline"])
    elif code == RunWhy.TOO_OLD_TO_RESUME:
        facts["max_age"] = timedelta(seconds=facts["max_age_seconds"])
    elif code == RunWhy.FANOUT_INCOMPLETE:
        missing = [say(BRANCH_MISSING, branch=m["branch"], why=m["why"]) for m in facts.get("missing", [])]
        facts["missing"] = "; ".join(missing) or str(NOTHING)
    if "tool" in facts:
        facts["tool"] = tool_words(facts["tool"])
    return facts


def undo_facts_words(undo: Mapping[str, Any]) -> str:
    """What undoing a run's writes came to (RunCompensation.facts), part by part."""
    parts = []
    for part, template in UNDO_PART_WORDS.items():
        items = undo.get(part) or []
        named = [_undo_item_words(item) for item in items]
        if named:
            parts.append(say(template, tools="; ".join(named)))
    return "; ".join(parts) if parts else str(NOTHING_UNDONE)


def _undo_item_words(item: Any) -> str:
    if isinstance(item, str):
        return tool_words(item)
    said = item.get("loss") or item.get("why") or ""
    return (
        say(STEP_WITH_DETAIL, tool=tool_words(item["tool"]), detail=said)
        if said
        else tool_words(item["tool"])
    )


def cleanup_words(cleanup: Mapping[str, Any]) -> str:
    """What becomes of a cancelled run's call in doubt (Cancelled.cleanup_scheduled)."""
    facts = dict(cleanup)
    facts["tool"] = tool_words(facts["tool"])
    facts["step"] = step_words(facts["step_id"])
    return say(CLEANUP_WORDS[facts["code"]], **facts)


def not_undone_words(*, status: str, not_undone: str, tool: str) -> str:
    """What an undo left standing, or why nothing undoes the step: the catalogue's or the tool's
    words when they gave some, else ours."""
    if not_undone:
        return not_undone
    if status == CompensationStatus.NOT_POSSIBLE:
        return say(NOTHING_UNDOES, tool=tool_words(tool))
    if status == CompensationStatus.PARTIAL:
        return str(NOT_EVERYTHING)
    return ""


def _when_iso(text: str) -> str:
    """An ISO 8601 time from a Why's facts as the run page says times; "" for none."""
    if not text:
        return ""
    return when_words(datetime.fromisoformat(text))
