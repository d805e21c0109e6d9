"""The console's words: the sentences the handover (its lists, its next action, whether its
reason still holds), the run's timeline, the staff actions' confirmations and the audit table say
are chosen here, from the codes their rules return (handover.codes, the domain's enums and value
objects). The domain (journal, reconciliation, compensations) answers in codes, and
tests/handover/test_words.py holds it to that and checks that every code has its words here.
(The templates' own labels, and the messages of a refused action, stay beside their page.)

Each sentence is a template wrapped in Django's gettext_lazy, with named placeholders
(`%(tool)s`) so a translation may reorder them; `say(template, **facts)` fills one in, in the
language active when it is said. Tools are named by their declared labels (ToolSpec.label), in
quotes inside a sentence (`issue_credit` as “Issue a credit”), never by their registered names;
times with their zone (when_words).

Besides sentences, plain words for what the rows store in the engine's terms: error text without
protocol codes or keys, a step id as the step it names, a process as what it does. The pages use
those through console.templatetags.seam_words.

The domain's reasons (journal.why: what settled a call, why a run went to a person, what becomes
of a cancelled run's calls) are said in handover.why_words, with this module's helpers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from compensations.reversibility import ReversibilityKind, ReversibilityNow
from compensations.tasks import EXECUTOR
from journal.attempts import AttemptCode
from journal.models import ErrorClass, RunStatus
from reconciliation.tasks import SWEEP_ACTOR
from tools.registry import tool_title

from .codes import NextActionAdvice, NextActionCode, NotDoneWhy, ReasonAnswer, TimelineSays

type Template = str | Promise


QUOTED = _("“%(text)s”")


def say(template: Template, **facts: Any) -> str:
    """The template in the active language, its `%(name)s` placeholders filled from `facts`."""
    return str(template) % facts if facts else str(template)


def tool_label(tool: str) -> str:
    """A tool as a button or a list names it: its declared label, "Issue a credit", or its name
    made readable, "Issue credit" (tools.registry.ToolSpec.title)."""
    return tool_title(tool)


def tool_words(tool: str) -> str:
    """A tool as a sentence names it: its label in quotes, “Issue a credit”."""
    return say(QUOTED, text=tool_title(tool))


def tools_words(tools: list[str] | tuple[str, ...]) -> str:
    return ", ".join(tool_words(t) for t in tools)


def when_words(at: datetime) -> str:
    """A moment as the run page's prose says it: 2026-11-29 18:00 GMT."""
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M %Z")


# --- who ----------------------------------------------------------------------------------------

# The processes that act on runs, as people call them.
PROCESS_WORDS: dict[str, Template] = {
    EXECUTOR.name: _("the undo worker"),
    SWEEP_ACTOR: _("reconciliation"),
    "manage.py reconcile": _("reconciliation"),
}
THE_AGENT = _("the agent")
# A process of Seam's that PROCESS_WORDS does not name.
SEAM = _("Seam")
A_RETRY = _("a retry")  # who resolved a failed undo's dead letter, when no person did


def who(name: str) -> str:
    """A process's name as what it does; a person's or an agent's as it is."""
    words = PROCESS_WORDS.get(name)
    return str(words) if words is not None else name


def actor_words(kind: str, name: str) -> str:
    """Who acted, as the timeline says it: a person by name, the agent, a process of Seam's as
    what it does (who)."""
    if kind == "user":
        return name
    if kind == "agent":
        return str(THE_AGENT)
    words = PROCESS_WORDS.get(name)
    return str(words if words is not None else SEAM)


# --- error classes and stored text -------------------------------------------------------------

# An error class as a short label (beside a status, in a dead letter's "why it failed").
ERROR_CLASS_WORDS: dict[str, Template] = {
    ErrorClass.CONFLICT: _("refused"),
    ErrorClass.PERMANENT: _("refused for good"),
    ErrorClass.INVALID_INPUT: _("refused as bad input"),
    ErrorClass.TRANSIENT: _("a passing fault"),
    ErrorClass.AMBIGUOUS: _("no answer"),
    ErrorClass.BUG: _("a fault in Seam"),
}
# An error class as the reason a call failed, when the tool gave no summary of its own.
ERROR_CLASS_REASONS: dict[str, Template] = {
    ErrorClass.INVALID_INPUT: _("the downstream system refused the arguments"),
    ErrorClass.CONFLICT: _("it conflicts with what the downstream system holds"),
    ErrorClass.TRANSIENT: _("a temporary error; it may work if tried again"),
    ErrorClass.AMBIGUOUS: _("no answer after sending, so it may or may not have happened"),
    ErrorClass.PERMANENT: _("the downstream system refused it for good"),
    ErrorClass.BUG: _("the answer was not what the tool expects"),
}
NO_REASON_GIVEN = _("no reason was given")


