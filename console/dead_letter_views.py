"""Staff pages of compensations: the dead-letter queue (take, assign, retry, resolve) and
the catalogue, readable by all staff (admins edit it in the Django admin). The actions are the
registry's (console.staff_actions), which calls console.dead_letters; these views bind the
action's form and translate its errors."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from django import forms as django_forms
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from compensations.models import Compensation, DeadLetter
from compensations.selectors import catalogue_for
from journal import selectors as journal_selectors
from journal.services import JournalError

from . import dead_letters as letter_actions
from . import forms, selectors, staff_actions
from .staff import request_tenant, staff_context
from .views import FormRefused, HtmxHttpRequest, parameters, parameters_checked, permitted_action


class LetterStateForm(django_forms.Form):
    """The state a page showed: of one letter with an action on it (DeadLetter.state_token), or
    of the page's letters on its poll (console.dead_letters.letters_state_token)."""

    state = django_forms.CharField(required=False, max_length=100, strip=False)


def _dead_letters_context(
    request: HttpRequest,
    *,
    refused: tuple[int, staff_actions.StaffAction] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The page's letters, each with the actions the person may take on it (from the registry);
    `refused` is (letter id, action) of a refused form, drawn again as it was posted."""
    tenant = request_tenant(request)
    data = request.GET if request.method == "GET" else request.POST
    show = parameters(forms.DeadLettersForm, data).cleaned_data["show"] or "open"
    letters = list(selectors.dead_letters_for(tenant=tenant, show=show)[:200])
    history = selectors.dead_letter_history(tenant=tenant, letter_ids=[letter.pk for letter in letters])
    # The people a letter may be handed to: read once, if a form drawn on the page asks for them.
    staff = functools.cache(lambda: list(selectors.tenant_staff(tenant=tenant)))

    def offers(letter: DeadLetter) -> list[staff_actions.Offer]:
        page = staff_actions.LetterPage(letter=letter, user=request.user, people=staff)
        if refused is not None and refused[0] == letter.pk:
            page = replace(page, refused_action=refused[1], refused_data=request.POST)
        return staff_actions.dead_letter_offers(page)

    return {
        "letters": [(letter, history.get(letter.pk, []), offers(letter)) for letter in letters],
        "show": show,
        "page_state": letter_actions.letters_state_token(
            selectors.dead_letters_for(tenant=tenant, show=show)
        ),
        **extra,
    }


@login_required
@require_GET
@parameters_checked
def dead_letters(request: HtmxHttpRequest) -> HttpResponse:
    """The queue; polled while open (every few seconds), answering 204 while nothing changed."""
    if request.htmx:
        seen = parameters(LetterStateForm, request.GET).cleaned_data["state"]
        show = parameters(forms.DeadLettersForm, request.GET).cleaned_data["show"] or "open"
        letters = selectors.dead_letters_for(tenant=request_tenant(request), show=show)
        if seen and seen == letter_actions.letters_state_token(letters):
            return HttpResponse(status=204)
    template = "handover/dead_letters.html#letters" if request.htmx else "handover/dead_letters.html"
    return render(request, template, _dead_letters_context(request))


@login_required
@require_POST
@parameters_checked
def dead_letter_act(request: HtmxHttpRequest, dead_letter_id: int, action: str) -> HttpResponse:
    entry = permitted_action(staff_actions.Kind.DEAD_LETTER, action, request.user)
    ctx = staff_context(request)
    # The page drawn afterwards reads `show` from the post: checked before the action is done.
    parameters(forms.DeadLettersForm, request.POST)
    template = "handover/dead_letters.html#letters" if request.htmx else "handover/dead_letters.html"
    form = entry.form(request.POST)
    if not form.is_valid():
        # 400, nothing written, the refused form drawn on its letter with what was posted.
        refused = (dead_letter_id, entry)
        return render(
            request,
            template,
            _dead_letters_context(request, refused=refused, error=FormRefused(form)),
            status=400,
        )
    seen = parameters(LetterStateForm, request.POST).cleaned_data["state"]
    try:
        result = entry.perform(ctx, dead_letter_id, {**form.cleaned_data, "state": seen})
    except JournalError as error:
        changes = getattr(error, "changes", [])
        context = _dead_letters_context(request, error=error, changes=changes)
        return render(request, template, context, status=error.status_code)
    # An honest answer: a retry that ran and failed again says so, with the error.
    said = letter_actions.retry_result_words(result) if isinstance(result, Compensation) else ""
    flash = said or entry.done_message
    if request.htmx:
        return render(
            request, "handover/dead_letters.html#letters", _dead_letters_context(request, flash=flash)
        )
    return redirect("handover:dead_letters")


@login_required
@permission_required("compensations.view_catalogueentry", raise_exception=True)
@require_GET
def catalogue(request: HttpRequest) -> HttpResponse:
    # The catalogue that governs this person's tenant: its own entries where it has them, else the
    # defaults (a person of no tenant sees the defaults).
    tenant = journal_selectors.tenant_for_user(request.user)
    entries = list(catalogue_for(tenant_id=tenant.pk if tenant else None).values())
    return render(
        request,
        "handover/catalogue.html",
        {"entries": entries, "can_edit": request.user.has_perm("compensations.change_catalogueentry")},
    )
