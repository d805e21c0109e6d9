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

from journal.events import Caller
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


KEYWORD = "Bearer"


def bearer_secret(header: str) -> str | None:
    """The secret of an `Authorization: Bearer <secret>` header ("" when nothing follows the
    keyword), or None when the header is absent or of another scheme."""
    scheme, _, secret = header.partition(" ")
    if not header or scheme.lower() != KEYWORD.lower():
        return None
    return secret.strip()


def agent_principal(secret: str, *, run_id: str | None, step_id: str | None = None) -> AgentPrincipal | None:
    """The principal of a live token with this secret, with the run (and step) the URL names
    read beside it when it names one; None for an unknown or revoked token."""
    digest = AgentToken.digest_of(secret)
    if run_id is None:
        token = agent_token_get(digest=digest)
        return AgentPrincipal(token) if token is not None else None
    call = agent_call_get(digest=digest, run_id=run_id, step_id=step_id)
    return AgentPrincipal(call.token, call) if call is not None else None


# The callers an agent token's calls about a run were answered for, by (token digest, run id).
# The next intent or outcome about that run asserts its caller in the journal's own statement
# (journal.services.intent_record_as_caller) rather than reading the token and the run first: a
# hint, never trusted, since the statement checks every part of it against the rows it writes
# by (a revoked token writes nothing from its next request on, as before). Bounded: an agent
# fleet's open runs, emptied when full rather than ordered, since a miss costs one read.
_CALLERS: dict[tuple[str, str], Caller] = {}
MAX_REMEMBERED_CALLERS = 4096


def caller_remembered(secret: str, run_id: str) -> Caller | None:
    """The caller a request with this token about run `run_id` was last answered for, if any."""
    return _CALLERS.get((AgentToken.digest_of(secret), run_id))


def caller_remember(principal: AgentPrincipal, run: Run) -> None:
    """Remember the caller a request of `principal` about `run` was just answered for."""
    token = principal.token
    if len(_CALLERS) >= MAX_REMEMBERED_CALLERS:
        _CALLERS.clear()
    _CALLERS[(token.digest, str(run.pk))] = Caller(
        digest=token.digest,
        token_name=token.name,
        key_namespace=principal.tenant.key_namespace,
        run_pk=run.pk,
        policy_version=run.policy_version,
        run_created_at=run.created_at,
    )


def caller_forget(caller: Caller) -> None:
    """Forget a caller the journal found not to be as remembered (or whose call it refused)."""
    _CALLERS.pop((caller.digest, str(caller.run_pk)), None)


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = KEYWORD

    def authenticate(self, request: Request) -> tuple[AgentPrincipal, AgentToken] | None:
        secret = bearer_secret(authentication.get_authorization_header(request).decode("latin-1"))
        if secret is None:
            return None
        if not secret:
            raise exceptions.AuthenticationFailed("Authorization header has no token after 'Bearer'.")
        # The URL's own arguments (DRF's parser context holds the view's kwargs).
        named = (request.parser_context or {}).get("kwargs") or {}
        run_id, step_id = named.get("run_id"), named.get("step_id")
        principal = agent_principal(
            secret,
            run_id=run_id if isinstance(run_id, str) else None,
            step_id=step_id if isinstance(step_id, str) else None,
        )
        if principal is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked agent token.")
        return principal, principal.token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