def error_class_words(error_class: str) -> str:
    """An error class (conflict, transient, …) as a short label; an unknown one as it is."""
    words = ERROR_CLASS_WORDS.get(error_class)
    return str(words) if words is not None else error_class


_HTTP = re.compile(r"\bHTTP \d{3}:\s*")
_KEY_IN_PARENS = re.compile(r"\s*\(key [0-9a-f]{16,}\)")
_LONG_HEX = re.compile(r"\b[0-9a-f]{32,}\b")
_CLASS_IN_PARENS = re.compile(r"\((" + "|".join(ERROR_CLASS_WORDS) + r")\)")
STEP_ID_PATTERN = re.compile(r"^[0-9a-f-]{36}:(\d+):([a-z0-9_]+)$")


def plain_text(text: str) -> str:
    """Stored error or outcome text without HTTP status codes or idempotency keys."""
    text = _HTTP.sub("", text or "")
    text = _KEY_IN_PARENS.sub("", text)
    text = _LONG_HEX.sub(lambda m: m[0][:8] + "…", text)
    return _CLASS_IN_PARENS.sub(lambda m: f"({error_class_words(m[1])})", text)


STEP = _("step %(number)s, %(tool)s")


def step_words(step_id: str) -> str:
    """`<run id>:3:issue_credit` as "step 3, issue credit"."""
    match = STEP_ID_PATTERN.match(step_id or "")
    if match is None:
        return step_id or ""
    return say(STEP, number=match[1], tool=tool_words(match[2]))


# --- reversibility (compensations.reversibility) -----------------------------------------------

REVERSIBILITY_WORDS: dict[str, Template] = {
    ReversibilityKind.YES: _("yes"),
    ReversibilityKind.NONE: _("no"),
    ReversibilityKind.PARTIAL: _("partially: %(loss)s is lost"),
    ReversibilityKind.UNTIL: "%(condition)s",  # the catalogue's own words: "until collection"
}
PARTIAL_PAST_DEADLINE = _("partially: past its deadline, %(loss)s is lost")
NOT_EVERYTHING = _("not everything")
UNTIL_DEADLINE = _("until %(deadline)s")
UNTIL_DEADLINE_THEN_LOST = _("until %(deadline)s; after that %(loss)s is lost")


def reversibility_sentence(reversible: ReversibilityNow) -> str:
    """How far a step can still be taken back, as the run page and the confirmations say it.
    `condition` and `loss` are the catalogue entry's own words."""
    if reversible.kind == ReversibilityKind.PARTIAL:
        if reversible.deadline is not None:
            return say(PARTIAL_PAST_DEADLINE, loss=reversible.loss)
        return say(REVERSIBILITY_WORDS[reversible.kind], loss=reversible.loss or str(NOT_EVERYTHING))
    if reversible.kind == ReversibilityKind.UNTIL and reversible.deadline is not None:
        deadline = when_words(reversible.deadline)
        if reversible.loss:
            return say(UNTIL_DEADLINE_THEN_LOST, deadline=deadline, loss=reversible.loss)
        return say(UNTIL_DEADLINE, deadline=deadline)
    return say(REVERSIBILITY_WORDS[reversible.kind], condition=reversible.condition)


# --- the handover's lists ----------------------------------------------------------------------

HIGH_VALUE = _("high value: %(amount)s %(currency)s")
IRREVERSIBLE = _("irreversible: nothing undoes %(tool)s")
NOT_DONE_WORDS: dict[str, Template] = {
    NotDoneWhy.NEVER_ATTEMPTED: _("never attempted"),
    NotDoneWhy.NOT_PERFORMED: _("not performed: the downstream has no record of it"),
    NotDoneWhy.FAILED: _("failed (%(error_class)s): %(summary)s"),
}
UNKNOWN_CLASS = _("unknown class")
TOOL_ERROR = _("the tool answered with an error: %(text)s; whether it acted is unknown")
NO_TEXT = _("no text")
STILL_ASKING = _("reconciliation is still asking the downstream")
TOOL_ERROR_STILL_ASKING = _("%(told)s; %(asking)s")
NOT_HAPPENED = _("%(tool)s did not happen (%(status)s)")
UNDONE_BY = _("%(tool)s was undone by %(undo_tool)s")
PARTLY_UNDONE_BY = _("%(tool)s was partly undone by %(undo_tool)s")
UNDONE = _("%(tool)s was undone")
PARTLY_UNDONE = _("%(tool)s was partly undone")
STILL_STANDS = _("%(why)s (%(not_undone)s still stands)")
SETTLED_BY_HAND = _("%(who)s: %(note)s")


