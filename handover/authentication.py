"""Agent runtimes authenticate with a bearer token scoped to one tenant."""

from __future__ import annotations

from django.utils.functional import cached_property
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from journal.models import AgentToken, Tenant


class AgentPrincipal:
    """Stands in for `request.user` when an agent runtime calls: authenticated, never staff,
    and bound to its token's tenant."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    pk = None

    def __init__(self, token: AgentToken) -> None:
        self.token = token

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
        token = (
            AgentToken.objects.select_related("tenant")
            .filter(digest=AgentToken.digest_of(secret), revoked_at__isnull=True)
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked agent token.")
        return AgentPrincipal(token), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
