"""Who a staff page acts for: the tenant of the logged-in person, and the StaffContext every
action service takes (person, tenant, request id). Shared by the handover and compensations
pages."""

from __future__ import annotations

from django.http import Http404, HttpRequest

from journal import selectors as journal_selectors
from journal.models import Tenant
from observability.middleware import request_id_of

from .actions import StaffContext


def request_tenant(request: HttpRequest) -> Tenant:
    """The person's tenant; a person without one sees nothing (404, like another tenant's run)."""
    tenant = journal_selectors.tenant_for_user(request.user)
    if tenant is None:
        raise Http404("Your account belongs to no tenant.")
    return tenant


def staff_context(request: HttpRequest) -> StaffContext:
    # The request id the middleware settled on (the caller's X-Request-ID, or a new one), so the
    # audit row, the log lines and the response header carry the same id.
    return StaffContext(user=request.user, tenant=request_tenant(request), request_id=request_id_of(request))