def high_value_words(amount: Any, currency: str) -> str:
    return say(HIGH_VALUE, amount=amount, currency=currency).strip()


def not_done_words(why: NotDoneWhy, *, error_class: str = "", summary: str = "") -> str:
    return say(NOT_DONE_WORDS[why], error_class=error_class or str(UNKNOWN_CLASS), summary=summary)


def tool_error_words(summary: str) -> str:
    """What the agent reported of a call whose tool answered with an error that may not mean
    nothing happened (ok=false, error_class=ambiguous)."""
    return say(TOOL_ERROR, text=summary.strip() or str(NO_TEXT))


def still_asking_words(told: str) -> str:
    """Why an open call is uncertain: reconciliation is asking, after what the tool said."""
    return say(TOOL_ERROR_STILL_ASKING, told=told, asking=str(STILL_ASKING)) if told else str(STILL_ASKING)


def contradiction_words(*, tool: str, status: str, partly: bool, undo_tool: str, not_undone: str) -> str:
    """Why a message the customer received is no longer true: its step did not happen
    (`status`), or was undone (partly) by `undo_tool`."""
    if status:
        return say(NOT_HAPPENED, tool=tool_words(tool), status=status)
    if undo_tool:
        template = PARTLY_UNDONE_BY if partly else UNDONE_BY
        why = say(template, tool=tool_words(tool), undo_tool=tool_words(undo_tool))
    else:
        why = say(PARTLY_UNDONE if partly else UNDONE, tool=tool_words(tool))
    if partly and not_undone:
        why = say(STILL_STANDS, why=why, not_undone=not_undone)
    return why


def settled_by_hand_words(who_resolved: str, note: str) -> str:
    """Who resolved a failed undo's dead letter, and their note."""
    name = who_resolved or str(A_RETRY)
    return say(SETTLED_BY_HAND, who=name, note=note) if note else name


# --- whether the run's reason still holds ------------------------------------------------------

REASON_ANSWER_WORDS: dict[str, Template] = {
    ReasonAnswer.RESOLVED: _("resolved by %(who)s at %(at)s"),
    ReasonAnswer.NOBODY_WAITS: _("nobody waits on this run now: it is %(status)s"),
    ReasonAnswer.SETTLED: "%(settled)s",  # each step's words (SETTLED_STEP), joined
    ReasonAnswer.NOTHING_UNCERTAIN: _("nothing is uncertain any more"),
    ReasonAnswer.UNDO_SETTLED: "%(settled)s",  # each undo's words (UNDO_SETTLED_*), joined
    ReasonAnswer.NO_UNDO_FAILING: _("no undo of this run is failing any more"),
}
RESOLVED_WITH_NOTE = _("resolved by %(who)s at %(at)s: %(note)s")
MARKED_AT = _("%(tool)s marked %(status)s by %(who)s at %(at)s")
FOUND_AT = _("%(tool)s found %(status)s by %(who)s at %(at)s")
WITH_NOTE = "%(words)s (%(note)s)"
UNDO_RESOLVED_BY = _("%(tool)s: dead letter resolved by %(who)s")
UNDO_WENT_THROUGH = _("%(tool)s: the undo went through on a retry")


def resolved_words(*, who_resolved: str, at: datetime, note: str) -> str:
    template = RESOLVED_WITH_NOTE if note else REASON_ANSWER_WORDS[ReasonAnswer.RESOLVED]
    return say(template, who=who_resolved, at=when_words(at), note=note)


def settled_step_words(
    *, tool: str, judged: bool, status: str, who_settled: str, at: datetime, note: str
) -> str:
    """How an uncertain step was settled: marked by a person, or found by a lookup."""
    words = say(
        MARKED_AT if judged else FOUND_AT,
        tool=tool_words(tool),
        status=status,
        who=who_settled,
        at=when_words(at),
    )
    return say(WITH_NOTE, words=words, note=note) if note else words


