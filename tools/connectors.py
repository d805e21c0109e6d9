"""Connectors: how Seam talks to the systems agents change.

A connector does two things for a tool: `perform(args, idempotency_key)` makes the call and
returns the downstream's receipt, and `lookup(idempotency_key, args)` asks the downstream what
became of an earlier call with that key — Performed(receipt), NotPerformed, or Unknown(reason).

Every failure is classified here, at the boundary that knows what happened on the wire, into
one of the six error classes; nothing downstream of a connector reads a human sentence to decide
whether to retry. The rule that matters most: a failure before the request left is `transient`
(safe to retry), a failure after it left is `ambiguous` (it may have been performed; ask, do not
resend)."""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

import requests
import urllib3.exceptions

from journal.tool_errors import DispatchResult, ToolError

# --- what a lookup can say --------------------------------------------------------------------


@dataclass(frozen=True)
class Performed:
    receipt: dict[str, Any]


@dataclass(frozen=True)
class NotPerformed:
    pass


@dataclass(frozen=True)
class Unknown:
    reason: str


LookupResult = Performed | NotPerformed | Unknown


class Connector(Protocol):
    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult: ...

    def lookup(self, idempotency_key: str, args: Mapping[str, Any]) -> LookupResult: ...


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

    def lookup(self, idempotency_key: str, args: Mapping[str, Any]) -> LookupResult:
        if not self.lookup_path:
            return Unknown("this provider offers no lookup by idempotency key")
        response = self._send("GET", self.lookup_path.format(key=idempotency_key), headers=dict(self.headers))
        if response.status_code >= 300:
            raise classify_response(response)
        body = self._lookup_body(response)
        status = body.get("status")
        if status == "performed" and isinstance(body.get("receipt"), dict):
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
    call, and reconciles by searching for the business identifier the call carried. It answers
    Performed only when exactly one record matches every identifying argument, NotPerformed only
    when the search succeeded and found none, and Unknown otherwise: several matches cannot say
    which one was ours."""

    search_path: str = ""  # with "{reference}"
    reference_arg: str = "reference"
    match_args: tuple[str, ...] = ()
    result_key: str = "results"

    def lookup(self, idempotency_key: str, args: Mapping[str, Any]) -> LookupResult:
        reference = args.get(self.reference_arg)
        if not reference:
            return Unknown(f"the call carried no {self.reference_arg} to search by")
        response = self._send("GET", self.search_path.format(reference=reference), headers=dict(self.headers))
        if response.status_code >= 300:
            raise classify_response(response)
        records = self._lookup_body(response).get(self.result_key)
        if not isinstance(records, list):
            raise ToolError("bug", f"search answer has no {self.result_key} list")
        matches = [r for r in records if all(r.get(name) == args.get(name) for name in self.match_args)]
        if len(matches) == 1:
            return Performed(receipt=matches[0])
        if not matches:
            return NotPerformed()
        return Unknown(
            f"{len(matches)} records match {self.reference_arg}={reference}; cannot tell which is this call's"
        )
