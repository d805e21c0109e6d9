"""The agent lane: REST calls made with an agent token skip the console's middleware.

An agent runtime calls the journal's API twice per tool call (intent, then outcome), and
nothing in the console's middleware serves those calls: a bearer token is not a session, the
API views are exempt from CSRF (DRF's APIView), and messages, htmx, the admin's history and the
login lockout concern people. Walking that chain was about a fifth of each call's server time.

So this middleware, placed after the request id and the security headers and before the rest,
sends a call whose path is under /api/v1/ and whose Authorization is a bearer token straight to
its view, doing what Django's handler would do after the middleware (resolve, call the view,
render). Everything else, and any such call whose path does not resolve (an unknown path,
answered in JSON by agent_api.edges, which also checked the Host before), goes down the whole
chain. The
view still authenticates the token and checks every argument: the lane skips middleware, never
the API's own checks.

A view may also offer a `lean` handler (LeanView) for its plain calls: it answers without DRF's
request, parser, negotiation and serializer machinery, or returns None, and the view answers
as always. The journal's intent and outcome calls have one (agent_api.views)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, resolve

API_PREFIX = "/api/v1/"
_BEARER = "bearer "


def is_agent_call(request: HttpRequest) -> bool:
    """Whether the request is an agent token's call to the journal API."""
    if not request.path_info.startswith(API_PREFIX):
        return False
    return request.META.get("HTTP_AUTHORIZATION", "")[: len(_BEARER)].lower() == _BEARER


class LeanView(Protocol):
    @classmethod
    def lean(cls, request: HttpRequest, /, *args: str, **kwargs: str) -> HttpResponseBase | None:
        """The answer to a plain call, or None for the view to answer."""


class AgentLaneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not is_agent_call(request):
            return self.get_response(request)
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return self.get_response(request)
        request.resolver_match = match
        view_class: type[LeanView] | None = getattr(match.func, "view_class", None)
        if view_class is not None and hasattr(view_class, "lean"):
            answer = view_class.lean(request, *match.args, **match.kwargs)
            if answer is not None:
                return answer
        response = match.func(request, *match.args, **match.kwargs)
        # DRF's Response is a template response, rendered by Django's handler after the view.
        render = getattr(response, "render", None)
        if callable(render):
            response = render()
        return response
