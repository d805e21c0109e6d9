"""What the sync and async clients share beyond the requests themselves: the HTTP client's
settings, a run handle's state, perform's decisions (replay, in doubt, which outcome to
record), and a heartbeat's bookkeeping. Only the waiting on I/O differs between the two."""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from . import _protocol as api
from . import _resume
from ._errors import ErrorClass, IntentInDoubt, SeamError, SeamRefused, ToolError
from ._resume import HonoursKey, KeyRefused
from ._types import CALL_ID_KEY, Intent, Outcome

logger = logging.getLogger("seam_client")


def http_options(base_url: str, token: str, timeout: float) -> dict[str, Any]:
    return {"base_url": api.api_base(base_url), "headers": api.headers_for(token), "timeout": timeout}


def intent_of(answer: api.Answer) -> Intent:
    """The intent row an intent POST answered with: 201 written by this request, 200 found."""
    return Intent.from_json(answer.body, replayed=answer.status != 201)


def next_page(body: Any) -> tuple[list[dict[str, Any]], bool]:
    """A page of GET /runs/: its runs, and whether another page follows."""
    return [dict(item) for item in body["results"]], bool(body.get("next"))


def _canonical(value: Any) -> Any:
    # As the server canonicalises (journal/keys.py): JSON has one number type, so 2 and 2.0 are
    # the same argument; bool is checked before the numbers because True is an int in Python.
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    return repr(value)  # not JSON: Seam refuses the intent; it still needs a name here


