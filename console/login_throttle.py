"""Login throttling's Seam-side parts. django-axes records the failures and refuses; this module
says whose address a request comes from, what counts as too many, for how long, the page a
locked-out login gets, the audit row a lockout leaves in the locked-out person's tenant, and the
admin's unlock (issue 20, item 4; issue 33, item 5).

- **The address** (`client_address`, settings.AXES_CLIENT_IP_CALLABLE) is the connection's,
  unless SEAM_TRUSTED_PROXY_COUNT says how many proxies of ours stand in front: then it is the
  entry of X-Forwarded-For that the outermost of them wrote, counted from the right, where a
  client cannot forge it. Behind a load balancer without it, every client has the balancer's
  address, and one address's failures would lock a username out for everyone.
- **Two limits** (`SeamLoginHandler`): SEAM_LOGIN_FAILURE_LIMIT wrong passwords for one username
  from one address lock that pair out; SEAM_LOGIN_ADDRESS_FAILURE_LIMIT from one address, over
  any usernames, lock the address out (password spraying), each for SEAM_LOGIN_COOLOFF_MINUTES
  after the last failure.
- **A person's usual address**, one they have signed in from before (axes' access log), is
  locked out for SEAM_LOGIN_USUAL_ADDRESS_COOLOFF_MINUTES only: someone else's failures from a
  shared address (an office's, a VPN's) keep them out for minutes, not a quarter of an hour. An
  admin lets a person in at once with the people admin's action (`login_unlock`, audited).

A lockout is audited once per cool-off period: axes announces `user_locked_out` at the failure
that reaches the limit and again at every further failure while locked, and the audit trail is for
what happened, not for each knock on the door. A username that is no account, or an account of no
tenant, has no tenant's trail to go to: axes keeps its own record (Admin → Axes → Access attempts,
superusers) and the warning is logged; so is an address's lockout, which is no one account's."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt, AccessLog
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from audit.chain import audit_record
from audit.models import AuditAction, AuditEntry
from journal import selectors as journal_selectors
from observability.middleware import request_id_of

log = logging.getLogger(__name__)


def _cool_off_minutes() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)


# --- whose address --------------------------------------------------------------------------


def client_address(request: HttpRequest) -> str | None:
    """The address a login comes from (settings.AXES_CLIENT_IP_CALLABLE). With no trusted proxy
    (SEAM_TRUSTED_PROXY_COUNT=0) it is the connection's and X-Forwarded-For is never read: anyone
    can send one. With N, it is X-Forwarded-For's N-th entry from the right: each of our proxies
    appends the address it was connected from, so the outermost wrote that entry, and whatever a
    client put before it is ignored. A header with fewer entries than N, or an entry that is no
    address, is not ours: the connection's address stands."""
    remote = request.META.get("REMOTE_ADDR")
    count = settings.SEAM_TRUSTED_PROXY_COUNT
    if count < 1:
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    if len(hops) < count:
        return remote
    try:
        return str(ipaddress.ip_address(hops[-count]))
    except ValueError:
        return remote


# --- how many, for how long -----------------------------------------------------------------


@dataclass(frozen=True)
class Lockout:
    """A refusal: of one username from one address (`account`) or of an address (`address`),
    lasting `minutes` after the last failure, after `limit` failures."""

    kind: str
    minutes: int
    limit: int


def usual_address(username: str | None, address: str | None) -> bool:
    """Whether the person has signed in from this address before (axes' access log)."""
    return (
        bool(username and address)
        and AccessLog.objects.filter(username=username, ip_address=address).exists()
    )


def _window(username: str | None, address: str | None) -> timedelta:
    if usual_address(username, address):
        return timedelta(minutes=settings.SEAM_LOGIN_USUAL_ADDRESS_COOLOFF_MINUTES)
    return settings.AXES_COOLOFF_TIME


def _failures(since: Any, **match: Any) -> int:
    found = AccessAttempt.objects.filter(attempt_time__gte=since, **match).aggregate(
        n=Sum("failures_since_start")
    )
    return int(found["n"] or 0)


