"""Staff pages. Each view finds the caller's tenant, calls selectors or one service, and renders
one template; an htmx request gets the named partial of the same template. Every change is an
action of the registry (console.staff_actions): the action view looks it up, checks its
permission, binds its form and calls its service (console.actions or console.dead_letters),
which checks the role again, refuses stale state and writes the audit row; these views only
translate forms and errors."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from django import forms as django_forms
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import reswap, retarget
from django_htmx.middleware import HtmxDetails

from audit.models import AuditAction
from handover import (
    HANDOVER_LIST_LIMIT,
    handover_build,
    handover_cut,
    handover_rows,
    run_events,
    run_state_token,
    words,
)
from journal.models import Run
from journal.services import JournalError
from retention.selectors import archived_run_of

from . import actions, dates, forms, selectors, staff_actions
from .audit_reading import state_json
from .csv_export import csv_streaming_response
from .models import tenant_helpdesk_template
from .staff import request_tenant, staff_context
from .timeline import timeline_of

RUNS_PER_PAGE = 50
REASON_LABELS = dict(forms.QUEUE_REASONS)


def _reason_label(reason: str) -> str:
    return REASON_LABELS.get(reason, reason.replace("_", " "))


AUDIT_PER_PAGE = 100
# Stands in for a run's id when a page's per-row links are reversed once (see _run_url).
_URL_PLACEHOLDER = uuid.UUID(int=0)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


# --- parameters -------------------------------------------------------------------------------


class FormRefused:
    """A form's refusal, shown where a service's refusal (JournalError) is: each message names
    its field."""

    status_code = 400

    def __init__(self, form: Any) -> None:
        self.messages = [message for errors in form.errors.values() for message in errors]
        self.message = "; ".join(self.messages)


class ParametersRefused(Exception):
    """A page's parameters did not parse: answered 400 by `parameters_checked`, before anything
    was read or written."""

    def __init__(self, form: Any) -> None:
        super().__init__(FormRefused(form).message)
        self.refusal = FormRefused(form)


def parameters[FormT: django_forms.Form](form_class: type[FormT], data: Any, **options: Any) -> FormT:
    """The page's parameters, bound to `form_class` (with `options`) and valid, or ParametersRefused."""
    form = form_class(data, **options)
    if not form.is_valid():
        raise ParametersRefused(form)
    return form


def parameters_checked[ViewT: Callable[..., HttpResponseBase]](view: ViewT) -> ViewT:
    """A staff page whose parameters were refused answers 400 with the refusal, each message
    naming its parameter (htmx gets the messages alone, swapped where the answer was due)."""

    @functools.wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except ParametersRefused as refused:
            htmx = getattr(request, "htmx", None)
            template = "handover/refused.html#messages" if htmx else "handover/refused.html"
            return render(request, template, {"error": refused.refusal}, status=400)

    return checked  # type: ignore[return-value]


# --- the queue --------------------------------------------------------------------------------


def _queue_parameters(request: HttpRequest) -> forms.QueueFiltersForm:
    # An action posted from the queue carries the queue's filters in its form (hx-include).
    return parameters(forms.QueueFiltersForm, request.POST if request.method == "POST" else request.GET)


@login_required
@require_GET
@parameters_checked
def queue(request: HtmxHttpRequest) -> HttpResponse:
    return _queue(request, _queue_parameters(request))


class CountedPaginator(Paginator):
    """A paginator told its count when the caller has already read it, so it does not count
    the rows a second time."""

    def __init__(self, object_list: Any, per_page: int, *, count: int | None = None) -> None:
        super().__init__(object_list, per_page)
        if count is not None:
            self.__dict__["count"] = count  # where Paginator.count, a cached_property, keeps it


def _run_url(name: str, *args: Any) -> Callable[[Any], str]:
    """A run's URL of `name`, reversed once per page instead of once per row: a page of 50 runs
    with two links each spent ~7% of its time in `{% url %}` (bench/profiles.py)."""
    before, after = reverse(name, args=[_URL_PLACEHOLDER, *args]).split(str(_URL_PLACEHOLDER))
    return lambda run_id: f"{before}{run_id}{after}"


