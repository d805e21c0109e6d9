"""Connectors: how Seam talks to the systems agents change.

A connector does two things for a tool: `perform(args, idempotency_key)` makes the call and
returns the downstream's receipt, and `lookup(query)` asks the downstream what became of an
earlier call. The query is the whole intent (LookupQuery: key, arguments, when it was recorded,
request id), and the answer is evidence: Performed (this call caused it, with the receipt and
when), NotPerformed, AlreadySo (the world was already as the call would leave it before the
intent was recorded: not the run's work), or Unknown(reason). Evidence older than the intent is
never Performed; reconciliation holds every connector to that, whatever it answers.

Every failure is classified here, at the boundary that knows what happened on the wire, into
one of the six error classes; nothing downstream of a connector reads a human sentence to decide
whether to retry. The rule that matters most: a failure before the request left is `transient`
(safe to retry), a failure after it left is `ambiguous` (it may have been performed; ask, do not
resend)."""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

import requests
import urllib3.exceptions

from journal.tool_errors import DispatchResult, ToolError, predates_intent

# --- what a lookup is asked, and what it can say -----------------------------------------------


@dataclass(frozen=True)
class LookupQuery:
    """The intent a lookup asks about: everything the downstream may need to tell the call's own
    effect from a state that was already there. `intended_at` is when the intent row was
    committed: nothing the call caused can be older."""

    tool: str
    idempotency_key: str
    args: Mapping[str, Any]
    intended_at: datetime
    request_id: str = ""


@dataclass(frozen=True)
class Performed:
    """This call caused the effect: `receipt` is the downstream's record of it, `evidence_at`
    when the downstream says it happened (None when it does not say; a key-based lookup needs no
    time, the key itself ties the effect to this call)."""

    receipt: dict[str, Any]
    evidence_at: datetime | None = None


@dataclass(frozen=True)
class NotPerformed:
    pass


@dataclass(frozen=True)
class AlreadySo:
    """The world was already as the call would leave it, and that state predates the intent: not
    the run's work, never undone by Seam. `evidence_at` is when the state came about."""

    evidence_at: datetime | None
    detail: str = ""
    receipt: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Unknown:
    reason: str


LookupResult = Performed | NotPerformed | AlreadySo | Unknown


def caused_by_intent(answer: LookupResult, query: LookupQuery) -> LookupResult:
    """The engine's rule over every connector's answer: evidence older than the intent is never
    Performed. A Performed whose `evidence_at` precedes `query.intended_at` becomes AlreadySo."""
    if isinstance(answer, Performed) and predates_intent(answer.evidence_at, query.intended_at):
        assert answer.evidence_at is not None  # predates_intent says so
        return AlreadySo(
            evidence_at=answer.evidence_at,
            detail=(
                f"the downstream's record dates from {answer.evidence_at.isoformat()}, before the "
                f"intent was recorded at {query.intended_at.isoformat()}"
            ),
            receipt=answer.receipt,
        )
    return answer


class Connector(Protocol):
    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult: ...

    def lookup(self, query: LookupQuery) -> LookupResult: ...


@runtime_checkable
class TimedConnector(Protocol):
    """A connector that says how long one of its calls may take before it gives up on it."""

    @property
    def call_timeout(self) -> float: ...


# --- classification ---------------------------------------------------------------------------

# Statuses whose meaning is fixed by the provider contract. 502/504 come from a gateway that may
# have forwarded the request, and 500 from a handler that may have acted before failing.
STATUS_CLASSES: dict[int, str] = {
    400: "invalid_input",
    404: "invalid_input",
    405: "bug",
    409: "conflict",
    412: "conflict",
    422: "invalid_input",
    401: "permanent",
    403: "permanent",
    429: "transient",
    503: "transient",
    500: "ambiguous",
    502: "ambiguous",
    504: "ambiguous",
}


def _sent(exc: requests.RequestException) -> bool:
    """Whether the request may have reached the server before this failure. Decided from the
    exception's type and its cause chain (urllib3's own types), never from its message."""
    if isinstance(exc, requests.ConnectTimeout):
        return False
    if isinstance(exc, requests.ReadTimeout):
        return True
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError):
            return False
        if isinstance(cause, urllib3.exceptions.ProtocolError | urllib3.exceptions.ReadTimeoutError):
            return True
        nested = cause.args[0] if cause.args and isinstance(cause.args[0], BaseException) else None
        cause = nested or cause.__cause__ or cause.__context__
        if cause is exc:
            break
    # Unknown shape: assume the worst, the request may have been sent.
    return True


def classify_transport_error(exc: requests.RequestException) -> ToolError:
    if _sent(exc):
        return ToolError("ambiguous", f"no answer after sending: {type(exc).__name__}")
    return ToolError("transient", f"could not send: {type(exc).__name__}")


