"""Staff pages. Each view finds the caller's tenant, calls selectors or one service, and renders
one template; an htmx request gets the named partial of the same template. Every change is an
action of the registry (handover.staff_actions): the action view looks it up, checks its
permission, binds its form and calls its service (handover.actions or handover.dead_letters),
which checks the role again, refuses stale state and writes the audit row; these views only
translate forms and errors."""

from __future__ import annotations

import csv
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import reswap, retarget
from django_htmx.middleware import HtmxDetails

from journal.models import OutcomeReason, Run, RunStatus
from journal.services import JournalError

from . import actions, forms, selectors, staff_actions
from .audit import state_json
from .handover import handover_build, handover_rows, run_state_token
from .models import AuditAction, tenant_helpdesk_template
from .staff import request_tenant, staff_context
from .timeline import timeline_of

RUNS_PER_PAGE = 50
REASON_LABELS = {**dict(OutcomeReason.choices), "run_stuck": "Stuck: the agent went quiet"}


def _reason_label(reason: str) -> str:
    return REASON_LABELS.get(reason, reason.replace("_", " "))


AUDIT_PER_PAGE = 100
# Stands in for a run's id when a page's per-row links are reversed once (see _run_url).
_URL_PLACEHOLDER = uuid.UUID(int=0)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


# --- the queue --------------------------------------------------------------------------------


def _queue_query(request: HttpRequest) -> forms.QueueQueryForm:
    # An action posted from the queue carries the queue's filters in its form (hx-include).
    return forms.QueueQueryForm(request.POST if request.method == "POST" else request.GET)


def _queue_filters(form: forms.QueueQueryForm) -> selectors.QueueFilters:
    """The filters of a valid query; after an action posted from the queue with filters that are
    not, the queue as it stands unfiltered (the action itself was done)."""
    if not form.is_valid():
        return selectors.QueueFilters()
    data = form.cleaned_data
    return selectors.QueueFilters(
        task_type=data["task_type"],
        reason=data["reason"],
        status=data["status"],
        assignee=data["assignee"],
        q=data["q"],
        sort=data["sort"],
    )


def _refused_query(form: Any) -> list[str]:
    """What is wrong with a page's query parameters, each message naming its parameter."""
    return [message for errors in form.errors.values() for message in errors]


@login_required
@require_GET
def queue(request: HtmxHttpRequest) -> HttpResponse:
    return _queue(request)


def _run_url(name: str, *args: Any) -> Callable[[Any], str]:
    """A run's URL of `name`, reversed once per page instead of once per row: a page of 50 runs
    with two links each spent ~7% of its time in `{% url %}` (bench/profiles.py)."""
    before, after = reverse(name, args=[_URL_PLACEHOLDER, *args]).split(str(_URL_PLACEHOLDER))
    return lambda run_id: f"{before}{run_id}{after}"


def _queue(request: HtmxHttpRequest, *, status: int = 200, **extra: Any) -> HttpResponse:
    """Escalated and stuck runs, nearest deadline (or oldest) first, with counts per reason; with
    a search, every run of the tenant whose ticket or order id matches."""
    tenant = selectors.staff_tenant(user=request.user)
    context: dict[str, Any] = {"tenant": tenant, "helpdesk": tenant_helpdesk_template(tenant), **extra}
    query = _queue_query(request)
    if request.method == "GET" and not query.is_valid():
        # 400 naming the parameter; the page is drawn without runs rather than guessing a filter.
        context |= {"refused": _refused_query(query), "filters": selectors.QueueFilters()}
        status = 400
    elif tenant is not None:
        now = timezone.now()
        filters = _queue_filters(query)
        runs = selectors.queue_runs(tenant=tenant, user=request.user, filters=filters, now=now)
        page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
        assign = staff_actions.action_get(staff_actions.Kind.RUN, "assign")
        detail_url, assign_url = _run_url("handover:run_detail"), _run_url("handover:run_act", "assign")
        counts = selectors.queue_counts(tenant=tenant, user_id=request.user.pk, now=now)
        since = query.cleaned_data.get("since") if query.is_valid() else None
        context |= {
            "page": page,
            "rows": [(run, detail_url(run.pk), assign_url(run.pk)) for run in page.object_list],
            # The queue offers the registry's assign, to those its permission allows.
            "assign": assign if assign and request.user.has_perm(assign.permission) else None,
            "filters": filters,
            "counts": [(reason, _reason_label(reason), n) for reason, n in counts.by_reason.items()],
            "mine_count": counts.mine,
            "reasons": list(REASON_LABELS.items()),
            "statuses": RunStatus.choices,
            # The queue's own task types (plus the one filtered on, so the filter stays shown).
            "task_types": sorted(
                {*selectors.queue_task_types(tenant=tenant, now=now), filters.task_type} - {""}
            ),
            "query": _query_without(request, "page", "since"),
            "now": now,
            # The open page's first draw; each poll counts the escalations that arrived since.
            "since": since or now,
            "new_escalations": selectors.escalations_since(tenant=tenant, since=since) if since else 0,
        }
        if not (request.htmx and not request.htmx.boosted) and context["assign"]:
            # The bulk controls sit outside the polled results: only the full page draws them.
            context["colleagues"] = selectors.assignable_staff(tenant=tenant)
    template = (
        "handover/queue.html#results" if request.htmx and not request.htmx.boosted else "handover/queue.html"
    )
    return render(request, template, context, status=status)


