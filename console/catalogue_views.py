"""The catalogue editor's pages, for admins: one entry's edit form, its preview (an htmx partial:
what the draft would do to the tool's recorded receipts and to the open runs) and its save.
Support staff and team leads read the catalogue only (403 here); another tenant's entry is not
found (404). The logic is console.catalogue_editor's; these views parse, call it, render."""

from __future__ import annotations

import json
from typing import Any

from django import forms as django_forms
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from compensations.models import CatalogueEntry, Reversibility
from handover import words
from journal.errors import JournalError
from observability.middleware import request_id_of

from . import catalogue_editor as editor
from .staff import request_tenant
from .views import HtmxHttpRequest

EDIT_PERMISSION = "compensations.change_catalogueentry"


class CatalogueEntryForm(django_forms.Form):
    """An admin's draft of one entry; `seen` is the entry_token of the entry the page showed."""

    compensating_tool = django_forms.CharField(required=False, max_length=100, label="Undo tool")
    argument_mapping = django_forms.CharField(
        required=False,
        max_length=4000,
        label="Argument mapping",
        widget=django_forms.Textarea(attrs={"rows": 4}),
    )
    reversibility = django_forms.ChoiceField(choices=Reversibility.choices, label="Reversibility")
    until_condition = django_forms.CharField(required=False, max_length=200, label="Until")
    deadline_field = django_forms.CharField(
        required=False, max_length=100, label="Deadline field of the receipt"
    )
    loss = django_forms.CharField(required=False, max_length=200, label="Lost when undone late or partly")
    staff_notes = django_forms.CharField(
        required=False,
        max_length=4000,
        label="Notes for staff",
        widget=django_forms.Textarea(attrs={"rows": 2}),
    )
    note = django_forms.CharField(required=False, max_length=1000, label="Why (kept in the audit trail)")
    seen = django_forms.CharField(required=False, max_length=100, widget=django_forms.HiddenInput)

    def __init__(self, *args: Any, tool: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tool = tool
        self.draft: editor.Draft | None = None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        try:
            mapping = editor.parse_mapping(data.get("argument_mapping", ""))
        except JournalError as error:
            self.add_error(error.field, error.message)
            return data
        draft = editor.Draft(
            tool=self.tool,
            compensating_tool=data["compensating_tool"].strip(),
            argument_mapping=mapping,
            reversibility=data["reversibility"],
            until_condition=data["until_condition"],
            deadline_field=data["deadline_field"].strip(),
            loss=data["loss"],
            staff_notes=data["staff_notes"],
        )
        for name, message in editor.draft_problems(draft).items():
            self.add_error(name, message)
        self.draft = None if self.errors else draft
        return data


class Refusal:
    """A refused draft, each message naming its field by the form's label (shown where a
    service's refusal, a JournalError, is)."""

    status_code = 400

    def __init__(self, form: django_forms.Form) -> None:
        self.messages = [
            f"{form.fields[name].label if name in form.fields else ''}: {message}".lstrip(": ")
            for name, errors in form.errors.items()
            for message in errors
        ]
        self.message = "; ".join(self.messages)


def _initial(entry: CatalogueEntry) -> dict[str, Any]:
    fields = editor.Draft.of(entry).fields()
    fields["argument_mapping"] = json_text(fields["argument_mapping"])
    return {**fields, "seen": editor.entry_token(entry)}


def json_text(mapping: dict[str, Any]) -> str:
    return json.dumps(mapping, indent=1, ensure_ascii=False)


def _page(request: HtmxHttpRequest, entry_id: int) -> tuple[Any, CatalogueEntry, CatalogueEntry]:
    tenant = request_tenant(request)
    entry = editor.entry_for_editing(tenant=tenant, entry_id=entry_id)
    return tenant, entry, editor.entry_shown(tenant=tenant, entry=entry, user=request.user)


def _context(
    entry: CatalogueEntry, shown: CatalogueEntry, form: CatalogueEntryForm, user: Any, **extra: Any
) -> dict[str, Any]:
    return {
        "entry": entry,
        "shown": shown,
        "form": form,
        "editing_default": editor.editing_default(entry, user),
        **extra,
    }


@login_required
@permission_required(EDIT_PERMISSION, raise_exception=True)
@require_http_methods(["GET", "POST"])
def catalogue_edit(request: HtmxHttpRequest, entry_id: int) -> HttpResponse:
    """GET: the form, filled from the entry that governs the tool for the person's tenant.
    POST: save (400 naming the field on bad input, 409 if the entry changed since; nothing saved)."""
    tenant, entry, shown = _page(request, entry_id)
    if request.method == "GET":
        form = CatalogueEntryForm(initial=_initial(shown), tool=entry.tool)
        flash = str(words.CATALOGUE_SAVED) if request.GET.get("saved") else ""
        return render(
            request, "handover/catalogue_edit.html", _context(entry, shown, form, request.user, flash=flash)
        )
    form = CatalogueEntryForm(request.POST, tool=entry.tool)
    if not form.is_valid() or form.draft is None:
        context = _context(entry, shown, form, request.user, error=Refusal(form))
        return render(request, "handover/catalogue_edit.html", context, status=400)
    try:
        editor.catalogue_entry_save(
            actor=request.user,
            tenant=tenant,
            entry_id=entry.pk,
            draft=form.draft,
            seen=form.cleaned_data["seen"],
            note=form.cleaned_data["note"],
            request_id=request_id_of(request),
        )
    except JournalError as error:
        context = _context(entry, shown, form, request.user, error=error)
        return render(request, "handover/catalogue_edit.html", context, status=error.status_code)
    # Back to the form, drawn from what was saved, saying so.
    return redirect(f"{reverse('handover:catalogue_edit', args=[entry.pk])}?saved=1")


@login_required
@permission_required(EDIT_PERMISSION, raise_exception=True)
@require_POST
def catalogue_preview(request: HtmxHttpRequest, entry_id: int) -> HttpResponse:
    """The edit form's preview, for its htmx swap: what the posted draft would do. Bad input is
    a 400 naming the field; nothing is ever written here."""
    tenant, entry, _shown = _page(request, entry_id)
    form = CatalogueEntryForm(request.POST, tool=entry.tool)
    if not form.is_valid() or form.draft is None:
        return render(request, "handover/_catalogue_preview.html", {"error": Refusal(form)}, status=400)
    preview = editor.catalogue_preview(tenant=tenant, draft=form.draft)
    return render(
        request,
        "handover/_catalogue_preview.html",
        {"preview": preview, "draft": form.draft, "entry": entry, "receipts_read": editor.RECEIPTS_READ},
    )
