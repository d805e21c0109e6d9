"""The insights page for team leads and admins: six charts of how the tenant's runs went over a
period, each with a table of the same numbers beside it and a CSV of them. Support staff are
refused (403): the page shows every person's actions from the audit trail, which is what the
audit permission guards. Bad filters are a 400 naming the field, and nothing is computed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from console.csv_export import csv_streaming_response
from console.dates import DateInput, LocaleDateField, LocaleDateForm, date_input_for
from console.staff import request_tenant
from console.views import HtmxHttpRequest
from journal.models import Tenant

from . import errors, recoveries
from . import selectors as insights
from .charts import Chart, chart_build

PERMISSION = "handover.view_audit_trail"


class InsightsFilterForm(LocaleDateForm):
    # Typed in the person's date order or ISO (console.dates).
    since = LocaleDateField(name="since")
    until = LocaleDateField(name="until")
    task_type = forms.SlugField(required=False, max_length=64)

    def __init__(self, data: Mapping[str, Any], *, today: date, date_input: DateInput | None = None) -> None:
        super().__init__(data, date_input=date_input)
        self.today = today

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        default_since, default_until = insights.default_period(today=self.today)
        since = cleaned.get("since") or default_since
        until = cleaned.get("until") or default_until
        if not cleaned.get("since") and cleaned.get("until"):
            since = until - (default_until - default_since)
        if since > until:
            self.add_error("until", "The end of the period is before its start.")
        elif (until - since).days + 1 > insights.MAX_PERIOD_DAYS:
            self.add_error("since", f"The period is longer than {insights.MAX_PERIOD_DAYS} days.")
        cleaned["since"], cleaned["until"] = since, until
        return cleaned

    def filters(self) -> insights.InsightsFilters:
        data = self.cleaned_data
        return insights.InsightsFilters(since=data["since"], until=data["until"], task_type=data["task_type"])

    def messages(self) -> list[str]:
        """Each refusal with the field it is about: "since: Enter a valid date."."""
        return [f"{field}: {message}" for field, errors in self.errors.items() for message in errors]


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    note: str
    breakdown: insights.Breakdown
    chart: Chart


@dataclass(frozen=True)
class PanelSpec:
    title: str
    note: str
    select: Callable[[Tenant, insights.InsightsFilters], insights.Breakdown]


PANELS: dict[str, PanelSpec] = {
    "escalations": PanelSpec(
        "Escalations per day, by reason",
        "Runs handed to a person, by the day they were handed over.",
        lambda tenant, f: insights.escalations_per_day(tenant=tenant, filters=f),
    ),
    "why": PanelSpec(
        "Why a machine could not finish",
        "Escalations opened in the period, by the reason a machine stopped and handed the run to a person.",
        lambda tenant, f: recoveries.escalations_by_why(tenant=tenant, filters=f),
    ),
    "recoveries": PanelSpec(
        "Picked up after a crash, per task type",
        "Runs a machine picked up after their agent stopped (a call settled by reconciliation, or a "
        "dead-run decision): finished by a machine, or handed to a person, with the hours people had them.",
        lambda tenant, f: recoveries.recoveries_per_task_type(tenant=tenant, filters=f),
    ),
    "recoveries-per-tool": PanelSpec(
        "Picked up after a crash, per tool",
        "The same runs, per tool of the calls reconciliation settled.",
        lambda tenant, f: recoveries.recoveries_per_tool(tenant=tenant, filters=f),
    ),
    "errors": PanelSpec(
        "Retries, repairs and replans, per task type",
        "Of the runs started in the period, per run: retries, repairs and replans (the larger of what "
        "the calls show and what the agent reported), reflections and escalations as reported; and "
        "the runs stopped for looping on a failing call.",
        lambda tenant, f: errors.errors_per_task_type(tenant=tenant, filters=f),
    ),
    "errors-per-tool": PanelSpec(
        "Retries, repairs and replans, per tool",
        "The same runs, per tool: per run that called it, the calls made again, repaired, or replanned "
        "after its conflict; its failed calls, their commonest class, and the loops it was part of.",
        lambda tenant, f: errors.errors_per_tool(tenant=tenant, filters=f),
    ),
    "error-classes": PanelSpec(
        "Error classes",
        "The classes the calls of the runs started in the period failed with, the commonest first.",
        lambda tenant, f: errors.error_classes(tenant=tenant, filters=f),
    ),
    "resolve-time": PanelSpec(
        "Time to resolve, per week",
        "Hours from escalated to resolved, of the escalations resolved each week.",
        lambda tenant, f: insights.time_to_resolve_per_week(tenant=tenant, filters=f),
    ),
    "unknown-outcomes": PanelSpec(
        "Unknown outcomes, per tool",
        "Calls whose outcome reconciliation could not find out, and how many still wait for a person.",
        lambda tenant, f: insights.unknown_outcomes_per_tool(tenant=tenant, filters=f),
    ),
    "compensations": PanelSpec(
        "Compensations: done, partial, failed",
        "Undo actions requested in the period, per tool undone; failed ones went to the dead-letter queue.",
        lambda tenant, f: insights.compensations_by_outcome(tenant=tenant, filters=f),
    ),
    "dead-letters": PanelSpec(
        "Dead letters open, by age",
        "Failed undo actions still open now, whatever the period, by how long they have waited.",
        lambda tenant, f: insights.dead_letters_open_by_age(
            tenant=tenant, task_type=f.task_type, now=timezone.now()
        ),
    ),
    "actions": PanelSpec(
        "Actions per person",
        "What each person did in the period, from the audit trail.",
        lambda tenant, f: insights.actions_per_person(tenant=tenant, filters=f),
    ),
}


def _panel(key: str, tenant: Tenant, filters: insights.InsightsFilters) -> Panel:
    spec = PANELS[key]
    breakdown = spec.select(tenant, filters)
    return Panel(key, spec.title, spec.note, breakdown, chart_build(breakdown, key=key, title=spec.title))


@login_required
@permission_required(PERMISSION, raise_exception=True)
@require_GET
def insights_page(request: HtmxHttpRequest) -> HttpResponse:
    tenant = request_tenant(request)
    form = InsightsFilterForm(request.GET, today=timezone.localdate(), date_input=date_input_for(request))
    context: dict[str, object] = {
        "form": form,
        "date_input": form.date_input,
        "task_types": insights.insights_task_types(tenant=tenant),
    }
    status = 200
    if form.is_valid():
        filters = form.filters()
        context |= {
            "filters": filters,
            "panels": [_panel(key, tenant, filters) for key in PANELS],
            "query": request.GET.urlencode(),
        }
    else:
        context["refusals"] = form.messages()
        status = 400
    template = "insights/insights.html#panels" if request.htmx else "insights/insights.html"
    return render(request, template, context, status=status)


@login_required
@permission_required(PERMISSION, raise_exception=True)
@require_GET
def insights_csv(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """One chart's table as CSV (`chart` names it), under the page's filters."""
    tenant = request_tenant(request)
    form = InsightsFilterForm(request.GET, today=timezone.localdate(), date_input=date_input_for(request))
    key = request.GET.get("chart", "")
    refusals = [] if form.is_valid() else form.messages()
    if key not in PANELS:
        refusals.append(f"chart: choose one of {', '.join(PANELS)}.")
    if refusals:
        return HttpResponse("\n".join(refusals) + "\n", status=400, content_type="text/plain; charset=utf-8")
    filters = form.filters()
    breakdown = PANELS[key].select(tenant, filters)
    return csv_streaming_response(
        filename=f"seam-insights-{key}-{filters.since:%Y%m%d}-{filters.until:%Y%m%d}.csv",
        header=[breakdown.row_heading, *(column.label for column in breakdown.columns)],
        rows=([row.label, *row.values] for row in breakdown.rows),
    )
