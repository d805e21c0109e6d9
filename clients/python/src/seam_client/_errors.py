"""What can go wrong, classified: a tool's own failure (ToolError, with its ErrorClass) and Seam's
answers (SeamError and its kinds). The class decides what a caller does next."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._types import Intent, Outcome


class ErrorClass(StrEnum):
    """The six classes of a failed call; Seam records the first five as a `failed` outcome.
    `ambiguous` means the request may have been accepted: Seam keeps the error text as evidence,
    the intent stays open, and reconciliation asks the downstream system about its idempotency
    key (a person decides when nothing can be asked)."""

    INVALID_INPUT = "invalid_input"
    CONFLICT = "conflict"
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    BUG = "bug"
    AMBIGUOUS = "ambiguous"


class ToolError(Exception):
    """What a tool call raises when the downstream refused or failed, classified by the code that
    knows the downstream. `perform` records it as the intent's outcome (an `ambiguous` one as
    evidence on the open intent)."""

    def __init__(self, error_class: ErrorClass | str, message: str, *, request_id: str = "") -> None:
        try:
            klass = ErrorClass(error_class)
        except ValueError:
            known = ", ".join(c.value for c in ErrorClass)
            raise ValueError(f"unknown error class {error_class!r}; expected one of {known}") from None
        super().__init__(message)
        self.error_class = klass
        self.message = message
        self.request_id = request_id


class SeamError(Exception):
    """Seam answered with an error, or could not be reached. `error_class` says what kind:
    `invalid_input`/`conflict`/`permanent` for a refusal, `transient` when Seam was unreachable,
    `bug` for a server error."""

    def __init__(
        self,
        message: str,
        *,
        error_class: ErrorClass,
        status: int | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.status = status
        self.body = body


class SeamRefused(SeamError):
    """A 4xx: Seam refused the request and wrote nothing. `fields` maps each offending field (or
    `detail`) to Seam's reasons, e.g. {"args": ["args are 70012 bytes …"]}. `code` is the
    refusal's typed code where Seam gives one, for the runtime to act on rather than the words:
    the error taxonomy's `permanent_repeated`, `invalid_input_repeated`, `repairs_spent`,
    `retries_spent` and `retry_too_soon` (then `retry_after`, seconds)."""

    def __init__(self, message: str, *, status: int, body: Any) -> None:
        super().__init__(message, error_class=_class_of_refusal(status), status=status, body=body)
        self.fields: dict[str, list[str]] = _fields_of(body)
        typed = body if isinstance(body, dict) else {}
        self.code: str = str(typed.get("code") or "")
        retry_after = typed.get("retry_after")
        self.retry_after: float | None = float(retry_after) if isinstance(retry_after, int | float) else None


class SeamUnavailable(SeamError):
    """Seam could not be reached, or answered 502/503/504, within the retry budget.
    `maybe_applied` is true when a request may have reached Seam and only its answer was lost: a
    write that is not idempotent (a customer message, a counter) is then not sent again."""

    def __init__(self, message: str, *, maybe_applied: bool, status: int | None = None) -> None:
        super().__init__(message, error_class=ErrorClass.TRANSIENT, status=status)
        self.maybe_applied = maybe_applied


class IntentInDoubt(SeamError):
    """`perform` found the intent recorded and open. Another process may be making the call, or
    died making it; or this client's own first request was committed and its answer lost
    (`own_retry`: the row was found by a retry after a lost answer). Either way the call is not
    sent: Seam's reconciliation settles the row by asking the downstream system about its key.

    A tool declared to honour its key (`HonoursKey`) is sent again instead, inside the key's
    lifetime; past it, this is raised. With `wait_for_settle`, `perform` first waits for
    reconciliation and raises this when the wait ends unsettled (`waited`, in seconds), or when
    the call was settled `unknown` or its run handed to a person (`person_decides`)."""

    def __init__(
        self,
        intent: Intent,
        *,
        own_retry: bool,
        why: str = "",
        waited: float = 0.0,
        person_decides: bool = False,
    ) -> None:
        super().__init__(
            f"intent {intent.step_id} (key {intent.idempotency_key}) is recorded and has no outcome; "
            + (why or "it is not sent again: reconciliation settles it by asking the downstream system"),
            error_class=ErrorClass.AMBIGUOUS,
            status=200,
        )
        self.intent = intent
        self.own_retry = own_retry
        self.waited = waited
        self.person_decides = person_decides


class IntentNotPerformed(SeamError):
    """While `perform` waited for it, reconciliation settled the call `not_performed`: the
    downstream system says it never happened. Only Seam re-admits such a call, to send it under
    the same key (its resumption of the run); the agent API offers an agent no re-admission, so
    the client does not send it. The run's resumption, or a person, finishes it."""

    def __init__(self, intent: Intent) -> None:
        super().__init__(
            f"{intent.tool or 'the call'} (intent {intent.step_id}, key {intent.idempotency_key}) was "
            "settled not_performed by reconciliation: it never happened. Seam's agent API cannot "
            "re-admit it for this client, so it is not sent; Seam's resumption of the run or a person "
            "sends it under its key",
            error_class=ErrorClass.CONFLICT,
            status=200,
        )
        self.intent = intent


class OutcomeNotRecorded(SeamUnavailable):
    """The call was made (its intent is committed) but Seam did not take its outcome. The intent
    stays open and reconciliation settles it by its key. Do not call the tool again."""

    def __init__(self, intent: Intent, outcome: Outcome, cause: SeamError) -> None:
        super().__init__(
            f"{intent.tool} was called with key {intent.idempotency_key}, but its outcome was not "
            f"recorded ({cause}); the intent stays open for reconciliation. Do not call it again.",
            maybe_applied=isinstance(cause, SeamUnavailable) and cause.maybe_applied,
            status=cause.status,
        )
        self.intent = intent
        self.outcome = outcome


def _class_of_refusal(status: int) -> ErrorClass:
    if status in (409, 412):
        return ErrorClass.CONFLICT
    if status in (400, 413, 415, 422):
        return ErrorClass.INVALID_INPUT
    if status == 429:
        return ErrorClass.TRANSIENT
    return ErrorClass.PERMANENT  # 401, 403, 404, 405, 410: the same request will never pass


def _fields_of(body: Any) -> dict[str, list[str]]:
    if not isinstance(body, dict):
        return {"detail": [str(body)]} if body else {}
    return {
        str(name): [str(reason) for reason in reasons] if isinstance(reasons, list) else [str(reasons)]
        for name, reasons in body.items()
        if name not in ("code", "retry_after")  # the refusal's typed code, not a field
    }