def _queue(
    request: HtmxHttpRequest, parameters: forms.QueueFiltersForm, *, status: int = 200, **extra: Any
) -> HttpResponse:
    """Escalated and stuck runs, nearest deadline (or oldest) first, with counts per reason and
    the person's own; with a search, every run of the tenant whose ticket or order id matches."""
    tenant = selectors.staff_tenant(user=request.user)
    context: dict[str, Any] = {"tenant": tenant, "helpdesk": tenant_helpdesk_template(tenant), **extra}
    if tenant is not None:
        now = timezone.now()
        filters = parameters.filters()
        runs = selectors.queue_runs(tenant=tenant, user=request.user, filters=filters, now=now)
        counts = selectors.queue_counts(tenant=tenant, user_id=request.user.pk, now=now)
        # The whole queue's length is the sum of its counts per reason, just read: only a
        # narrowed view is counted again.
        paginator = CountedPaginator(runs, RUNS_PER_PAGE, count=None if filters.narrowed else counts.total)
        page = paginator.get_page(parameters.cleaned_data["page"])
        # The registry's actions a row offers (posting at once) and those done to the runs
        # ticked, to those their permission allows.
        permitted = list(staff_actions.permitted(staff_actions.Kind.RUN, request.user))
        on_rows = [(a, _run_url("handover:run_act", a.name)) for a in permitted if a.on_queue_row]
        bulk = [action for action in permitted if action.bulk]
        detail_url = _run_url("handover:run_detail")
        since = parameters.cleaned_data["since"]
        context |= {
            "page": page,
            "rows": [
                (run, detail_url(run.pk), _row_offers(run, request.user, on_rows))
                for run in selectors.queue_rows(page.object_list)
            ],
            "bulk_actions": bulk,
            "filters": filters,
            "counts": [(reason, _reason_label(reason), n) for reason, n in counts.by_reason.items()],
            "mine_count": counts.mine,
            "reasons": list(REASON_LABELS.items()),
            "statuses": forms.QUEUE_STATUSES,
            # The queue's own task types (plus the one filtered on, so the filter stays shown).
            "task_types": sorted({*counts.task_types, filters.task_type} - {""}),
            "query": _query_without(request, "page", "since"),
            "now": now,
            # The open page's first draw; each poll counts the escalations that arrived since.
            "since": since or now,
            "new_escalations": selectors.escalations_since(tenant=tenant, since=since) if since else 0,
        }
        if not (request.htmx and not request.htmx.boosted) and bulk:
            # The bulk controls sit outside the polled results: only the full page draws them.
            context["colleagues"] = selectors.assignable_staff(tenant=tenant)
    template = (
        "handover/queue.html#results" if request.htmx and not request.htmx.boosted else "handover/queue.html"
    )
    return render(request, template, context, status=status)


def _row_offers(
    run: Run, user: Any, on_rows: list[tuple[staff_actions.StaffAction, Callable[[Any], str]]]
) -> list[tuple[staff_actions.StaffAction, str]]:
    """The actions a queue row draws, each with its URL for this run."""
    return [
        (action, url(run.pk))
        for action, url in on_rows
        if action.on_queue_row is not None and action.on_queue_row(run, user)
    ]


def _query_without(request: HttpRequest, *names: str) -> str:
    """The page's query string without `names` (for links that set them again)."""
    query = request.GET.copy()
    for name in names:
        query.pop(name, None)
    return query.urlencode()


@login_required
@require_GET
@parameters_checked
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    """Every run of the tenant, newest first; with `q`, those whose ticket or order id matches."""
    data = parameters(forms.RunListForm, request.GET).cleaned_data
    tenant = selectors.staff_tenant(user=request.user)
    runs = selectors.runs_listed(tenant=tenant, q=data["q"]) if tenant else None
    page = Paginator(runs, RUNS_PER_PAGE).get_page(data["page"]) if runs is not None else None
    template = "handover/run_list.html#runs" if request.htmx else "handover/run_list.html"
    context = {
        "tenant": tenant,
        "page": page,
        "q": data["q"],
        "query": _query_without(request, "page"),
        "helpdesk": tenant_helpdesk_template(tenant),
    }
    return render(request, template, context)


