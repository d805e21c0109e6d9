"""The audit trail's rows as sentences (console.audit_reading): each audited action said from who
acted and the entry's states. Beside handover.words, whose helpers it says them with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from journal.models import RunStatus

from .words import NOTHING, STEP_ID_PATTERN, Template, say, tool_words

# Each audited action as one sentence, from who acted and the entry's states; the field-by-field
# states and the raw JSON stay behind the row's "Details" disclosure. Keys are audit.AuditAction's
# values; an action without a sentence here is said by its label (AUDIT_OTHERWISE).
AUDIT_SENTENCES: dict[str, Template] = {
    "assign": _("%(who)s assigned the run to %(assignee)s"),
    "compensate_step": _("%(who)s asked to undo %(tool)s"),
    "compensate_run": _("%(who)s asked to undo the whole run: compensation requested (%(steps)s)"),
    "resume": _("%(who)s resumed the run%(sending)s"),
    "retry_lookup": _("%(who)s asked the downstream again whether %(tool)s happened"),
    "mark_performed": _("%(who)s marked %(tool)s as performed"),
    "mark_not_performed": _("%(who)s marked %(tool)s as not performed"),
    "customer_told": _("%(who)s recorded what the customer was told (%(channel)s)"),
    "resolve": _("%(who)s resolved the escalation"),
    "dead_letter_take": _("%(who)s took the failed undo of %(tool)s"),
    "dead_letter_assign": _("%(who)s gave the failed undo of %(tool)s to %(owner)s"),
    "dead_letter_retry": _("%(who)s tried the failed undo of %(tool)s again"),
    "dead_letter_resolve": _("%(who)s closed the failed undo of %(tool)s by hand"),
    "login_locked_out": _("%(username)s was locked out after %(failures)s failed sign-ins"),
    "login_unlocked": _("%(who)s let %(username)s sign in again"),
    "audit_verify": _("%(who)s asked for the audit chain to be checked again"),
    "allow_attempt": _("%(who)s allowed %(tool)s to be sent once more"),
    "catalogue_edit": _("%(who)s changed how %(tool)s is undone (its catalogue entry)"),
    "edit_step": _("%(who)s corrected the arguments of %(tool)s before resuming"),
    "runs_archived": _("%(who)s archived %(runs)s ended runs' intents and events in %(file)s"),
    "month_dropped": _("%(who)s dropped the intents and events of %(month)s, every run of it archived"),
}
AUDIT_OTHERWISE = "%(who)s: %(label)s"
TOOK_THE_RUN = _("%(who)s took the run")
RESOLVED_AND_CANCELLED = _("%(who)s resolved the run and ended it as cancelled")
SENDING = _(", sending %(tools)s")
A_STEP = _("a step")
AUDIT_STEPS = ("%(count)s step", "%(count)s steps")


def _audit_tool(step_id: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The tool an audit row is about, as a sentence names it: from its step id, else the tool
    its states name."""
    match = STEP_ID_PATTERN.match(step_id or "")
    if match is not None:
        return tool_words(match[2])
    tool = new.get("tool") or old.get("tool") or new.get("allowed")
    return tool_words(str(tool)) if tool else str(A_STEP)


def _audit_facts(*, who: str, step_id: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """What an audit row's sentence may name, read from its states."""
    requested = new.get("requested")
    count = len(requested) if isinstance(requested, list) else 0
    plan = new.get("steps")
    sent = [
        s["tool"]
        for s in (plan if isinstance(plan, list) else [])
        if isinstance(s, dict) and s.get("action") == "send" and s.get("tool")
    ]
    return {
        "who": who,
        "tool": _audit_tool(step_id, old, new),
        "assignee": new.get("assignee") or str(NOTHING),
        "steps": ngettext(*AUDIT_STEPS, count) % {"count": count},
        "sending": say(SENDING, tools=", ".join(tool_words(t) for t in sent)) if sent else "",
        "channel": new.get("channel") or "",
        "owner": new.get("owner") or str(NOTHING),
        "username": new.get("username") or who,
        "failures": new.get("failures") or "",
        "runs": new.get("runs", ""),
        "file": new.get("file", ""),
        "month": new.get("month", ""),
    }


def audit_sentence(
    *, action: str, label: str, who: str, step_id: str, old: Mapping[str, Any], new: Mapping[str, Any]
) -> str:
    """One audit row as a sentence: "lena-lead marked “Start the return” as performed"."""
    if action == "assign" and new.get("assignee") == who:
        return say(TOOK_THE_RUN, who=who)
    if action == "resolve" and new.get("status") == RunStatus.CANCELLED:
        return say(RESOLVED_AND_CANCELLED, who=who)
    template = AUDIT_SENTENCES.get(action)
    if template is None:
        return say(AUDIT_OTHERWISE, who=who, label=label.lower())
    return say(template, **_audit_facts(who=who, step_id=step_id, old=old, new=new))
