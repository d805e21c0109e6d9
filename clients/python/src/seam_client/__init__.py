"""seam-client: record an agent's tool calls in Seam's run journal over its REST API.

    from seam_client import Outcome, SeamClient

    seam = SeamClient("http://127.0.0.1:8000", token)
    run = seam.start_run(task_type="returns", versions=versions, plan=plan, ticket_id="T-40912")
    with run.heartbeat(every=15.0):
        run.perform("issue_refund", {"amount": "14.95"}, refund, turn=3)
    run.complete()

`perform` commits the intent before the call, records the outcome after it, and replays a settled
intent without calling again. An open one (the agent died between send and record) is sent again
under its key only for a tool declared to honour it (`HonoursKey`), inside the key's lifetime;
otherwise it is not sent: `perform` waits `wait_for_settle` seconds for Seam's reconciliation to
settle it, or raises IntentInDoubt. AsyncSeamClient and AsyncRun offer the same names as
coroutines."""

from ._async import AsyncHeartbeat, AsyncRun, AsyncSeamClient
from ._errors import (
    ErrorClass,
    IntentInDoubt,
    IntentNotPerformed,
    OutcomeNotRecorded,
    SeamError,
    SeamRefused,
    SeamUnavailable,
    ToolError,
)
from ._protocol import Request
from ._resume import DEFAULT_KEY_LIFETIME, HonoursKey, KeyRefused
from ._sync import Heartbeat, Run, SeamClient
from ._types import AsyncCall, Call, Handover, Intent, Outcome

__all__ = [
    "DEFAULT_KEY_LIFETIME",
    "AsyncCall",
    "AsyncHeartbeat",
    "AsyncRun",
    "AsyncSeamClient",
    "Call",
    "ErrorClass",
    "Handover",
    "Heartbeat",
    "HonoursKey",
    "Intent",
    "IntentInDoubt",
    "IntentNotPerformed",
    "KeyRefused",
    "Outcome",
    "OutcomeNotRecorded",
    "Request",
    "Run",
    "SeamClient",
    "SeamError",
    "SeamRefused",
    "SeamUnavailable",
    "ToolError",
]
__version__ = "0.1.0"