@login_required
@require_POST
@parameters_checked
def run_bulk(request: HtmxHttpRequest) -> HttpResponse:
    """Do one of the registry's bulk actions to the runs ticked in the queue, each run by the
    action's own service (console.staff_actions.runs_bulk): the queue comes back with what
    became of each run, the refused ones with their reason. The queue's filters it carries are
    checked before anything is written."""
    bulk = {
        name: action
        for name, action in staff_actions.bulk_actions().items()
        if request.user.has_perm(action.permission)
    }
    if not bulk:
        raise PermissionDenied("Your role does not allow this action.")
    queue_parameters = _queue_parameters(request)
    ctx = staff_context(request)
    form = forms.BulkRunsForm(request.POST, actions=bulk)
    if not form.is_valid():
        # The queue again with the refusal above it (its results stay, and keep refreshing).
        return _queue(request, queue_parameters, status=400, bulk_refused=FormRefused(form).messages)
    data = form.cleaned_data
    try:
        outcomes = staff_actions.runs_bulk(ctx, bulk[data["action"]], runs=data["run"], data=data)
    except JournalError as error:
        return _queue(request, queue_parameters, status=error.status_code, bulk_refused=[error.message])
    return _queue(request, queue_parameters, bulk_report=outcomes)


# --- one run ----------------------------------------------------------------------------------


# A run's long lists (its steps, calls, events) show their first RUN_PAGE_LIST_LIMIT items (the
# timeline and the audit their newest) and a "show all N" link: a run of 10,000 calls must draw as
# fast as one of ten (bench/pages.py).
RUN_PAGE_LIST_LIMIT = HANDOVER_LIST_LIMIT


def _run_context(run: Run, request: HttpRequest, **extra: Any) -> dict[str, Any]:
    # The run's rows load once per request; everything the page shows is drawn from them.
    show_all = parameters(forms.RunPageForm, request.GET).cleaned_data["all"] == "1"
    limit = None if show_all else RUN_PAGE_LIST_LIMIT
    rows = handover_rows(run, limit=limit)
    handover = handover_build(rows, limit=limit)
    totals = {
        **handover.totals,
        # The steps a cut handover did not build all stand (an undo asked for is always built).
        "standing": sum(1 for step in handover.completed if not step.undone)
        + handover.totals["completed"]
        - len(handover.completed),
        "intents": rows.intent_count,
        "events": rows.event_count,
        "audit": len(rows.audit),
    }
    every_event = (
        replace(rows, events=run_events(run, {i.pk: i for i in rows.intents}, every=True).events)
        if show_all
        else rows
    )
    # What the page draws: the handover with its lists cut to the limit (its buttons are offered
    # for the steps drawn only), the calls in order, the timeline and audit newest last.
    shown = handover_cut(handover, limit)
    # Whether Resume can work, and if not why, by the action's own rules (no extra query).
    resume = actions.resume_preview(run, rows)
    page = staff_actions.RunPage(run=run, rows=rows, handover=shown, resume=resume, user=request.user)
    return {
        "run": run,
        "rows": rows,
        "handover": shown,
        "totals": totals,
        "collapsed": not show_all,
        "run_list_limit": RUN_PAGE_LIST_LIMIT,
        "resume": resume,
        "state": handover.state,
        # What the run did, apart: what still stands, and what was undone (wholly or partly) since.
        "standing": [step for step in shown.completed if not step.undone],
        "undone": [step for step in shown.completed if step.undone],
        "reason_label": _reason_label(handover.reason),
        "audit": rows.audit if show_all else rows.audit[-RUN_PAGE_LIST_LIMIT:],
        "intents": rows.intents[:limit],
        "offers": staff_actions.run_offers(page),
        "helpdesk": tenant_helpdesk_template(run.tenant),
        # The newest events (every one when asked: they are read again for it).
        "timeline": timeline_of(every_event) if show_all else timeline_of(rows)[-RUN_PAGE_LIST_LIMIT:],
        **extra,
    }


