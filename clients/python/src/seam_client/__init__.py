"""seam-client: record an agent's tool calls in Seam's run journal over its REST API.

    from seam_client import Outcome, SeamClient

    seam = SeamClient("http://127.0.0.1:8000", token)
    run = seam.start_run(task_type="returns", versions=versions, plan=plan, ticket_id="T-40912")
    with run.heartbeat(every=15.0):
        run.perform("issue_refund", {"amount": "14.95"}, refund, turn=3)
    run.complete()

`perform` commits the intent before the call, records the outcome after it, replays a settled
intent without calling again, and never re-sends an open one (IntentInDoubt). AsyncSeamClient and
AsyncRun offer the same names as coroutines."""

from ._async import AsyncHeartbeat, AsyncRun, AsyncSeamClient
from ._errors import (
    ErrorClass,
    IntentInDoubt,
    OutcomeNotRecorded,
    SeamError,
    SeamRefused,
    SeamUnavailable,
    ToolError,
)
from ._protocol import Request
from ._sync import Heartbeat, Run, SeamClient
from ._types import AsyncCall, Call, Handover, Intent, Outcome

__all__ = [
    "AsyncCall",
    "AsyncHeartbeat",
    "AsyncRun",
    "AsyncSeamClient",
    "Call",
    "ErrorClass",
    "Handover",
    "Heartbeat",
    "Intent",
    "IntentInDoubt",
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