def lockout_of(username: str | None, address: str | None) -> Lockout | None:
    """The lockout standing against this username from this address, if any: its own failures
    first, then the address's over every username."""
    window = _window(username, address)
    since, minutes = timezone.now() - window, int(window.total_seconds() // 60)
    limit = settings.AXES_FAILURE_LIMIT
    if username is not None and _failures(since, username=username, ip_address=address) >= limit:
        return Lockout("account", minutes, limit)
    limit = settings.SEAM_LOGIN_ADDRESS_FAILURE_LIMIT
    if _failures(since, ip_address=address) >= limit:
        return Lockout("address", minutes, limit)
    return None


class SeamLoginHandler(AxesDatabaseHandler):
    """axes' database handler (settings.AXES_HANDLER) with Seam's limits: a username's failures
    from an address are counted over that pair's window (short from a usual address), and an
    address is refused once its failures over every username reach their own limit."""

    def get_failures(self, request: Any, credentials: dict[str, Any] | None = None) -> int:
        username = get_client_username(request, credentials)
        since = timezone.now() - _window(username, request.axes_ip_address)
        return _failures(since, username=username, ip_address=request.axes_ip_address)

    def is_locked(self, request: Any, credentials: dict[str, Any] | None = None) -> bool:
        request.seam_lockout = lockout_of(get_client_username(request, credentials), request.axes_ip_address)
        return request.seam_lockout is not None

    def user_login_failed(
        self, sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
    ) -> None:
        super().user_login_failed(sender, credentials, request=request, **kwargs)
        if request is None:
            return
        username = get_client_username(request, credentials)
        request.seam_lockout = lockout_of(username, request.axes_ip_address)
        if request.seam_lockout is not None and request.seam_lockout.kind == "address":
            if not request.axes_locked_out:
                log.warning("login locked out: address %s, over every username", request.axes_ip_address)
            request.axes_locked_out = True
            request.axes_credentials = credentials


# --- the admin's unlock ---------------------------------------------------------------------


def login_unlock(*, user: Any, actor: Any, request_id: str = "") -> int:
    """Let `user` sign in again at once: forget the failures counted against their username and
    against the addresses they failed from (so an address's lockout no longer holds them
    either), with a `login_unlocked` audit row in their tenant (the actor's, for a person of no
    tenant). Returns the number of failure records forgotten."""
    username = user.get_username()
    addresses = sorted(
        {a for a in AccessAttempt.objects.filter(username=username).values_list("ip_address", flat=True) if a}
    )
    tenant = journal_selectors.tenant_for_user(user) or journal_selectors.tenant_for_user(actor)
    with transaction.atomic():
        _, deleted = AccessAttempt.objects.filter(Q(username=username) | Q(ip_address__in=addresses)).delete()
        cleared = deleted.get(AccessAttempt._meta.label, 0)
        if tenant is None:
            log.warning("login unlocked: %r by %s (no tenant's trail: not audited)", username, actor)
            return cleared
        audit_record(
            user=actor,
            tenant=tenant,
            action=AuditAction.LOGIN_UNLOCKED,
            old={"addresses": addresses, "failure_records": cleared},
            new={"username": username},
            note=f"{actor.get_username()} let {username} sign in again, forgetting {cleared} records of "
            f"failed logins from {', '.join(addresses) or 'no address'}.",
            request_id=request_id,
        )
    return cleared


def login_username(request: HttpRequest, credentials: dict[str, Any] | None = None) -> str | None:
    """The username failures are counted under (settings.AXES_USERNAME_CALLABLE): as typed, without
    NUL characters and cut to the longest a username can be. Django's login form does not enforce
    that length before it authenticates, and axes stores what it is given: an attacker's 10,000
    characters or a NUL would otherwise fail the write and answer 500. No account has a longer
    name, so two such guesses sharing a counter costs no one anything."""
    field = get_user_model().USERNAME_FIELD
    source: Any = credentials if credentials else getattr(request, "data", request.POST)
    username = source.get(field) if source else None
    if username is None:
        return None
    limit = getattr(get_user_model()._meta.get_field(field), "max_length", None) or 150
    return str(username).replace("\x00", "")[:limit]


def login_locked_out_audit(
    sender: Any, *, request: HttpRequest, username: str | None, ip_address: str, **_: Any
) -> None:
    """Receiver of axes' `user_locked_out`: one `login_locked_out` audit row in the account's
    tenant, naming the address and the number of failures."""
    user = get_user_model()._default_manager.filter(username=username).first() if username else None
    tenant = journal_selectors.tenant_for_user(user) if user is not None else None
    if user is None or tenant is None:
        log.warning("login locked out: %r from %s (no tenant's account: not audited)", username, ip_address)
        return
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    with transaction.atomic():
        if AuditEntry.objects.filter(
            action=AuditAction.LOGIN_LOCKED_OUT, user=user, at__gte=since, new_state__ip_address=ip_address
        ).exists():
            return
        failures = getattr(request, "axes_failures_since_start", settings.AXES_FAILURE_LIMIT)
        minutes = int(_window(username, ip_address).total_seconds() // 60)
        audit_record(
            user=user,
            tenant=tenant,
            action=AuditAction.LOGIN_LOCKED_OUT,
            new={"ip_address": ip_address, "failures": failures, "locked_minutes": minutes},
            note=f"{failures} failed logins from {ip_address}: this address may not log in as "
            f"{user.get_username()} for {minutes} minutes after the last failure.",
            request_id=request_id_of(request),
        )


def login_locked_out_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """The page a locked-out login gets (settings.AXES_LOCKOUT_CALLABLE), the console's or the
    admin's: 429, with which lockout and when to try again."""
    lockout = getattr(request, "seam_lockout", None) or Lockout(
        "account", _cool_off_minutes(), settings.AXES_FAILURE_LIMIT
    )
    return render(
        request,
        "registration/locked_out.html",
        {"minutes": lockout.minutes, "failure_limit": lockout.limit, "kind": lockout.kind},
        status=429,
    )
