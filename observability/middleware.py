"""Every web request gets an id: the caller's X-Request-ID (a load balancer's, an agent
runtime's) or a new one. It is in every log record made while the request is served, in the
response's X-Request-ID header (so gunicorn's access log and the caller see it), and in the
audit rows the request writes (console.views reads the same header)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from .context import log_context

HEADER = "X-Request-ID"
# A caller's id is kept when it is a plausible id: printable, no spaces, at most 100 characters.
_ACCEPTABLE = re.compile(r"[A-Za-z0-9._:/+=@-]{1,100}")


def request_id_of(request: HttpRequest) -> str:
    given = request.META.get("HTTP_X_REQUEST_ID", "")
    return given if _ACCEPTABLE.fullmatch(given) else uuid.uuid4().hex


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_of(request)
        # Views that read the header themselves (the audit trail's request id) see this one.
        request.META["HTTP_X_REQUEST_ID"] = request_id
        with log_context(request_id=request_id):
            response = self.get_response(request)
        # A view that answers with an id of its own (the sandbox, playing a provider that names
        # its requests) keeps it.
        if HEADER not in response:
            response[HEADER] = request_id
        return response
