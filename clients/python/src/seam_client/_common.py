"""What the sync and async clients share beyond the requests themselves: the HTTP client's
settings, a run handle's state, perform's decisions (replay, in doubt, which outcome to
record), and a heartbeat's bookkeeping. Only the waiting on I/O differs between the two."""

from __future__ import annotations

import logging
from typing import Any

from . import _protocol as api
from ._errors import ErrorClass, IntentInDoubt, SeamError, ToolError
from ._types import Intent, Outcome

logger = logging.getLogger("seam_client")


def http_options(base_url: str, token: str, timeout: float) -> dict[str, Any]:
    return {"base_url": api.api_base(base_url), "headers": api.headers_for(token), "timeout": timeout}


def intent_of(answer: api.Answer) -> Intent:
    """The intent row an intent POST answered with: 201 written by this request, 200 found."""
    return Intent.from_json(answer.body, replayed=answer.status != 201)


def next_page(body: Any) -> tuple[list[dict[str, Any]], bool]:
    """A page of GET /runs/: its runs, and whether another page follows."""
    return [dict(item) for item in body["results"]], bool(body.get("next"))


class RunState:
    """A run handle's id, the last run JSON seen, and whether start_run created it."""

    def __init__(self, run_id: str, *, data: dict[str, Any] | None = None, created: bool = False) -> None:
        self.id = run_id
        self.data: dict[str, Any] = data or {}
        self.created = created

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"

    @staticmethod
    def settled_already(intent: Intent, *, after_lost_answer: bool) -> bool:
        """perform's first decision. True: the intent is settled, return it, call nothing.
        IntentInDoubt: it was found open (not written by this request), so it is not sent."""
        if intent.settled:
            return True
        if intent.replayed:
            raise IntentInDoubt(intent, own_retry=after_lost_answer)
        return False

    def failure_outcome(self, intent: Intent, exc: ToolError) -> api.Request | None:
        """The outcome a ToolError records; None for `ambiguous`, which leaves the intent open."""
        if exc.error_class is ErrorClass.AMBIGUOUS:
            return None
        return api.outcome(
            self.id,
            intent.step_id,
            ok=False,
            summary=exc.message,
            receipt=None,
            error_class=exc.error_class,
            request_id=exc.request_id,
        )

    def success_outcome(self, intent: Intent, result: Outcome) -> api.Request:
        return api.outcome(
            self.id,
            intent.step_id,
            ok=True,
            summary=result.summary,
            receipt=result.receipt,
            error_class=None,
            request_id=result.request_id,
        )

    @staticmethod
    def failure_not_recorded(exc: ToolError, lost: SeamError) -> None:
        exc.add_note(f"its outcome was not recorded ({lost}); reconciliation settles it")


class HeartbeatState:
    """A heartbeat's counts: beats made, beats failed, the last failure (logged, never raised:
    the next beat tries again)."""

    def __init__(self, run_id: str, every: float) -> None:
        if every <= 0:
            raise ValueError("every must be positive")
        self.run_id = run_id
        self.every = every
        self.beats = 0
        self.failures = 0
        self.last_error: SeamError | None = None

    def request(self) -> api.Request:
        return api.heartbeat(self.run_id)

    def failed(self, exc: SeamError) -> None:
        self.failures += 1
        self.last_error = exc
        logger.warning("heartbeat for run %s failed: %s", self.run_id, exc)
