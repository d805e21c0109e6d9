"""Staff pages of compensations: the dead-letter queue (take, assign, retry, resolve) and
the catalogue, readable by all staff (admins edit it in the Django admin). Changes go through
handover.dead_letters; these views translate forms and errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from compensations.models import CatalogueEntry
from journal.services import JournalError

from . import dead_letters as actions
from . import selectors
from .staff import request_tenant, staff_context
from .views import HtmxHttpRequest

DeadLetterAction = Callable[[Any, Any, HttpRequest], Any]

DEAD_LETTER_ACTIONS: dict[str, DeadLetterAction] = {
    "take": lambda ctx, pk, r: actions.dead_letter_take(ctx, dead_letter_id=pk),
    "assign": lambda ctx, pk, r: actions.dead_letter_assign(
        ctx, dead_letter_id=pk, owner_id=r.POST.get("owner", "")
    ),
    "retry": lambda ctx, pk, r: actions.dead_letter_retry(
        ctx, dead_letter_id=pk, note=r.POST.get("note", "")
    ),
    "resolve": lambda ctx, pk, r: actions.dead_letter_resolve(
        ctx, dead_letter_id=pk, note=r.POST.get("note", "")
    ),
}


def _dead_letters_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    tenant = request_tenant(request)
    show = request.GET.get("show", "open") if request.method == "GET" else request.POST.get("show", "open")
    letters = list(selectors.dead_letters_for(tenant=tenant, show=show)[:200])
    history = selectors.dead_letter_history(tenant=tenant, letter_ids=[letter.pk for letter in letters])
    return {
        "letters": [(letter, history.get(letter.pk, [])) for letter in letters],
        "show": show,
        "staff": selectors.tenant_staff(tenant=tenant) if request.user.has_perm(actions.ASSIGN) else [],
        **extra,
    }


@login_required
@require_GET
def dead_letters(request: HtmxHttpRequest) -> HttpResponse:
    template = (
        "compensations/dead_letters.html#letters" if request.htmx else "compensations/dead_letters.html"
    )
    return render(request, template, _dead_letters_context(request))


@login_required
@require_POST
def dead_letter_act(request: HtmxHttpRequest, dead_letter_id: int, action: str) -> HttpResponse:
    if action not in DEAD_LETTER_ACTIONS:
        return HttpResponse("No such action.", status=404)
    try:
        DEAD_LETTER_ACTIONS[action](staff_context(request), dead_letter_id, request)
    except JournalError as error:
        context = _dead_letters_context(request, error=error)
        template = (
            "compensations/dead_letters.html#letters" if request.htmx else "compensations/dead_letters.html"
        )
        return render(request, template, context, status=error.status_code)
    if request.htmx:
        return render(
            request, "compensations/dead_letters.html#letters", _dead_letters_context(request, flash="Done.")
        )
    return redirect("compensations:dead_letters")


@login_required
@permission_required("compensations.view_catalogueentry", raise_exception=True)
@require_GET
def catalogue(request: HttpRequest) -> HttpResponse:
    entries = CatalogueEntry.objects.order_by("tool")
    return render(
        request,
        "compensations/catalogue.html",
        {"entries": entries, "can_edit": request.user.has_perm("compensations.change_catalogueentry")},
    )