def _query_without(request: HttpRequest, *names: str) -> str:
    """The page's query string without `names` (for links that set them again)."""
    query = request.GET.copy()
    for name in names:
        query.pop(name, None)
    return query.urlencode()


@login_required
@require_GET
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    """Every run of the tenant, newest first; with `q`, those whose ticket or order id matches."""
    tenant = selectors.staff_tenant(user=request.user)
    search = forms.RunSearchForm(request.GET)
    template = "handover/run_list.html#runs" if request.htmx else "handover/run_list.html"
    if not search.is_valid():
        context: dict[str, Any] = {"tenant": tenant, "page": None, "refused": _refused_query(search), "q": ""}
        return render(request, template, context, status=400)
    q = search.cleaned_data["q"]
    runs = selectors.runs_listed(tenant=tenant, q=q) if tenant else None
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page")) if runs is not None else None
    context = {
        "tenant": tenant,
        "page": page,
        "q": q,
        "query": _query_without(request, "page"),
        "helpdesk": tenant_helpdesk_template(tenant),
    }
    return render(request, template, context)


@login_required
@require_POST
def run_bulk(request: HtmxHttpRequest) -> HttpResponse:
    """Assign or resolve the runs ticked in the queue (handover.actions.runs_bulk): the queue
    comes back with what became of each run, the refused ones with their reason."""
    if not request.user.has_perm(actions.ACT):
        raise PermissionDenied("Your role does not allow this action.")
    ctx = staff_context(request)
    form = forms.BulkRunsForm(request.POST)
    if not form.is_valid():
        return _queue(request, status=400, bulk_refused=_refused_query(form))
    data = form.cleaned_data
    try:
        outcomes = actions.runs_bulk(
            ctx, action=data["action"], runs=data["run"], assignee_id=data["colleague"], note=data["note"]
        )
    except JournalError as error:
        return _queue(request, status=error.status_code, bulk_refused=[error.message])
    return _queue(request, bulk_report=outcomes)


# --- one run ----------------------------------------------------------------------------------


def _run_context(run: Run, request: HttpRequest, **extra: Any) -> dict[str, Any]:
    # The run's rows load once per request; everything the page shows is drawn from them.
    rows = handover_rows(run)
    handover = handover_build(rows)
    # Whether Resume can work, and if not why, by the action's own rules (no extra query).
    resume = actions.resume_preview(run, rows)
    page = staff_actions.RunPage(run=run, rows=rows, handover=handover, resume=resume, user=request.user)
    return {
        "run": run,
        "rows": rows,
        "handover": handover,
        "resume": resume,
        "state": handover.state,
        "reason_label": _reason_label(handover.reason),
        "events": rows.events,
        "audit": rows.audit,
        "intents": rows.intents,
        "offers": staff_actions.run_offers(page),
        "helpdesk": tenant_helpdesk_template(run.tenant),
        "timeline": timeline_of(rows),
        **extra,
    }


def _run_or_404(request: HttpRequest, run_id: Any) -> Run:
    run = selectors.run_get_for_page(tenant=request_tenant(request), run_id=run_id)
    if run is None:
        raise Http404("No such run.")
    return run


