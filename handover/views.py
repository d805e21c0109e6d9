"""Staff pages. Each view finds the caller's tenant, calls selectors or one service, and renders
one template; an htmx request gets the named partial of the same template. Every change goes
through handover.actions (or handover.dead_letters), which check the role, refuse stale state
and write the audit row; these views only translate forms and errors."""

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

from journal import selectors as journal_selectors
from journal.models import CustomerMessage, OutcomeReason, Run, RunStatus
from journal.services import JournalError

from . import actions, selectors
from .audit import state_json
from .handover import handover_build, handover_rows, run_state_token
from .models import AuditAction
from .staff import request_tenant, staff_context

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


def _queue_filters(request: HttpRequest) -> selectors.QueueFilters:
    # An action posted from the queue carries the queue's filters in its form (hx-include).
    get = request.POST if request.method == "POST" else request.GET
    return selectors.QueueFilters(
        task_type=get.get("task_type", "")[:64],
        reason=get.get("reason", "")[:40],
        status=get.get("status", "")[:20],
        assignee=get.get("assignee", "")[:150],
        q=get.get("q", "")[:100],
        sort="oldest" if get.get("sort") == "oldest" else "deadline",
    )


@login_required
@require_GET
def queue(request: HtmxHttpRequest) -> HttpResponse:
    return _queue(request)


def _run_url(name: str, *args: Any) -> Callable[[Any], str]:
    """A run's URL of `name`, reversed once per page instead of once per row: a page of 50 runs
    with two links each spent ~7% of its time in `{% url %}` (bench/profiles.py)."""
    before, after = reverse(name, args=[_URL_PLACEHOLDER, *args]).split(str(_URL_PLACEHOLDER))
    return lambda run_id: f"{before}{run_id}{after}"


def _queue(request: HtmxHttpRequest) -> HttpResponse:
    """Escalated and stuck runs, nearest deadline (or oldest) first, with counts per reason."""
    tenant = journal_selectors.tenant_for_user(request.user)
    context: dict[str, Any] = {"tenant": tenant}
    if tenant is not None:
        now = timezone.now()
        filters = _queue_filters(request)
        runs = selectors.queue_runs(tenant=tenant, user=request.user, filters=filters, now=now)
        page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
        detail_url, assign_url = _run_url("handover:run_detail"), _run_url("handover:run_act", "assign")
        context |= {
            "page": page,
            "rows": [(run, detail_url(run.pk), assign_url(run.pk)) for run in page.object_list],
            "can_act": request.user.has_perm(actions.ACT),
            "filters": filters,
            "counts": [
                (reason, _reason_label(reason), n)
                for reason, n in selectors.queue_reason_counts(tenant=tenant, now=now).items()
            ],
            "reasons": list(REASON_LABELS.items()),
            "statuses": RunStatus.choices,
            # The queue's own task types (plus the one filtered on, so the filter stays shown).
            "task_types": sorted(
                {*selectors.queue_task_types(tenant=tenant, now=now), filters.task_type} - {""}
            ),
            "query": request.GET.urlencode(),
            "now": now,
        }
    template = (
        "handover/queue.html#results" if request.htmx and not request.htmx.boosted else "handover/queue.html"
    )
    return render(request, template, context)


@login_required
@require_GET
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    tenant = journal_selectors.tenant_for_user(request.user)
    runs = journal_selectors.runs_with_counts(tenant=tenant) if tenant else None
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page")) if runs is not None else None
    template = "handover/run_list.html#runs" if request.htmx else "handover/run_list.html"
    return render(request, template, {"tenant": tenant, "page": page, "RunStatus": RunStatus})


# --- one run ----------------------------------------------------------------------------------


