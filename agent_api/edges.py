"""The API's edges: what every request under /api/ is answered before and after its view,
whichever way it travels (the agent lane, agent_api.lane, or Django's whole middleware chain).

- The Host header is checked first. Django checks it only when something asks for the host
  (CommonMiddleware does, the lane does not), so without this a bearer call with any Host was
  served while the same call without a token was refused.
- A path missing its trailing slash is redirected for a read; a write is answered 404 naming the
  path to use, because a redirected POST loses its body and a client that follows it sends
  nothing (or, with DEBUG, Django raises).
- Every refusal is JSON: a 4xx or 5xx that a view or Django rendered as a page (an unknown path,
  a CSRF failure, a server error) is answered as {"detail": ..., "code": ...} instead."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponsePermanentRedirect
from django.urls import Resolver404, resolve

API_ROOT = "/api/"
API_PREFIX = "/api/v1/"
# Content types that are already the API's own answers (the export answers in JSON lines).
_JSON_TYPES = ("application/json", "application/problem+json", "application/x-ndjson")


def api_refusal(status: int, code: str, detail: str) -> HttpResponse:
    """A refusal in the API's shape: a sentence for people and a code for the runtime."""
    body = json.dumps({"detail": detail, "code": code})
    return HttpResponse(body, status=status, content_type="application/json")


def _resolves(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


def _unslashed_refusal(request: HttpRequest) -> HttpResponseBase | None:
    """The answer to a path that names an endpoint only with a trailing slash, else None."""
    path = request.path_info
    if not path.startswith(API_PREFIX) or path.endswith("/") or not _resolves(f"{path}/"):
        return None
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return HttpResponsePermanentRedirect(request.get_full_path(force_append_slash=True))
    return api_refusal(
        404, "trailing_slash", f"no endpoint at {path}; the endpoint is {path}/ (with the trailing slash)"
    )


def _json_of_page(response: HttpResponseBase) -> HttpResponseBase:
    """A refusal rendered as a page, answered as JSON instead (codes by status)."""
    if response.status_code < 400 or response.get("Content-Type", "").startswith(_JSON_TYPES):
        return response
    code = {400: "bad_request", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}.get(
        response.status_code, "server_error" if response.status_code >= 500 else "refused"
    )
    refusal = api_refusal(response.status_code, code, response.reason_phrase)
    for header in ("Allow", "Retry-After"):
        if header in response:
            refusal[header] = response[header]
    return refusal


class ApiEdgesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not request.path_info.startswith(API_ROOT):
            return self.get_response(request)
        try:
            request.get_host()
        except DisallowedHost:
            host = request.META.get("HTTP_HOST", "")
            return api_refusal(400, "host_not_allowed", f"this server does not answer for the host {host!r}")
        refused = _unslashed_refusal(request)
        if refused is not None:
            return refused
        return _json_of_page(self.get_response(request))