@login_required
@require_GET
def run_detail(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    run = _run_or_404(request, run_id)
    return render(request, "handover/run_detail.html", _run_context(run, request))


@login_required
@require_GET
def run_panel(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """The live part of the run page, polled while it is open: 204 (nothing to swap) when the
    run is as the page shows it, so an idle page costs three small queries."""
    run = _run_or_404(request, run_id)
    if request.GET.get("state") and request.GET["state"] == run_state_token(run):
        return HttpResponse(status=204)
    return render(request, "handover/run_detail.html#panel", _run_context(run, request))


# --- actions (handover.staff_actions) --------------------------------------------------------


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
    }


def _form_kwargs(entry: staff_actions.StaffAction, run: Run) -> dict[str, Any]:
    return entry.form_kwargs(run) if entry.form_kwargs else {}


@login_required
@require_GET
def run_confirm(request: HtmxHttpRequest, run_id: str, action: str) -> HttpResponse:
    """The confirmation of an action: exactly what will happen, what cannot be taken back."""
    entry = permitted_action(staff_actions.Kind.RUN, action, request.user)
    run = _run_or_404(request, run_id)
    context = _run_context(run, request)
    step_id = request.GET.get("step", "")
    form = entry.form(initial={"state": context["state"], "step_id": step_id}, **_form_kwargs(entry, run))
    context |= _dialog(entry, context, step_id, form)
    return render(request, "handover/run_detail.html#confirm", context)


class FormRefused:
    """A form's refusal, shown where a service's refusal (JournalError) is: each message names
    its field."""

    status_code = 400

    def __init__(self, form: Any) -> None:
        self.messages = [message for errors in form.errors.values() for message in errors]
        self.message = "; ".join(self.messages)


@login_required
@require_POST
def run_act(request: HtmxHttpRequest, run_id: str, action: str) -> HttpResponse:
    entry = permitted_action(staff_actions.Kind.RUN, action, request.user)
    ctx = staff_context(request)
    run = _run_or_404(request, run_id)
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
        context = _run_context(run, request, error=error, changes=getattr(error, "changes", None))
        if request.htmx:
            response = render(request, "handover/run_detail.html#refused", context, status=error.status_code)
            return reswap(retarget(response, "#dialog"), "innerHTML")
        return render(request, "handover/run_detail.html", context, status=error.status_code)
    if request.htmx and request.POST.get("from") == "queue":
        return _queue(request)
    if request.htmx:
        run = _run_or_404(request, run_id)
        context = _run_context(run, request, flash=entry.done_message)
        return render(request, "handover/run_detail.html#panel", context)
    return redirect("handover:run_detail", run_id=run.pk)


# --- the audit trail --------------------------------------------------------------------------


def _audit_filters(request: HttpRequest) -> selectors.AuditFilters:
    get = request.GET
    return selectors.AuditFilters(
        person=get.get("person", "")[:150],
        run=get.get("run", "")[:100],
        action=get.get("action", "")[:40],
        since=parse_date(get.get("since", "")) if get.get("since") else None,
        until=parse_date(get.get("until", "")) if get.get("until") else None,
    )


@login_required
@permission_required("handover.view_audit_trail", raise_exception=True)
@require_GET
def audit(request: HtmxHttpRequest) -> HttpResponse:
    tenant = request_tenant(request)
    filters = _audit_filters(request)
    entries = selectors.audit_entries(tenant=tenant, filters=filters)
    page = Paginator(entries, AUDIT_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "filters": filters,
        "actions": AuditAction.choices,
        "people": selectors.tenant_staff(tenant=tenant),
        "query": request.GET.urlencode(),
    }
    template = "handover/audit.html#entries" if request.htmx else "handover/audit.html"
    return render(request, template, context)


class _Echo:
    def write(self, value: str) -> str:
        return value


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
def audit_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The filtered audit trail as CSV, streamed so a long trail never sits in memory."""
    entries = selectors.audit_entries(tenant=request_tenant(request), filters=_audit_filters(request))
    writer = csv.writer(_Echo())

    def rows() -> Any:
        yield writer.writerow(AUDIT_COLUMNS)
        for e in entries.iterator(chunk_size=1000):
            yield writer.writerow(
                [
                    e.seq,
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
            )

    response = StreamingHttpResponse(rows(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="seam-audit-{timezone.localdate():%Y%m%d}.csv"'
    return response