def undo_settled_words(*, tool: str, by_hand: str) -> str:
    if by_hand:
        return say(UNDO_RESOLVED_BY, tool=tool_words(tool), who=by_hand)
    return say(UNDO_WENT_THROUGH, tool=tool_words(tool))


def reason_answered_words(answer: ReasonAnswer, parts: list[str] | None = None, **facts: Any) -> str:
    """What answered the run's reason: the parts (each step's words) joined, or the code's words."""
    if answer in (ReasonAnswer.SETTLED, ReasonAnswer.UNDO_SETTLED):
        return say(REASON_ANSWER_WORDS[answer], settled="; ".join(parts or []))
    return say(REASON_ANSWER_WORDS[answer], **facts)


# --- the next action ---------------------------------------------------------------------------

# How a run that ended with nobody waiting on it ended, in the next-action box's words.
CLOSED_SAYS: dict[str, Template] = {
    RunStatus.COMPLETED: _("the run completed"),
    RunStatus.CANCELLED: _("the run was cancelled"),
    RunStatus.ESCALATED: _("its escalation was resolved"),
    RunStatus.COMPENSATED: _("the run was compensated and its escalation resolved"),
}
RUN_IS = _("the run is %(status)s")

NEXT_ACTION_WORDS: dict[str, Template] = {
    NextActionCode.SETTLE_UNCERTAIN: _(
        "find out whether %(tool)s happened before anything else: ask the downstream again "
        "(retry the lookup), or mark it performed or not performed with a note"
    ),
    NextActionCode.FINISH_FAILED_UNDO: _(
        "undoing %(tool)s failed: take its dead letter and finish it by hand"
    ),
    NextActionCode.WAIT_FOR_UNDO: _("wait: undoing %(tools)s is in progress"),
    NextActionCode.NOTHING_WAITING: _("nothing waits on a person: %(ended)s"),
    NextActionCode.TELL_CUSTOMER_SETTLED: _(
        "%(settled)s: tell the customer what was and was not carried out, then resolve"
    ),
    NextActionCode.TELL_CUSTOMER_UNDONE: _(
        "everything the run did was undone: tell the customer the request was not carried out, then resolve"
    ),
    NextActionCode.FINISH_BY_HAND: _("%(undone)s was undone, so resuming is not possible"),
    NextActionCode.WAIT_FOR_AGENT: _("the agent is still working this run: wait"),
    NextActionCode.RESUME: _("resume the run to %(todo)s"),
    NextActionCode.CHECK_AND_RESOLVE: _(
        "everything planned was done: check what the customer was told, then resolve"
    ),
    NextActionCode.RESUME_OR_RESOLVE: _(
        "nothing was changed downstream: resume the run, or resolve it with a note"
    ),
}
# The clauses the next action's sentences add, each starting with its own punctuation.
UNDONE_SINCE = _("; undone since: %(tools)s")
STILL_UNDOABLE_IF_ASKED = _("; a step it did can still be undone below if the customer asks")
FAILED_UNDO_RESOLVED_BY = _("%(tool)s's failed undo was resolved by %(who)s")
UNDONE_AND = _("%(undone)s was undone and %(settled)s")
ONLY_PARTLY_UNDONE = _("%(tool)s was only partly undone (%(not_undone)s)")
CANNOT_BE_UNDONE = _("%(tools)s cannot be undone")
WHAT_REMAINS = _("; what remains: %(remains)s")
FINISH_BY_HAND = _(": finish by hand")
OR_UNDO_WHAT_STANDS = _(", or undo what still stands (%(tools)s)")
STEP_WITH_DETAIL = "%(tool)s (%(detail)s)"
UNDO_TO_UNDO = _("%(undo_tool)s to undo %(tool)s")
OR_UNDO_INSTEAD = _(", or %(undos)s if the customer would rather not go ahead")


def _ended(advice: NextActionAdvice) -> str:
    closed = CLOSED_SAYS.get(advice.run_status)
    ended = str(closed) if closed is not None else say(RUN_IS, status=advice.run_status)
    text = say(NEXT_ACTION_WORDS[advice.code], ended=ended)
    if advice.undone:
        text += say(UNDONE_SINCE, tools=tools_words(advice.undone))
    if advice.can_still_undo:
        text += str(STILL_UNDOABLE_IF_ASKED)
    return text


