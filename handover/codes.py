"""What the handover decides, as codes with the facts their sentences name: the rules
(handover) choose a code, handover.words says it. Nothing here is a sentence, so a rule
can change without touching the words and the words can be translated without touching a rule."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models

from compensations.reversibility import ReversibilityNow


class NextActionCode(models.TextChoices):
    """What the next-action box asks of a person, for machines (the sentence is for people).
    The labels are the codes' names in the published schema's enum, not what the page says."""

    SETTLE_UNCERTAIN = "settle_uncertain", "Find out whether an uncertain step happened"
    FINISH_FAILED_UNDO = "finish_failed_undo", "Take a failed undo's dead letter"
    WAIT_FOR_UNDO = "wait_for_undo", "Wait: an undo is in progress"
    NOTHING_WAITING = "nothing_waiting", "Nothing waits on a person"
    TELL_CUSTOMER_UNDONE = "tell_customer_undone", "Everything was undone: tell the customer, resolve"
    FINISH_BY_HAND = "finish_by_hand", "A step was undone: finish by hand or undo the rest"
    WAIT_FOR_AGENT = "wait_for_agent", "The agent is still working"
    RESUME = "resume", "Resume the run (or undo what it did)"
    CHECK_AND_RESOLVE = "check_and_resolve", "Everything was done: check, then resolve"
    RESUME_OR_RESOLVE = "resume_or_resolve", "Nothing changed: resume, or resolve with a note"
    TELL_CUSTOMER_SETTLED = (
        "tell_customer_settled",
        "Every step was undone or settled by hand: tell the customer, resolve",
    )


@dataclass(frozen=True)
class UndoOffer:
    """An undo the next action suggests: the compensating tool, the step's tool, and how far the
    step can still be taken back."""

    undo_tool: str
    tool: str
    reversibility: ReversibilityNow


@dataclass(frozen=True)
class NextActionAdvice:
    """The next action as the rules chose it: its code and the facts its sentence names (tools
    by their registered names). handover.words.next_action_text says it."""

    code: NextActionCode
    # SETTLE_UNCERTAIN: the first uncertain step; FINISH_FAILED_UNDO, WAIT_FOR_UNDO: the steps
    # whose undo failed or is under way.
    tools: tuple[str, ...] = ()
    run_status: str = ""  # NOTHING_WAITING: how the run ended
    undone: tuple[str, ...] = ()  # steps undone (wholly or partly)
    can_still_undo: bool = False  # NOTHING_WAITING: a step can still be undone if asked
    settled_by_hand: tuple[tuple[str, str], ...] = ()  # (tool, who resolved its dead letter, and their note)
    partly: tuple[tuple[str, str], ...] = ()  # (tool, what its undo could not take back)
    irreversible: tuple[str, ...] = ()  # standing steps nothing undoes
    undoable: tuple[str, ...] = ()  # standing steps that can still be undone
    todo: tuple[tuple[str, str], ...] = ()  # RESUME: (tool, the plan's detail) of each step not done
    offers: tuple[UndoOffer, ...] = ()  # RESUME: the undos to suggest instead


class ReasonAnswer(models.TextChoices):
    """What answered the run's reason for needing a person, once it no longer holds."""

    RESOLVED = "resolved", "A person resolved the escalation"
    NOBODY_WAITS = "nobody_waits", "The run ended with nobody waiting on it"
    SETTLED = "settled", "The uncertain steps were settled"
    NOTHING_UNCERTAIN = "nothing_uncertain", "Nothing is uncertain any more"
    UNDO_SETTLED = "undo_settled", "The failed undos were settled"
    NO_UNDO_FAILING = "no_undo_failing", "No undo is failing any more"


class NotDoneWhy(models.TextChoices):
    """Why a planned step is on the not-done list."""

    NEVER_ATTEMPTED = "never_attempted", "Never attempted"
    NOT_PERFORMED = "not_performed", "Not performed"
    FAILED = "failed", "Failed"


class TimelineSays(models.TextChoices):
    """What a journal event of the run's timeline says happened."""

    ABOUT_TO_SEND = "about_to_send", "About to be sent"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    DID_NOT_HAPPEN = "did_not_happen", "Did not happen"
    ALREADY_SO = "already_so", "Already so"
    UNKNOWN = "unknown", "Unknown whether it happened"
    SETTLED_OTHERWISE = "settled_otherwise", "Settled otherwise"
    TOOL_ERROR_AMBIGUOUS = "tool_error_ambiguous", "The tool answered with an error"
    SENT_NO_ANSWER = "sent_no_answer", "Sent, no answer"
    LOOKUP_FAILED = "lookup_failed", "Asking the downstream failed"
    ESCALATED = "escalated", "Escalated"
    RUN_ENDED = "run_ended", "The run ended"
    OTHER = "other", "Another event"
