"""The journal's write API, as the other apps call it: one import for every write to the run
journal, each defined in the module named for what it holds.

- journal.runs: a run opened, kept alive, counted, completed, cancelled;
- journal.intents: the intent committed before a call leaves (and readmitted for resumption);
- journal.outcomes: the outcome settled after it, or the evidence of an unknown effect;
- journal.calls: `perform`, the whole journaled call (intent, dispatch with its key, outcome);
- journal.escalations: a run handed to a person, and the hand-over closed;
- journal.customer_messages: what the customer was told;
- journal.durability and journal.validation: the rules every write above keeps.

Every function that records an intent or an outcome commits durably before it returns, and
refuses to run inside a caller's open transaction: a row that is not committed when the call
leaves is a comment, not a record. Views, the REST API, the decorator, and the reconciliation
and compensation workers all write through these functions.

The refusals (JournalError and its kinds), Actor and event_record are named here too, so that a
caller of the write path finds what it raises and what it passes in one place."""

from __future__ import annotations

from .calls import Dispatch, IntentInDoubt, JournalUnavailable, OutcomeNotRecorded, Performed, perform
from .customer_messages import (
    MessageInput,
    customer_message_about,
    customer_message_insert,
    customer_message_record,
    customer_message_validate,
)
from .durability import (
    OPEN_TRANSACTION_MESSAGE,
    OpenTransactionRefused,
    durable,
    inside_open_transaction,
)
from .errors import Conflict, InvalidInput, JournalError, NotFound
from .escalations import (
    cancelled_in_doubt_hand_over,
    escalations_resolve,
    run_hand_over,
    unknown_calls_why,
)
from .events import Actor, Caller, event_record
from .intents import (
    IntentLimitReached,
    IntentRecorded,
    StepTaken,
    intent_readmit,
    intent_record,
    intent_record_as_caller,
    step_id_for,
)
from .outcomes import OutcomeRecorded, dispatch_ambiguous_record, outcome_record, outcome_record_as_caller
from .runs import (
    COUNTERS,
    Cancelled,
    RunCreated,
    RunDiffers,
    run_cancel,
    run_complete,
    run_count,
    run_create,
    run_heartbeat,
    run_heartbeat_restore,
    runs_archived_mark,
)
from .tool_errors import DispatchResult, ToolError
from .validation import (
    MAX_ARGS_BYTES,
    MAX_MESSAGE_CHARS,
    MAX_PLAN_BYTES,
    MAX_RECEIPT_BYTES,
    MAX_SUMMARY_CHARS,
    LimitExceeded,
    clean_text,
)

__all__ = [
    "COUNTERS",
    "MAX_ARGS_BYTES",
    "MAX_MESSAGE_CHARS",
    "MAX_PLAN_BYTES",
    "MAX_RECEIPT_BYTES",
    "MAX_SUMMARY_CHARS",
    "OPEN_TRANSACTION_MESSAGE",
    "Actor",
    "Caller",
    "Cancelled",
    "Conflict",
    "Dispatch",
    "DispatchResult",
    "IntentInDoubt",
    "IntentLimitReached",
    "IntentRecorded",
    "InvalidInput",
    "JournalError",
    "JournalUnavailable",
    "LimitExceeded",
    "MessageInput",
    "NotFound",
    "OpenTransactionRefused",
    "OutcomeNotRecorded",
    "OutcomeRecorded",
    "Performed",
    "RunCreated",
    "RunDiffers",
    "StepTaken",
    "ToolError",
    "cancelled_in_doubt_hand_over",
    "clean_text",
    "customer_message_about",
    "customer_message_insert",
    "customer_message_record",
    "customer_message_validate",
    "dispatch_ambiguous_record",
    "durable",
    "escalations_resolve",
    "event_record",
    "inside_open_transaction",
    "intent_readmit",
    "intent_record",
    "intent_record_as_caller",
    "outcome_record",
    "outcome_record_as_caller",
    "perform",
    "run_cancel",
    "run_complete",
    "run_count",
    "run_create",
    "run_hand_over",
    "run_heartbeat",
    "run_heartbeat_restore",
    "runs_archived_mark",
    "step_id_for",
    "unknown_calls_why",
]
