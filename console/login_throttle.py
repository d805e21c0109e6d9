"""Login throttling's two Seam-side parts (django-axes does the counting and the refusing; see
AXES_* in config/settings/base.py): the audit row a lockout leaves in the locked-out person's
tenant, and the page a locked-out login gets.

A lockout is audited once per cool-off period: axes announces `user_locked_out` at the failure
that reaches the limit and again at every further failure while locked, and the audit trail is for
what happened, not for each knock on the door. A username that is no account, or an account of no
tenant, has no tenant's trail to go to: axes keeps its own record (Admin → Axes → Access attempts,
superusers) and the warning is logged."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
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
        audit_record(
            user=user,
            tenant=tenant,
            action=AuditAction.LOGIN_LOCKED_OUT,
            new={"ip_address": ip_address, "failures": failures, "locked_minutes": _cool_off_minutes()},
            note=f"{failures} failed logins from {ip_address}: this address may not log in as "
            f"{user.get_username()} for {_cool_off_minutes()} minutes after the last failure.",
            request_id=request_id_of(request),
        )


def login_locked_out_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """The page a locked-out login gets (settings.AXES_LOCKOUT_CALLABLE), the console's or the
    admin's: 429, with when to try again."""
    return render(
        request,
        "registration/locked_out.html",
        {"minutes": _cool_off_minutes(), "failure_limit": settings.AXES_FAILURE_LIMIT},
        status=429,
    )
