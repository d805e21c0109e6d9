"""Staff pages. Each view finds the caller's tenant, calls one selector and renders one template;
an htmx request gets the named partial of the same template."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from . import selectors
from .models import RunStatus

RUNS_PER_PAGE = 50


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


@login_required
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    tenant = selectors.tenant_for_user(request.user)
    runs = selectors.runs_with_counts(tenant=tenant) if tenant else None
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page")) if runs is not None else None
    template = "handover/run_list.html#runs" if request.htmx else "handover/run_list.html"
    return render(request, template, {"tenant": tenant, "page": page, "RunStatus": RunStatus})


@login_required
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    tenant = selectors.tenant_for_user(request.user)
    run = selectors.run_get_with_journal(tenant=tenant, run_id=run_id) if tenant else None
    if run is None:
        raise Http404("No such run.")
    return render(request, "handover/run_detail.html", {"run": run})