def _run_or_404(request: HttpRequest, run_id: Any) -> Run:
    run = selectors.run_get_for_page(tenant=request_tenant(request), run_id=run_id)
    if run is None:
        raise Http404("No such run.")
    return run


ARCHIVED_REFUSAL = "This run is archived: nothing can be done on it any more."


def _archived_page(
    request: HttpRequest, run: Run, *, partial: bool = False, status: int = 200
) -> HttpResponse:
    """An archived run's page: its summary and its archive (retention), never its intents and
    events, which are no longer the journal's; no action is offered. A refused action answers
    409 with the same page (its panel, out of band, for htmx)."""
    context = {
        "run": run,
        "archived": archived_run_of(run),
        "helpdesk": tenant_helpdesk_template(run.tenant),
        "error": ARCHIVED_REFUSAL if status != 200 else None,
        "oob": partial and status != 200,
    }
    template = "handover/run_archived.html#panel" if partial else "handover/run_archived.html"
    return render(request, template, context, status=status)


def _refused_if_archived(request: HtmxHttpRequest, run: Run) -> HttpResponse | None:
    if run.archived_at is None:
        return None
    return _archived_page(request, run, partial=bool(request.htmx), status=409)


@login_required
@require_GET
@parameters_checked
def run_detail(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    run = _run_or_404(request, run_id)
    if run.archived_at is not None:
        return _archived_page(request, run)
    return render(request, "handover/run_detail.html", _run_context(run, request))


@login_required
@require_GET
@parameters_checked
def run_panel(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """The live part of the run page, polled while it is open: 204 (nothing to swap) when the
    run is as the page shows it, so an idle page costs three small queries."""
    state = parameters(forms.RunPanelForm, request.GET).cleaned_data["state"]
    run = _run_or_404(request, run_id)
    if run.archived_at is not None:
        return _archived_page(request, run, partial=True)  # the poll stops: nothing changes again
    if state and state == run_state_token(run):
        return HttpResponse(status=204)
    return render(request, "handover/run_detail.html#panel", _run_context(run, request))


# --- actions (console.staff_actions) --------------------------------------------------------


def permitted_action(kind: staff_actions.Kind, name: str, user: Any) -> staff_actions.StaffAction:
    """The registered action of that name (404 when there is none), if the user's role allows
    it (403 otherwise): the role is checked before the object is looked up."""
    action = staff_actions.action_get(kind, name)
    if action is None:
        raise Http404("No such action.")
    if not user.has_perm(action.permission):
        raise PermissionDenied("Your role does not allow this action.")
    return action


def _dialog(
    action: staff_actions.StaffAction, context: dict[str, Any], step_id: str, form: Any
) -> dict[str, Any]:
    """The confirmation dialog of an action: what it will do, and its form."""
    return {
        "action": action.name,
        "confirm": action.confirmation(context["run"], context["rows"], step_id),
        "form": form,
        "snippet": action.snippet,
    }


def _form_kwargs(entry: staff_actions.StaffAction, run: Run) -> dict[str, Any]:
    return entry.form_kwargs(run) if entry.form_kwargs else {}


@login_required
@require_GET
@parameters_checked
def run_confirm(request: HtmxHttpRequest, run_id: str, action: str) -> HttpResponse:
    """The confirmation of an action: exactly what will happen, what cannot be taken back."""
    entry = permitted_action(staff_actions.Kind.RUN, action, request.user)
    run = _run_or_404(request, run_id)
    if refused := _refused_if_archived(request, run):
        return refused
    step_id = parameters(forms.RunConfirmForm, request.GET).cleaned_data["step"]
    context = _run_context(run, request)
    form = entry.form(initial={"state": context["state"], "step_id": step_id}, **_form_kwargs(entry, run))
    context |= _dialog(entry, context, step_id, form)
    return render(request, "handover/run_detail.html#confirm", context)


@login_required
@require_POST
@parameters_checked
def run_act(request: HtmxHttpRequest, run_id: str, action: str) -> HttpResponse:
    entry = permitted_action(staff_actions.Kind.RUN, action, request.user)
    ctx = staff_context(request)
    run = _run_or_404(request, run_id)
    if refused := _refused_if_archived(request, run):
        return refused
    # Everything posted is parsed before anything is written: an action from the queue draws the
    # queue again afterwards, so the queue's filters it carries are checked first, not after the
    # action committed.
    from_queue = parameters(forms.RunActFromForm, request.POST).cleaned_data["from"] == "queue"
    queue_parameters = _queue_parameters(request) if from_queue else None
    form = entry.form(request.POST, **_form_kwargs(entry, run))
    if not form.is_valid():
        # 400 with the form kept: the dialog again, the refused fields marked; nothing written.
        context = _run_context(run, request, error=FormRefused(form))
        step_id = form.cleaned_data.get("step_id", "")
        context |= _dialog(entry, context, step_id, form)
        if request.htmx:
            response = render(request, "handover/run_detail.html#confirm", context, status=400)
            return reswap(retarget(response, "#dialog"), "innerHTML")
        return render(request, "handover/run_detail.html", context, status=400)
    try:
        entry.perform(ctx, run, form.cleaned_data)
    except JournalError as error:
        run = _run_or_404(request, run_id)
        changes = getattr(error, "changes", None)
        context = _run_context(run, request, error=error, changes=changes)
        if request.htmx and from_queue:
            return _queue_refused(request, context, status=error.status_code)
        if request.htmx and changes is not None:
            return _changed_dialog(request, entry, run, context, status=error.status_code)
        if request.htmx:
            response = render(request, "handover/run_detail.html#refused", context, status=error.status_code)
            return reswap(retarget(response, "#dialog"), "innerHTML")
        return render(request, "handover/run_detail.html", context, status=error.status_code)
    if request.htmx and queue_parameters is not None:
        return _queue(request, queue_parameters)
    if request.htmx:
        was_unassigned = run.assignee_id is None
        run = _run_or_404(request, run_id)
        context = _run_context(run, request, flash=_done_message(entry, run, request.user, was_unassigned))
        return render(request, "handover/run_detail.html#panel", context)
    return redirect("handover:run_detail", run_id=run.pk)


@login_required
@require_POST
@parameters_checked
def run_preview(request: HtmxHttpRequest, run_id: str, action: str) -> HttpResponse:
    """The dialog of an action that shows what the typed values change before they are saved
    (StaffAction.previews): drawn again with them, its form checked and nothing written. 400 with
    the refused fields marked and what was typed kept."""
    entry = permitted_action(staff_actions.Kind.RUN, action, request.user)
    if not entry.previews:
        raise Http404("This action has no preview.")
    run = _run_or_404(request, run_id)
    if refused := _refused_if_archived(request, run):
        return refused
    form = entry.form(request.POST, previewing=True, **_form_kwargs(entry, run))
    valid = form.is_valid()
    context = _run_context(run, request, **({} if valid else {"error": FormRefused(form)}))
    context |= _dialog(entry, context, request.POST.get("step_id", ""), form)
    status = 200 if valid else 400
    if request.htmx:
        response = render(request, "handover/run_detail.html#confirm", context, status=status)
        return reswap(retarget(response, "#dialog"), "innerHTML")
    return render(request, "handover/run_detail.html", context, status=status)


def _done_message(entry: staff_actions.StaffAction, run: Run, user: Any, was_unassigned: bool) -> str:
    """The action's own message, and, when the run nobody had became the person's by it
    (console.claiming), that too: the Assignee beside it changed without being asked."""
    claimed = was_unassigned and run.assignee_id == user.pk and not entry.name.startswith("assign")
    return f"{entry.done_message} {words.NOW_YOURS}" if claimed else entry.done_message


def _changed_dialog(
    request: HtmxHttpRequest,
    entry: staff_actions.StaffAction,
    run: Run,
    context: dict[str, Any],
    *,
    status: int,
) -> HttpResponse:
    """Refused because the run changed while its dialog was open: the dialog again, for the run
    as it is now (its state token the new one), what changed said once above it and what was
    typed kept in its fields, so a second try needs no retyping (templates/handover/dialogs.html)."""
    data = request.POST.copy()
    data["state"] = context["state"]
    form = entry.form(data, **_form_kwargs(entry, run))
    form.is_valid()  # bound: its fields show what was typed (it was valid when posted)
    context |= _dialog(entry, context, data.get("step_id", ""), form)
    context["kept"] = [f for f in form.visible_fields() if f.widget_type == "textarea" and f.value()]
    response = render(request, "handover/dialogs.html#changed", context, status=status)
    return reswap(retarget(response, "#dialog"), "innerHTML")


def _queue_refused(request: HtmxHttpRequest, context: dict[str, Any], *, status: int) -> HttpResponse:
    """An action of a queue's row refused: why in the dialog, what changed said once, and the
    queue's results asked to redraw at once (the event seam-queue-changed) with the run as it is."""
    response = render(request, "handover/dialogs.html#queue_refused", context, status=status)
    response["HX-Trigger"] = "seam-queue-changed"
    return reswap(retarget(response, "#dialog"), "innerHTML")


# --- the audit trail --------------------------------------------------------------------------


@login_required
@permission_required("handover.view_audit_trail", raise_exception=True)
@require_GET
@parameters_checked
def audit(request: HtmxHttpRequest) -> HttpResponse:
    tenant = request_tenant(request)
    date_input = dates.date_input_for(request)
    form = parameters(forms.AuditFiltersForm, request.GET, date_input=date_input)
    filters = form.filters()
    entries = selectors.audit_entries(tenant=tenant, filters=filters)
    page = Paginator(entries, AUDIT_PER_PAGE).get_page(form.cleaned_data["page"])
    context = {
        "page": page,
        "filters": filters,
        "date_input": date_input,
        "actions": AuditAction.choices,
        "people": selectors.tenant_staff(tenant=tenant),
        "query": request.GET.urlencode(),
        # The export takes the filters on the page, never its page number.
        "export_query": _without(request.GET.copy(), "page"),
        "verification": selectors.audit_verification_shown(tenant=tenant, now=timezone.now()),
    }
    template = "handover/audit.html"
    if request.htmx:
        template += "#verification" if request.htmx.target == "verification" else "#entries"
    return render(request, template, context)


def _without(query: Any, name: str) -> str:
    query.pop(name, None)
    return str(query.urlencode())


@login_required
@permission_required("handover.view_audit_trail", raise_exception=True)
@require_POST
def audit_verify(request: HtmxHttpRequest) -> HttpResponse:
    """Check the audit chain again (queued for the worker); the page shows the check waiting,
    then its result."""
    ctx = staff_context(request)
    actions.audit_verification_request(ctx)
    if request.htmx:
        context = {"verification": selectors.audit_verification_shown(tenant=ctx.tenant, now=timezone.now())}
        return render(request, "handover/audit.html#verification", context)
    return redirect("handover:audit")


AUDIT_COLUMNS = [
    "seq",
    "at",
    "username",
    "action",
    "run",
    "ticket_id",
    "step_id",
    "old_state",
    "new_state",
    "note",
    "request_id",
    "hash",
]


@login_required
@permission_required("handover.view_audit_trail", raise_exception=True)
@require_GET
@parameters_checked
def audit_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The filtered audit trail as CSV, streamed so a long trail never sits in memory."""
    date_input = dates.date_input_for(request)
    filters = parameters(forms.AuditFiltersForm, request.GET, date_input=date_input).filters()
    entries = selectors.audit_entries(tenant=request_tenant(request), filters=filters)
    rows = (
        [
            e.tenant_seq,
            e.at.isoformat(),
            e.username,
            e.action,
            e.run_id or "",
            e.run.ticket_id if e.run else "",
            e.step_id,
            state_json(e.old_state),
            state_json(e.new_state),
            e.note,
            e.request_id,
            e.hash,
        ]
        for e in entries.iterator(chunk_size=1000)
    )
    return csv_streaming_response(
        filename=f"seam-audit-{timezone.localdate():%Y%m%d}.csv", header=AUDIT_COLUMNS, rows=rows
    )