def canonical_json(args: Mapping[str, Any]) -> str:
    """The arguments spelled as Seam spells them for the key: sorted keys, no spaces, integral
    floats as integers, so two calls Seam would key alike are counted alike."""
    return json.dumps(_canonical(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# Seam's refusal of a retry that came too soon after a transient failure, with `retry_after`.
RETRY_TOO_SOON = "retry_too_soon"
# The most refusals of one intent a handle waits out, whatever its bound in seconds.
TOO_SOON_TRIES = 3
# The default bound, in seconds, of the waiting for one intent (SeamClient's `too_soon_wait`).
TOO_SOON_WAIT = 30.0


class TooSoon:
    """Waits out Seam's `retry_too_soon` refusals of one intent: each for its `retry_after`
    seconds and up to a quarter more, at random, so agents refused together do not all come back
    together; at most TOO_SOON_TRIES times and `bound` seconds in all. Past either, or for any
    other refusal, `delay` is None: the refusal is raised, with its code, to the runtime."""

    def __init__(self, bound: float) -> None:
        self.bound = max(bound, 0.0)
        self.tries = 0
        self.waited = 0.0

    def delay(self, refused: SeamRefused) -> float | None:
        if refused.code != RETRY_TOO_SOON or refused.retry_after is None:
            return None
        wait = max(refused.retry_after, 0.0)
        delay = wait * (1 + random.random() / 4) + random.random() * 0.05
        if self.tries >= TOO_SOON_TRIES or self.waited + delay > self.bound:
            return None
        self.tries += 1
        self.waited += delay
        logger.info("Seam refused a retry as too soon; asking again in %.2f s", delay)
        return delay


class Occurrences:
    """The occurrence a run handle derives for a call: per (tool, canonical arguments), the turns
    it has seen those arguments at, in order. A call at a turn already seen is that call again
    (retried in-process) and gets the same index; a call at a new turn is the next occurrence.
    An agent started again that makes the same calls in the same order meets the same
    occurrences, hence the same keys, and is answered from the journal."""

    def __init__(self) -> None:
        self._turns: dict[tuple[str, str], list[int]] = {}
        self._lock = threading.Lock()  # LangGraph's ToolNode calls tools from parallel threads

    def of(self, tool: str, args: Mapping[str, Any], turn: int) -> int:
        seen = (tool, canonical_json(args))
        with self._lock:
            turns = self._turns.setdefault(seen, [])
            if turn not in turns:
                turns.append(turn)
            return turns.index(turn)


class RunState:
    """A run handle's id, the last run JSON seen, whether start_run created it, and the
    occurrences of the calls made through it."""

    def __init__(self, run_id: str, *, data: dict[str, Any] | None = None, created: bool = False) -> None:
        self.id = run_id
        self.data: dict[str, Any] = data or {}
        self.created = created
        self.occurrences = Occurrences()
        self._held = 0
        self._held_lock = threading.Lock()

    def intent_request(
        self, tool: str, args: Mapping[str, Any], *, turn: int, occurrence: int | None
    ) -> api.Request:
        """The intent POST; without an explicit `occurrence`, the one this handle derives."""
        if occurrence is None:
            occurrence = self.occurrences.of(tool, args, turn)
        return api.intent(self.id, tool, args, turn=turn, occurrence=occurrence)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"

    @staticmethod
    def found_open(
        intent: Intent, *, after_lost_answer: bool, honours: HonoursKey | None
    ) -> IntentInDoubt | None:
        """perform's decision for an open intent. None: send the call, the first time (written by
        this request) or again under its key (found open, its tool declared to honour the key,
        inside the key's lifetime). Else why it is not sent (seam_client._resume)."""
        if not intent.replayed:
            return None
        doubt = _resume.found_open(intent, after_lost_answer=after_lost_answer, honours=honours)
        if doubt is None:
            logger.info(
                "%s (step %s) was found open; its tool honours its key, so it is sent again under %s",
                intent.tool,
                intent.step_id,
                intent.idempotency_key,
            )
        return doubt

    @contextmanager
    def beats_held(self) -> Iterator[None]:
        """While `perform` waits for Seam to settle a call, the run's heartbeat does not beat:
        reconciliation settles only the calls of a run gone quiet, so a beating run would wait
        for nothing."""
        with self._held_lock:
            self._held += 1
        try:
            yield
        finally:
            with self._held_lock:
                self._held -= 1

    @property
    def beating_held(self) -> bool:
        return self._held > 0

    def failure_outcome(self, intent: Intent, error: Exception, *, call_id: str = "") -> api.Request:
        """What a call's exception records. A ToolError: `failed` with its class, except
        `ambiguous`, which is evidence, not an outcome: Seam keeps the intent open with the
        tool's error text, for reconciliation's lookup or a person. Any other exception came
        from code that did not classify it, maybe after the downstream acted: ambiguous too."""
        exc = error if isinstance(error, ToolError) else unclassified(error)
        return api.outcome(
            self.id,
            intent.step_id,
            ok=False,
            summary=exc.message,
            receipt=with_call_id({}, call_id),
            error_class=exc.error_class,
            request_id=exc.request_id,
        )

    def failure_to_record(
        self, intent: Intent, error: Exception, *, call_id: str, again: bool
    ) -> tuple[api.Request, KeyRefused | None]:
        """What a call's exception records, and, for a call sent again whose key the downstream
        refused, the KeyRefused to raise instead of it (seam_client._resume.refused_key)."""
        recorded, refused = _resume.refused_key(intent, error, again=again)
        return self.failure_outcome(intent, recorded, call_id=call_id), refused

    def success_outcome(self, intent: Intent, result: Outcome, *, call_id: str = "") -> api.Request:
        return api.outcome(
            self.id,
            intent.step_id,
            ok=True,
            summary=result.summary,
            receipt=with_call_id(result.receipt, call_id),
            error_class=None,
            request_id=result.request_id,
            evidence_at=result.evidence_at,
        )

    @staticmethod
    def failure_not_recorded(exc: BaseException, lost: SeamError) -> None:
        exc.add_note(f"its outcome was not recorded ({lost}); reconciliation settles it")


def unclassified(exc: Exception) -> ToolError:
    """A call's exception that is not a ToolError: code that did not classify it may have failed
    after the downstream acted, so it is recorded as ambiguous evidence, its text kept."""
    return ToolError(ErrorClass.AMBIGUOUS, f"{type(exc).__name__}: {exc}")


def with_call_id(receipt: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """The receipt an outcome records: the tool's, and the framework's id of the call, so a
    person can match the journal's step to the agent's own trace."""
    return {**receipt, CALL_ID_KEY: call_id} if call_id else dict(receipt)


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
        self.held = 0  # beats left out while `perform` waited for Seam to settle a call

    def request(self) -> api.Request:
        return api.heartbeat(self.run_id)

    def failed(self, exc: SeamError) -> None:
        self.failures += 1
        self.last_error = exc
        logger.warning("heartbeat for run %s failed: %s", self.run_id, exc)
