"""Agent runtimes authenticate with a bearer token scoped to one tenant.

The token is checked on every request (a revoked token is refused from its next request on).
When the URL names a run, and a step of it, the token and them are read in one query
(journal.selectors.agent_call_get): the views take the run and the intent from the principal
instead of asking again, so the journal's two hot requests pay one round trip, not three, for
authentication and tenant scoping."""

from __future__ import annotations

from django.utils.functional import cached_property
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from journal.models import AgentToken, Intent, Run, Tenant
from journal.selectors import AgentCall, agent_call_get, agent_token_get


class AgentPrincipal:
    """Stands in for `request.user` when an agent runtime calls: authenticated, never staff,
    and bound to its token's tenant."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    pk = None

    def __init__(self, token: AgentToken, call: AgentCall | None = None) -> None:
        self.token = token
        # The run (and step) the URL named, read with the token; None for other URLs.
        self.call = call

    def run_named(self, run_id: str) -> tuple[bool, Run | None]:
        """(whether the run `run_id` was read with the token, that run or None if none is)."""
        call = self.call
        if call is None or call.run_id != run_id:
            return False, None
        return True, call.run

    def intent_named(self, run_id: str, step_id: str) -> tuple[bool, Intent | None]:
        call = self.call
        if call is None or call.run_id != run_id or call.step_id != step_id:
            return False, None
        return True, call.intent

    @cached_property
    def tenant(self) -> Tenant:
        return self.token.tenant

    def get_username(self) -> str:
        return self.token.name

    def __str__(self) -> str:
        return f"agent:{self.token.name}"


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[AgentPrincipal, AgentToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        secret = secret.strip()
        if not secret:
            raise exceptions.AuthenticationFailed("Authorization header has no token after 'Bearer'.")
        digest = AgentToken.digest_of(secret)
        # The URL's own arguments (DRF's parser context holds the view's kwargs).
        named = (request.parser_context or {}).get("kwargs") or {}
        call = None
        if isinstance(named.get("run_id"), str):
            step_id = named.get("step_id")
            call = agent_call_get(
                digest=digest, run_id=named["run_id"], step_id=step_id if isinstance(step_id, str) else None
            )
            token = call.token if call is not None else None
        else:
            token = agent_token_get(digest=digest)
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked agent token.")
        return AgentPrincipal(token, call), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