def classify_response(response: requests.Response) -> ToolError:
    error_class = STATUS_CLASSES.get(response.status_code)
    if error_class is None:
        error_class = "invalid_input" if 400 <= response.status_code < 500 else "ambiguous"
    message = f"HTTP {response.status_code}"
    try:
        body = response.json()
        detail = body.get("error", {}).get("message") if isinstance(body, dict) else None
        if detail:
            message += f": {detail}"
    except ValueError:
        pass
    return ToolError(error_class, message, request_id=response.headers.get("X-Request-Id", ""))


# --- the generic HTTP connector ---------------------------------------------------------------


def path_fields(template: str) -> tuple[str, ...]:
    """The argument names a path template fills: `orders/{order_id}/refunds` -> ("order_id",)."""
    return tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)


def path_fill(template: str, args: Mapping[str, Any]) -> str:
    """The path with each `{name}` replaced by that argument, percent-encoded as one path segment
    (or query value), so an order id with a slash cannot point the call at another resource. A
    template that names an argument the call does not carry is a declaration error: `bug`."""
    names = path_fields(template)
    missing = [name for name in names if name not in args]
    if missing:
        raise ToolError("bug", f"path {template!r} needs {', '.join(missing)}, which the call does not carry")
    return template.format_map({name: quote(str(args[name]), safe="") for name in names})