def _settled_by_hand(advice: NextActionAdvice) -> str:
    settled = "; ".join(
        say(FAILED_UNDO_RESOLVED_BY, tool=tool_words(tool), who=by) for tool, by in advice.settled_by_hand
    )
    if advice.undone:
        settled = say(UNDONE_AND, undone=tools_words(advice.undone), settled=settled)
    return say(NEXT_ACTION_WORDS[advice.code], settled=settled)


def _finish_by_hand(advice: NextActionAdvice) -> str:
    text = say(NEXT_ACTION_WORDS[advice.code], undone=tools_words(advice.undone))
    remains = [say(ONLY_PARTLY_UNDONE, tool=tool_words(t), not_undone=lost) for t, lost in advice.partly]
    if advice.irreversible:
        remains.append(say(CANNOT_BE_UNDONE, tools=tools_words(advice.irreversible)))
    if remains:
        text += say(WHAT_REMAINS, remains="; ".join(remains))
    text += str(FINISH_BY_HAND)
    if advice.undoable:
        text += say(OR_UNDO_WHAT_STANDS, tools=tools_words(advice.undoable))
    return text


def _resume(advice: NextActionAdvice) -> str:
    todo = ", ".join(
        say(STEP_WITH_DETAIL, tool=tool_words(tool), detail=detail) if detail else tool_words(tool)
        for tool, detail in advice.todo
    )
    text = say(NEXT_ACTION_WORDS[advice.code], todo=todo)
    undos = "; ".join(
        say(UNDO_TO_UNDO, undo_tool=tool_words(o.undo_tool), tool=tool_words(o.tool))
        + (f" ({reversibility_sentence(o.reversibility)})" if o.reversibility.conditional else "")
        for o in advice.offers
    )
    if undos:
        text += say(OR_UNDO_INSTEAD, undos=undos)
    return text


def _per_tool(advice: NextActionAdvice) -> str:
    return "; ".join(say(NEXT_ACTION_WORDS[advice.code], tool=tool_words(t)) for t in advice.tools)


def _of_tools(advice: NextActionAdvice) -> str:
    return say(NEXT_ACTION_WORDS[advice.code], tools=tools_words(advice.tools))


def _plain(advice: NextActionAdvice) -> str:
    return say(NEXT_ACTION_WORDS[advice.code])


# How each code's sentence is put together from its facts.
NEXT_ACTION_SAYERS: Mapping[str, Callable[[NextActionAdvice], str]] = {
    NextActionCode.SETTLE_UNCERTAIN: _per_tool,  # the first uncertain step only
    NextActionCode.FINISH_FAILED_UNDO: _per_tool,
    NextActionCode.WAIT_FOR_UNDO: _of_tools,
    NextActionCode.NOTHING_WAITING: _ended,
    NextActionCode.TELL_CUSTOMER_SETTLED: _settled_by_hand,
    NextActionCode.TELL_CUSTOMER_UNDONE: _plain,
    NextActionCode.FINISH_BY_HAND: _finish_by_hand,
    NextActionCode.WAIT_FOR_AGENT: _plain,
    NextActionCode.RESUME: _resume,
    NextActionCode.CHECK_AND_RESOLVE: _plain,
    NextActionCode.RESUME_OR_RESOLVE: _plain,
}


def next_action_text(advice: NextActionAdvice) -> str:
    """The next action's sentence, for people."""
    return NEXT_ACTION_SAYERS[advice.code](advice)


# --- the timeline ------------------------------------------------------------------------------