def _run_context(run: Run, request: HttpRequest, **extra: Any) -> dict[str, Any]:
    rows = handover_rows(run)
    handover = handover_build(rows)
    return {
        "run": run,
        "handover": handover,
        # Whether Resume can work, and if not why, by the action's own rules (no extra query).
        "resume": actions.resume_preview(run, rows),
        "state": handover.state,
        "reason_label": _reason_label(handover.reason),
        "events": rows.events,
        "audit": rows.audit,
        "intents": rows.intents,
        "can_act": request.user.has_perm(actions.ACT),
        "channels": CustomerMessage.Channel.choices,
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


# --- actions ----------------------------------------------------------------------------------

Action = Callable[[actions.StaffContext, Run, HttpRequest], Any]

ACTIONS: dict[str, Action] = {
    "assign": lambda ctx, run, r: actions.run_assign(ctx, run_id=run.pk, state=r.POST.get("state", "")),
    "compensate-step": lambda ctx, run, r: actions.step_compensate(
        ctx, run_id=run.pk, step_id=r.POST.get("step_id", ""), state=r.POST.get("state", "")
    ),
    "compensate-run": lambda ctx, run, r: actions.run_compensate_request(
        ctx, run_id=run.pk, state=r.POST.get("state", "")
    ),
    "resume": lambda ctx, run, r: actions.run_resume_request(
        ctx, run_id=run.pk, state=r.POST.get("state", "")
    ),
    "retry-lookup": lambda ctx, run, r: actions.step_lookup_retry(
        ctx, run_id=run.pk, step_id=r.POST.get("step_id", ""), state=r.POST.get("state", "")
    ),
    "mark-performed": lambda ctx, run, r: actions.step_mark(
        ctx,
        run_id=run.pk,
        step_id=r.POST.get("step_id", ""),
        performed=True,
        note=r.POST.get("note", ""),
        state=r.POST.get("state", ""),
    ),
    "mark-not-performed": lambda ctx, run, r: actions.step_mark(
        ctx,
        run_id=run.pk,
        step_id=r.POST.get("step_id", ""),
        performed=False,
        note=r.POST.get("note", ""),
        state=r.POST.get("state", ""),
    ),
    "customer-told": lambda ctx, run, r: actions.customer_told_add(
        ctx,
        run_id=run.pk,
        channel=r.POST.get("channel", ""),
        body=r.POST.get("body", ""),
        state=r.POST.get("state", ""),
    ),
    "resolve": lambda ctx, run, r: actions.run_resolve(
        ctx, run_id=run.pk, note=r.POST.get("note", ""), state=r.POST.get("state", "")
    ),
}

DONE_MESSAGES = {
    "assign": "The run is assigned to you.",
    "compensate-step": "Compensation requested; the page updates when the worker has done it.",
    "compensate-run": "Compensation of the run requested; the page updates as each step is undone.",
    "resume": "Resumption requested; the page updates as the steps are sent.",
    "retry-lookup": "Lookup requested; the page updates when the downstream answers.",
    "mark-performed": "Marked performed.",
    "mark-not-performed": "Marked not performed.",
    "customer-told": "Recorded what the customer was told.",
    "resolve": "Resolved.",
}


@login_required
@require_GET
def run_confirm(request: HtmxHttpRequest, run_id: str, action: str) -> HttpResponse:
    """The confirmation of an action: exactly what will happen, what cannot be taken back."""
    if action not in ACTIONS:
        raise Http404("No such action.")
    if not request.user.has_perm(actions.ACT):
        raise PermissionDenied("Your role does not allow acting on runs.")
    run = _run_or_404(request, run_id)
    context = _run_context(run, request, action=action)
    context["confirm"] = actions.confirmation(run, action=action, step_id=request.GET.get("step", ""))
    return render(request, "handover/run_detail.html#confirm", context)


@login_required
@require_POST
def run_act(request: HtmxHttpRequest, run_id: str, action: str) -> HttpResponse:
    if action not in ACTIONS:
        raise Http404("No such action.")
    ctx = staff_context(request)
    run = _run_or_404(request, run_id)
    try:
        ACTIONS[action](ctx, run, request)
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
        context = _run_context(run, request, flash=DONE_MESSAGES[action])
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