@dataclass(frozen=True)
class HttpConnector:
    """A tool behind an HTTP endpoint, configured rather than coded: where to send it, how the
    idempotency key travels, which receipt fields a success must carry, and where to ask about a
    key afterwards.

    `path` is a template filled from the call's arguments for every method
    (`orders/{order_id}/refunds`). A GET sends no body; any other method sends the arguments the
    path did not consume as its JSON body.

    A connector whose provider needs a different lookup (by business id, by reading an object's
    state) subclasses this one and writes `lookup` with the public helpers: `request(...)` sends
    any method to a path template and classifies a failure to send; `get_json(...)` also
    classifies an error status and returns the answer's JSON object."""

    base_url: str
    path: str
    method: str = "POST"
    timeout: float = 5.0
    connect_timeout: float = 2.0
    key_header: str = "Idempotency-Key"
    receipt_fields: tuple[str, ...] = ()
    lookup_path: str = ""  # with "{key}"; empty when the provider offers no lookup by key
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def call_timeout(self) -> float:
        """Seconds one call may wait on the wire: connecting, then the answer."""
        return self.connect_timeout + self.timeout

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def request(
        self,
        method: str,
        path: str,
        *,
        args: Mapping[str, Any] | None = None,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send one request to `path` (a template filled from `args`), with this connector's
        headers and timeouts. A failure on the wire raises its classified ToolError (`transient`
        before the request left, `ambiguous` after); any HTTP status is returned as is."""
        try:
            return requests.request(
                method.upper(),
                self.url(path_fill(path, args or {})),
                json=json,
                params=params,
                headers={**self.headers, **(headers or {})},
                timeout=(self.connect_timeout, self.timeout),
            )
        except requests.RequestException as exc:
            raise classify_transport_error(exc) from exc

    def get_json(
        self,
        path: str,
        *,
        args: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """GET `path` (a template filled from `args`) and return its JSON object: what a lookup
        reads. An error status raises its classified ToolError; an answer that is not a JSON
        object is a `bug`."""
        response = self.request("GET", path, args=args, params=params, headers=headers)
        if response.status_code >= 300:
            raise classify_response(response)
        return self._lookup_body(response)

    def _send(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        # Kept for the subclasses below; `path` here is already filled.
        try:
            return requests.request(
                method, self.url(path), timeout=(self.connect_timeout, self.timeout), **kwargs
            )
        except requests.RequestException as exc:
            raise classify_transport_error(exc) from exc

    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult:
        headers = {}
        if self.key_header:
            headers[self.key_header] = idempotency_key
        consumed = set(path_fields(self.path))
        if self.method.upper() == "GET":
            response = self.request("GET", self.path, args=args, headers=headers)
        else:
            body = {name: value for name, value in args.items() if name not in consumed}
            response = self.request(self.method, self.path, args=args, json=body, headers=headers)
        if response.status_code >= 300:
            raise classify_response(response)
        receipt = self._receipt(response)
        return DispatchResult(
            summary=", ".join(f"{k} {receipt[k]}" for k in self.receipt_fields if k in receipt),
            receipt=receipt,
            request_id=response.headers.get("X-Request-Id", ""),
        )

    def _receipt(self, response: requests.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise ToolError("bug", f"HTTP {response.status_code} with a body that is not JSON") from None
        if not isinstance(body, dict):
            raise ToolError("bug", f"receipt is a {type(body).__name__}, not an object")
        missing = [name for name in self.receipt_fields if name not in body]
        if missing:
            raise ToolError("bug", f"receipt lacks {', '.join(missing)}")
        return body

    def lookup(self, query: LookupQuery) -> LookupResult:
        if not self.lookup_path:
            return Unknown("this provider offers no lookup by idempotency key")
        response = self._send(
            "GET", self.lookup_path.format(key=query.idempotency_key), headers=dict(self.headers)
        )
        if response.status_code >= 300:
            raise classify_response(response)
        body = self._lookup_body(response)
        status = body.get("status")
        if status == "performed" and isinstance(body.get("receipt"), dict):
            # The provider found the effect under this call's own key: the key, not a time,
            # ties it to the call, so no evidence time is claimed (a clock apart from ours
            # must not turn our own effect into someone else's).
            return Performed(receipt=body["receipt"])
        if status == "not_performed":
            return NotPerformed()
        if status == "unknown":
            return Unknown(str(body.get("reason") or "the provider cannot say"))
        raise ToolError("bug", f"lookup answered an unexpected status {status!r}")

    @staticmethod
    def _lookup_body(response: requests.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise ToolError("bug", "lookup answer is not JSON") from None
        if not isinstance(body, dict):
            raise ToolError("bug", "lookup answer is not an object")
        return body


@dataclass(frozen=True)
class BusinessIdHttpConnector(HttpConnector):
    """For a provider that ignores idempotency keys (a legacy ERP): it performs by the same HTTP
    call, and reconciles by searching for the business identifier the call carried, among the
    records that match every identifying argument.

    A business id says what the world looks like, not who made it so: a record the customer (or
    anyone) made before the intent was recorded matches just as well. So each record's time
    (`evidence_field`, an ISO 8601 datetime) is compared with the intent's: exactly one match at
    or after it is Performed; none after it but one or more before is AlreadySo (not the run's
    work); no match at all is NotPerformed; several after it, a match without a readable time,
    or one within `clock_skew` seconds before the intent (the provider's clock and Seam's may
    disagree by that much: too close to tell whose it is) is Unknown. Without `evidence_field` the provider gives no time: one match is
    Performed with no evidence time, several Unknown, as before."""

    search_path: str = ""  # with "{reference}"
    reference_arg: str = "reference"
    match_args: tuple[str, ...] = ()
    result_key: str = "results"
    evidence_field: str = ""  # the record's field holding when it was made
    clock_skew: float = 0.0  # seconds the provider's clock may be behind or ahead of Seam's

    def lookup(self, query: LookupQuery) -> LookupResult:
        reference = query.args.get(self.reference_arg)
        if not reference:
            return Unknown(f"the call carried no {self.reference_arg} to search by")
        matches = self._matches(query, reference)
        if not matches:
            return NotPerformed()
        if not self.evidence_field:
            if len(matches) == 1:
                return Performed(receipt=matches[0])
            return self._ambiguous(len(matches), reference)
        return self._judge_by_time(query, reference, matches)

    def _matches(self, query: LookupQuery, reference: Any) -> list[dict[str, Any]]:
        """The provider's records for the reference that agree with every identifying argument."""
        response = self._send("GET", self.search_path.format(reference=reference), headers=dict(self.headers))
        if response.status_code >= 300:
            raise classify_response(response)
        records = self._lookup_body(response).get(self.result_key)
        if not isinstance(records, list):
            raise ToolError("bug", f"search answer has no {self.result_key} list")
        args = query.args
        return [r for r in records if all(r.get(name) == args.get(name) for name in self.match_args)]

    def _judge_by_time(
        self, query: LookupQuery, reference: Any, matches: list[dict[str, Any]]
    ) -> LookupResult:
        """Whose the matches are, by their time against the intent's (the class docstring's rules)."""
        dated = [(self._evidence_at(r), r) for r in matches]
        if any(at is None for at, _ in dated):
            return Unknown(
                f"a record for {self.reference_arg}={reference} carries no readable {self.evidence_field}"
            )
        after = [(at, r) for at, r in dated if at is not None and at >= query.intended_at]
        before = [(at, r) for at, r in dated if at is not None and at < query.intended_at]
        margin = timedelta(seconds=self.clock_skew)
        if any(at >= query.intended_at - margin for at, _ in before):
            return Unknown(
                f"a record for {self.reference_arg}={reference} is within the providers' clock skew "
                f"({self.clock_skew} s) before the intent: cannot tell whose it is"
            )
        if len(after) == 1:
            at, record = after[0]
            return Performed(receipt=record, evidence_at=at)
        if after:
            return self._ambiguous(len(after), reference)
        at, record = max(before, key=lambda pair: pair[0])
        return AlreadySo(
            evidence_at=at,
            detail=(
                f"{len(before)} record(s) for {self.reference_arg}={reference} predate the intent; "
                f"the latest is from {at.isoformat()}"
            ),
            receipt=record,
        )

    def _evidence_at(self, record: Mapping[str, Any]) -> datetime | None:
        value = record.get(self.evidence_field)
        if not isinstance(value, str):
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        # A time without a zone cannot be compared with the intent's: no evidence.
        return moment if moment.tzinfo is not None else None

    def _ambiguous(self, count: int, reference: Any) -> Unknown:
        return Unknown(
            f"{count} records match {self.reference_arg}={reference}; cannot tell which is this call's"
        )