class EventFacts(Protocol):
    """What the timeline's words read of an event (console.timeline.Said)."""

    @property
    def says(self) -> TimelineSays: ...

    @property
    def call(self) -> str: ...

    @property
    def how(self) -> str: ...

    @property
    def who_marked(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def label(self) -> str: ...


TIMELINE_WORDS: dict[str, Template] = {
    TimelineSays.ABOUT_TO_SEND: _("%(call)s: about to be sent"),
    TimelineSays.DONE: _("%(call)s done%(how)s"),
    TimelineSays.FAILED: _("%(call)s failed%(how)s: %(detail)s"),
    TimelineSays.DID_NOT_HAPPEN: _("%(call)s did not happen%(how)s"),
    TimelineSays.ALREADY_SO: _("%(call)s was already so before the run%(how)s"),
    TimelineSays.UNKNOWN: _("%(call)s: whether it happened is unknown%(how)s"),
    TimelineSays.SETTLED_OTHERWISE: "%(call)s: %(detail)s%(how)s",
    TimelineSays.TOOL_ERROR_AMBIGUOUS: _(
        "%(call)s: the tool answered with an error, whether it acted is unknown"
    ),
    TimelineSays.SENT_NO_ANSWER: _("%(call)s: sent, no answer"),
    TimelineSays.LOOKUP_FAILED: _("%(call)s: asking the downstream system failed"),
    TimelineSays.ESCALATED: _("Run escalated to a person"),
    TimelineSays.RUN_ENDED: "%(label)s",  # the event kind's label
    TimelineSays.OTHER: "%(label)s",  # the event kind's label, with the call when there is one
}
UNDO_CALL = _("the undo of %(tool)s")
ASKED = _(" (the downstream system, asked)")
MARKED_BY = _(" (marked by %(who)s)")
SETTLED = _("settled")
# How an event's detail (a reason, the tool's message, an error) follows its words.
DETAIL_AFTER_COLON = {TimelineSays.UNKNOWN, TimelineSays.LOOKUP_FAILED, TimelineSays.ESCALATED}
DETAIL_IN_PARENS = {TimelineSays.TOOL_ERROR_AMBIGUOUS, TimelineSays.SENT_NO_ANSWER}


def call_words(tool: str, *, undo: bool) -> str:
    """A call as the timeline names it: its tool's label, or the undo of the step it undoes."""
    return say(UNDO_CALL, tool=tool_words(tool)) if undo else tool_words(tool)


# The same call failing the same way several times in a row, said once (console.timeline).
TRIED_TIMES = _("%(call)s tried %(count)s times: %(detail)s")


def tried_text(*, call: str, count: int, detail: str) -> str:
    """Repeated failed attempts of one call, as one entry of the timeline."""
    return say(TRIED_TIMES, call=call, count=count, detail=detail)


def timeline_text(said: EventFacts) -> str:
    """One event of the timeline as the page says it."""
    if said.how == "asked":
        how = str(ASKED)
    elif said.how == "marked":
        how = say(MARKED_BY, who=said.who_marked)
    else:
        how = ""
    if said.says == TimelineSays.OTHER:
        return f"{said.label}: {said.call}" if said.call else said.label
    detail = said.detail
    if said.says == TimelineSays.SETTLED_OTHERWISE:
        detail = detail or str(SETTLED)
    text = say(TIMELINE_WORDS[said.says], call=said.call, how=how, detail=detail, label=said.label)
    if said.detail and said.says in DETAIL_AFTER_COLON:
        text += f": {said.detail}"
    elif said.detail and said.says in DETAIL_IN_PARENS:
        text += f" ({said.detail})"
    return text


# --- the confirmations (console.confirmations) -----------------------------------------------

CONFIRM = _("Confirm")
NOTHING_UNDOES = _("nothing undoes %(tool)s: %(notes)s")
PUT_RIGHT_BY_HAND = _("a person must put it right by hand")
IRREVERSIBLE_STEP = _("irreversible: %(tool)s")
UNDO_CANNOT_BE_BUILT = _("%(undo_tool)s cannot be built: %(error)s")
SEND_TO_UNDO = _("send %(undo_tool)s to undo %(tool)s")
REVERSIBLE_WHEN = _(" (reversible %(reversibility)s)")
NO_STEP = _("no step %(step)s")
# The raw facts behind a sentence, for its "Details" disclosure.
ARGUMENTS_ARE = _("arguments: %(args)s")
KEY_IS = _("idempotency key: %(key)s")
STEP_ID_IS = _("step id: %(step_id)s")
STEP_IS = _("%(step)s is %(status)s")
UNDO_BLOCKED = _("the undo cannot be built: %(why)s")
MOVES_MONEY = _("moves money: %(tool)s %(amount)s")
HIGH_VALUE_STEP = _("high value: %(tool)s %(amount)s")
RESUME_STEP = _("%(action)s %(tool)s: %(why)s")
RESUME_STEP_WITH_DETAIL = _("%(action)s %(tool)s (%(detail)s): %(why)s")
RESUME_ACTIONS: dict[str, Template] = {"send": _("send"), "skip": _("skip"), "blocked": _("cannot send")}
NOT_DONE_WARNING = _("not done: %(tool)s")
STILL_UNCERTAIN_WARNING = _("still uncertain: %(tool)s")
NOTHING_LEFT_TO_UNDO = _("nothing this run did is left to undo")
YOUR_JUDGEMENT = _("this is your judgement, recorded with your name and note")
NOT_ASKED_AGAIN = _("reconciliation will not ask about it again")

# Each run action's title, what it does, and its button.
ASSIGN_TO_ME = (_("Assign to me"), _("you become the run's assignee"), _("Assign to me"))
ASSIGN_TO_COLLEAGUE = (
    _("Assign to a colleague"),
    _("the colleague you choose becomes the run's assignee; the audit says you assigned them"),
    _("Assign"),
)
RESUME_RUN = (_("Resume the run"), _("Resume"))
COMPENSATE_RUN = (_("Compensate the whole run, newest step first"), _("Compensate all"))
CUSTOMER_TOLD = (
    _("Record what the customer was told"),
    _("added to the customer-told list every later handover shows"),
    _("Record"),
)
RESOLVE = (_("Resolve"), _("Resolve"))
RESOLVE_CANCELS = _("the run is ended as cancelled and leaves the queue")
RESOLVE_CLOSES = _("the escalation is closed and the run leaves the queue")
COMPENSATE_A_STEP = _("Compensate a step")
COMPENSATE_STEP = (_("Undo %(tool)s"), _("Undo"))
UNDO_STEP_BUTTON = _("Undo %(tool)s")  # the run page's button beside a completed step
RETRY_LOOKUP = _("Retry the lookup")
ASK_AGAIN = (
    _("Ask again whether %(tool)s happened"),
    _("the downstream is asked whether %(tool)s happened; nothing is sent to it"),
    _("Ask again"),
)
SETTLE_A_STEP = _("Settle a step")
ALLOW_A_CALL = _("Allow a call again")
ALLOW_AGAIN = (
    _("Allow %(tool)s again"),
    _("the agent's next %(tool)s with these arguments is admitted once, though it %(failed)s"),
    _("Allow again"),
)
ALLOW_FAILED = {
    AttemptCode.PERMANENT_REPEATED: _("failed for good"),
    AttemptCode.INVALID_REPEATED: _("was refused as invalid"),
}
ALLOW_LOOPING_STAYS = _(
    "the run stays as it is: it was handed over as looping, so resume it once the cause is put right"
)
ALLOW_FIX_FIRST = _("allow it only once what made it fail is put right: otherwise it fails again")
ALLOW_ONLY_FAILED = _("%(step)s is %(status)s; only a failed call is allowed again")
ALLOW_RUN_CLOSED = _("the run is %(status)s; no call of it is sent again")
ALLOW_NOT_REFUSED = _("%(step)s is not refused now: the agent may already send it, or it was allowed since")
MARK = {
    True: (
        _("Mark %(tool)s performed"),
        _("%(step)s is recorded as performed: it counts as done, and can then be compensated"),
        _("Mark performed"),
    ),
    False: (
        _("Mark %(tool)s not performed"),
        _("%(step)s is recorded as not performed: resuming will send it with its key"),
        _("Mark not performed"),
    ),
}


def step_named(tool: str, step_id: str) -> str:
    """A step as a confirmation names it: its number and its tool's label (the id goes in the
    dialog's details, step_details)."""
    return step_words(step_id) if STEP_ID_PATTERN.match(step_id or "") else tool_words(tool)


def args_words(args: Mapping[str, Any]) -> str:
    """A call's arguments, raw, for a disclosure: `label=RL-1, order_id=A-1`."""
    return ", ".join(f"{k}={v}" for k, v in args.items())


def step_details(*, step_id: str = "", key: str = "", args: Mapping[str, Any] | None = None) -> list[str]:
    """The raw facts of a step a dialog keeps behind its "Details" disclosure."""
    facts = [say(STEP_ID_IS, step_id=step_id)] if step_id else []
    if key:
        facts.append(say(KEY_IS, key=key))
    if args:
        facts.append(say(ARGUMENTS_ARE, args=args_words(args)))
    return facts


def no_step_words(step_id: str) -> str:
    return say(NO_STEP, step=repr(step_id))


def resume_step_words(step: Mapping[str, Any]) -> str:
    """One step of a resume's preview: what it does with the step, and why."""
    template = RESUME_STEP_WITH_DETAIL if step["detail"] else RESUME_STEP
    return say(
        template,
        action=say(RESUME_ACTIONS.get(step["action"], step["action"])),
        tool=tool_words(step["tool"]),
        detail=step["detail"],
        why=step["why"],
    )


def undo_call_words(*, undo_tool: str, tool: str, reversible: ReversibilityNow) -> str:
    """The compensating call an undo will send, and how far the step can still be taken back.
    Its arguments are not in the sentence: the dialog shows them under "Details" (step_details)."""
    text = say(SEND_TO_UNDO, undo_tool=tool_words(undo_tool), tool=tool_words(tool))
    if reversible.conditional:
        text += say(REVERSIBLE_WHEN, reversibility=reversibility_sentence(reversible))
    return text


# --- the audit trail's states (console.audit_reading) -----------------------------------------

YES = _("yes")
NO = _("no")
NOTHING = "—"  # an empty or absent value
ITEMS = _("%(count)s items")
SAID_LIMIT = 160  # longer values are cut in the table; the raw states stay one click away


def _list_words(value: list[Any]) -> str:
    """A list in an audited state: a resume's plan step by step, plain items (step ids as steps)
    joined, anything else by its count."""
    if all(isinstance(item, dict) and {"action", "tool"} <= item.keys() for item in value):
        # A resume's plan: what it sends and what it skips, step by step.
        return ", ".join(
            f"{say(RESUME_ACTIONS.get(item['action'], item['action']))} {tool_words(item['tool'])}"
            for item in value
        )
    if all(not isinstance(item, dict | list) for item in value):
        return ", ".join(step_words(item) if isinstance(item, str) else str(item) for item in value)
    return say(ITEMS, count=len(value))


def audit_value_words(value: Any) -> str:
    """One field's value of an audited state as a person reads it: yes or no, a resume's plan
    step by step, a list by its items, a step id as its step, anything else as JSON or text, cut
    at SAID_LIMIT."""
    if value is None or value == "":
        return NOTHING
    if isinstance(value, bool):
        return str(YES if value else NO)
    if isinstance(value, list):
        text = _list_words(value)
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    else:
        text = step_words(value) if isinstance(value, str) else str(value)
    return text if len(text) <= SAID_LIMIT else text[: SAID_LIMIT - 1] + "…"


# A run nobody had, taken by the person who acted on it (console.claiming): the audit row's note,
# and what the page says after the action.
ASSIGNED_ON_ACTING = _("assigned to the person acting on it: nobody had it")
NOW_YOURS = _("The run is now assigned to you, as nobody had it.")


# --- the catalogue editor (console.catalogue_editor) --------------------------------------------

CATALOGUE_MAPPING_NOT_JSON = _("not JSON (%(error)s)")
CATALOGUE_MAPPING_NOT_OBJECT = _('write an object of argument → source, e.g. {"label": "receipt.label"}')
CATALOGUE_MAPPING_BAD_SOURCE = _("%(argument)s: %(why)s")
CATALOGUE_NONE_UNDOES_NOTHING = _("an entry that is not reversible has no undo tool and no argument mapping")
CATALOGUE_UNDO_NEEDED = _("a reversible entry needs the tool that undoes it")
CATALOGUE_WINDOW_NEEDED = _("say until when it can be undone (a condition, or the receipt's deadline field)")
CATALOGUE_LOSS_NEEDED = _("say what a partial undo loses")
CATALOGUE_DEADLINE_NOT_IN_RECEIPT = _("%(field)s is not in the tool's receipt, which carries %(fields)s")
CATALOGUE_CHANGED = _(
    "This entry changed since you opened it: nothing was saved. Reload it to see the change."
)
CATALOGUE_EDITED_IN_CONSOLE = _("edited in the console's catalogue editor")
CATALOGUE_SAVED = _("Saved. Runs of your tenant use this entry from now on.")


# --- a tenant's retention period (console.forms.TenantForm) -----------------------------------

RETENTION_SHORTER_THAN_UNDO = _(
    "retention_days: %(days)s days is too short: a step of %(tool)s can still be undone %(window)s "
    "after it was made, and an archived run can no longer be undone. Keep ended runs at least "
    "%(needed)s days."
)
DURATION_DAYS = ("%(count)s day", "%(count)s days")
DURATION_HOURS = ("%(count)s hour", "%(count)s hours")


def duration_words(length: timedelta) -> str:
    """A length of time in whole days, or in hours when under two days: "2 hours"."""
    if length >= timedelta(days=2):
        count = length.days
        return ngettext(*DURATION_DAYS, count) % {"count": count}
    count = max(1, round(length.total_seconds() / 3600))
    return ngettext(*DURATION_HOURS, count) % {"count": count}
