"""The handover: what a person needs to finish a run the agent could not, generated from the rows
(intent rows and their receipts, the plan, the compensation catalogue, what the customer was
told), never summarised by a model.

    completed      every write that happened, with what the downstream said and whether (and
                   until when) it can still be taken back
    not_done       planned writes that never happened
    uncertain      writes nobody can say happened or not, with the key to ask about
    already_so     planned writes the world already showed before the run recorded them
                   (someone else's doing, e.g. the customer's): not the run's work, never
                   offered for undo, never sent again
    customer_told  what the customer already knows
    next_action    a concrete suggestion, by rules, from the four lists above: a code for
                   machines beside the sentence for people

One job per module: `objects` (the types the page renders and the API serialises), `rows` (the
queries), `lists` (the lists derived from the rows), `advice` (the rules: the next action and
whether the reason still holds, as codes; handover.words says them) and `build` (the handover
put together). This package answers with all of them, as `handover` always did.
"""

from .advice import next_action, reason_now
from .build import HANDOVER_LIST_LIMIT, HANDOVER_LISTS, handover_build, handover_cut, handover_for
from .codes import NextActionCode
from .lists import receipt_detail, reversibility, tool_error_words, undo_unbuildable, warnings_for
from .objects import (
    HANDOVER_VERSION,
    UNDONE,
    AlreadySoStep,
    AvailableUndo,
    CheckedBranch,
    CompletedStep,
    Contradiction,
    ContradictionCode,
    Coverage,
    CustomerTold,
    CustomerToldSource,
    FanOutDecision,
    FieldDoc,
    Handover,
    MissingBranch,
    NextAction,
    NotDoneStep,
    ReversibilityNow,
    StandingStep,
    StepCompensation,
    UncertainStep,
    described,
)
from .rows import (
    PERFORMED_STEP_COLUMNS,
    RECENT_EVENTS,
    HandoverRows,
    PerformedStep,
    RunEvents,
    events_attach_intents,
    handover_rows,
    run_events,
    run_is_stuck,
    run_state_token,
)

__all__ = [
    "HANDOVER_LISTS",
    "HANDOVER_LIST_LIMIT",
    "HANDOVER_VERSION",
    "PERFORMED_STEP_COLUMNS",
    "RECENT_EVENTS",
    "UNDONE",
    "AlreadySoStep",
    "AvailableUndo",
    "CheckedBranch",
    "CompletedStep",
    "Contradiction",
    "ContradictionCode",
    "Coverage",
    "CustomerTold",
    "CustomerToldSource",
    "FanOutDecision",
    "FieldDoc",
    "Handover",
    "HandoverRows",
    "MissingBranch",
    "NextAction",
    "NextActionCode",
    "NotDoneStep",
    "PerformedStep",
    "ReversibilityNow",
    "RunEvents",
    "StandingStep",
    "StepCompensation",
    "UncertainStep",
    "described",
    "events_attach_intents",
    "handover_build",
    "handover_cut",
    "handover_for",
    "handover_rows",
    "next_action",
    "reason_now",
    "receipt_detail",
    "reversibility",
    "run_events",
    "run_is_stuck",
    "run_state_token",
    "tool_error_words",
    "undo_unbuildable",
    "warnings_for",
]
