"""Fuzzing of the staff console (docs/reliability.md, "Bad input and access").

The console's URLs are read from the resolver (every pattern whose view is a page of
console.views or console.dead_letter_views, and the login page), so a page added later is
fuzzed without a line here. Path parameters are real objects of the personas' tenant: a run
with an open and a performed step, and an open dead letter; `<slug:action>` is each registered
action of its kind and one that does not exist. Each URL is sent, by GET and by POST, as each
persona (support staff, a team lead, an admin of tenant sundry, support staff of acme):

- every parameter any staff page or action reads, all at once, set to each hostile value (NUL,
  impossible dates, digits of other scripts, huge strings, negative and overflowing numbers);
- then seeded random mixtures of hostile values and valid ones (the run's current state token,
  its real step ids, a real owner), so that requests get past the first check and reach the
  actions' services.

Two properties hold for every request: no answer is a 5xx, and a refused one (status >= 400)
writes nothing: the row count of every table, the sum of the runs' versions and the dead
letters' owners are the same after it as before. The figures are printed at the end of the run."""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django import forms as django_forms
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.db import connection
from django.db import models as dj_models
from django.test import Client, RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from compensations.models import CatalogueEntry, Compensation, CompensationStatus, DeadLetter, Reversibility
from console import forms, staff_actions
from console.models import NotificationRule, TenantSettings
from fanout.models import FanOut, FanOutBranch
from handover import run_state_token
from journal import services
from journal.models import AgentToken, CustomerMessage, Escalation, Run, Tenant
from journal.tenant_admin import TenantScopedAdmin
from reconciliation.models import Strategy, TaskPolicy
from tests import factories
from tests.security.figures import ADMIN_FUZZ, PAGE_FUZZ

# About 3,500 requests to the console and 8,900 to the admin (under two minutes): in `make chaos`,
# which CI runs after `make test`.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chaos]

PERSONAS = {"support": "support_staff", "lead": "team_lead", "admin": "admin", "outsider": "support_staff"}
CONSOLE_NAMESPACES = {"handover", "compensations"}
# Parameters a page reads outside a form's fields (a CSV export's chart name).
LOOSE_PARAMETERS = {"from", "chart"}
# Hostile values: each is sent in every parameter at once, and mixed at random below.
HOSTILE = [
    "\x00",
    "a\x00b",
    "2026-02-30",
    "9999-12-31T23:59:59",
    "٣",  # ARABIC-INDIC DIGIT THREE: int() reads it as 3
    "²",  # SUPERSCRIPT TWO: isdigit() but not a number to int()
    "\uff13",  # FULLWIDTH DIGIT THREE
    "-1",
    "99999999999999999999999",
    "1e400",
    "x" * 20_000,
    "é" * 600,
    "",
]
RANDOM_MIXES = 5  # per URL, method and persona
SEED = 20


def console_routes(
    patterns: list[Any] | None = None, prefix: str = "", console: bool = False
) -> Iterator[tuple[str, Any]]:
    """(route, view) of every staff page and action the resolver knows (the `handover` and
    `compensations` namespaces), and the login page."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            inside = console or pattern.namespace in CONSOLE_NAMESPACES
            yield from console_routes(pattern.url_patterns, prefix + str(pattern.pattern), inside)
        else:
            assert isinstance(pattern, URLPattern)
            route = prefix + str(pattern.pattern)
            if console or route == "accounts/login/":
                yield route, pattern.callback


def parameter_names(views: list[Any]) -> list[str]:
    """Every parameter a staff page or action reads: the fields of every form of console.forms
    (the pages' parameters and the actions' forms) and of the views' own modules."""
    modules = [forms, *(sys.modules[view.__module__] for view in views)]
    names = set(LOOSE_PARAMETERS)
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, django_forms.BaseForm):
                names |= set(getattr(value, "base_fields", {}))
    return sorted(names)


def table_state() -> tuple[Any, ...]:
    """Every table's row count, the runs' versions and the dead letters' owners, in one query:
    what a refused request must leave as it was."""
    tables = sorted(
        {m._meta.db_table for m in apps.get_models() if m._meta.managed and not m._meta.proxy}
        & set(connection.introspection.table_names())
    )
    # Table names from the models, quoted: nothing here comes from a request.
    counts = ", ".join(f"(SELECT count(*) FROM {connection.ops.quote_name(t)})" for t in tables)  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {counts}, (SELECT coalesce(sum(version), 0) FROM journal_run),"  # noqa: S608
            " (SELECT string_agg(coalesce(owner_id, 0)::text, ',' ORDER BY id)"
            "  FROM compensations_deadletter),"
            " (SELECT string_agg(coalesce(assignee_id, 0)::text, ',' ORDER BY id) FROM journal_run)"
        )
        row = cursor.fetchone()
    assert row is not None
    return tuple(row)


def _world(persona: Any, tenant: Any, other_tenant: Any) -> tuple[Run, list[str], DeadLetter, dict[str, Any]]:
    actor = services.Actor.agent("returns-bot")
    run = factories.run_via_service(tenant=tenant, actor=actor)
    open_step = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=actor
    ).intent
    done = services.intent_record(run=run, tool="reserve", args={"sku": "B-1"}, turn=2, actor=actor).intent
    services.outcome_record(intent=done, ok=True, receipt={"reservation": "R-1"}, actor=actor)
    users = {
        name: persona(role, other_tenant if name == "outsider" else tenant, username=f"fuzz-{name}")
        for name, role in PERSONAS.items()
    }
    compensation = Compensation.objects.create(original=done, status=CompensationStatus.DEAD_LETTERED)
    letter = DeadLetter.objects.create(
        compensation=compensation, error_class="permanent", error="refused", attempts=5, owner=users["lead"]
    )
    return run, [open_step.step_id, done.step_id], letter, users


def urls_of(route: str, run: Run, letter: DeadLetter) -> list[str]:
    """The route's URLs: its path parameters filled with real objects (each registered action,
    and one that does not exist, for `<slug:action>`; an id past any integer for a letter)."""
    kind = staff_actions.Kind.DEAD_LETTER if route.startswith("dead-letters/") else staff_actions.Kind.RUN
    slugs = [a.name for a in staff_actions.actions_of(kind)] + ["no-such-action"]
    urls = []
    for slug in slugs if "<slug:action>" in route else [""]:
        for letter_id in [str(letter.pk), "99999999999999999999999"] if "<int:" in route else [""]:
            path = (
                route.replace("<uuid:run_id>", str(run.pk))
                .replace("<int:dead_letter_id>", letter_id)
                .replace("<slug:action>", slug)
            )
            urls.append("/" + path)
    return urls


def test_no_staff_page_answers_bad_input_with_a_5xx_or_a_partial_write(
    persona: Any, tenant: Any, other_tenant: Any
) -> None:
    run, step_ids, letter, users = _world(persona, tenant, other_tenant)
    routes = list(console_routes())
    names = parameter_names([view for _route, view in routes])
    assert {"", "audit/", "dead-letters/", "runs/<uuid:run_id>/act/<slug:action>/"} <= {r for r, _ in routes}
    urls = [url for route, _view in routes for url in urls_of(route, run, letter)]
    chooser = random.Random(SEED)
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    requests = 0

    def valid_values() -> dict[str, list[str]]:
        return {
            "state": [run_state_token(Run.objects.get(pk=run.pk))],
            "step_id": step_ids,
            "step": step_ids,
            "owner": [str(users["support"].pk)],
            "channel": ["email"],
            "from": ["queue"],
        }

    def mixes() -> Iterator[dict[str, str]]:
        for value in HOSTILE:
            yield dict.fromkeys(names, value)
        for _ in range(RANDOM_MIXES):
            valid = valid_values()
            mix = {}
            for name in chooser.sample(names, chooser.randint(1, len(names))):
                good = valid.get(name)
                mix[name] = (
                    chooser.choice(good) if good and chooser.random() < 0.6 else chooser.choice(HOSTILE)
                )
            yield mix

    for name in PERSONAS:
        # A server error is answered as in production (500), and counted, rather than raised here.
        client = Client(raise_request_exception=False)
        client.force_login(users[name])
        state = table_state()
        for url in urls:
            for method in ("GET", "POST"):
                send = client.post if method == "POST" else client.get
                for data in mixes():
                    headers = {"HX-Request": "true"} if chooser.random() < 0.5 else {}
                    response = send(url, data, headers=headers)
                    requests += 1
                    statuses[response.status_code] += 1
                    where = f"{method} {url} as {name} with {sorted({v[:12] for v in data.values()})}"
                    if response.status_code >= 500:
                        failures.append(f"{where}: {response.status_code}")
                    after = table_state()
                    if response.status_code >= 400 and after != state:
                        failures.append(f"{where}: refused ({response.status_code}) but wrote")
                    state = after
                    if response.status_code == 405:
                        break  # the view does not take this method: one request says so
    PAGE_FUZZ.update(
        urls=len(urls),
        routes=len(routes),
        personas=len(PERSONAS),
        parameters=len(names),
        values=len(HOSTILE),
        requests=requests,
        statuses=dict(sorted(statuses.items())),
    )
    assert not failures, "\n".join(failures[:40])


# --- the Django admin ----------------------------------------------------------------------------
#
# Every registered model's admin (read from admin.site, so a model registered later is fuzzed
# without a line here), as a superuser, a tenant's admin and support staff of tenant sundry, with
# one row of every tenant-bound model in sundry and in acme. The superuser and sundry's admin are
# as console.roles makes them; the third is sundry's admin granted the view permission of every
# model (as an operator may), so that every view of every admin is reached by someone scoped:
#
# - the change list with each of its filters' parameters (as the change list itself names them),
#   the search, the ordering, the page and lookups on the primary key, one at a time, set to each
#   of ADMIN_HOSTILE; and the change list's delete action (POST) on ids that are not ids;
# - the change, history, delete (and a person's password) views of ids that are not ids (words,
#   NUL, numbers past any integer, other scripts' digits), by GET and POST; simple-history's view
#   of one version with such ids; and the same views of sundry's own row;
# - to each person of sundry who is no superuser, each view of acme's row answers what the same
#   view of an id that exists nowhere answers: a 404 wherever the person may use the model at all
#   (issue 33, item 4: a 403 there told a tenant's admin that the id exists in another tenant).
#
# No answer is a 5xx, and a refused request writes nothing.

ADMIN_PERSONAS = {"superuser": "admin", "tenant_admin": "tenant_admin", "granted": "tenant_admin"}
ADMIN_HOSTILE = [
    "\x00",
    "a\x00b",
    "abc",
    "-1",
    "99999999999999999999999",
    "1e400",
    "٣",
    "\uff13",
    "2026-02-30",
    "x" * 20_000,
    "",
]
# Ids that are not ids, as they stand in a URL's path (%00 is a NUL; the admin unquotes _2F to /).
HOSTILE_IDS = ["abc", "%00", "a%00b", "99999999999999999999999", "-1", "1e400", "_2Fetc_2Fpasswd"]
# An id in another script's digits: int() reads ARABIC-INDIC THREE as 3, so it names row 3 and
# is sent by GET only (a POST would delete whatever row 3 is, as the superuser may).
ALIASING_ID = "%D9%A3"
# Change-list parameters besides its filters'.
CHANGELIST_PARAMETERS = ["q", "o", "p", "all", "e", "_to_field", "_popup", "pk", "id__exact", "id__in"]
HOPS_TO_TENANT = 4  # DeadLetter → Compensation → Intent → Run → Tenant


def _tenant_rows(tenant: Any) -> None:
    """One row of every tenant-bound model the admin shows, in `tenant` (a person and their
    membership come from the personas)."""
    actor = services.Actor.agent(f"bot-{tenant.slug}")
    run = factories.run_via_service(tenant=tenant, actor=actor)
    done = services.intent_record(run=run, tool="reserve", args={"sku": "B-1"}, turn=1, actor=actor).intent
    services.outcome_record(intent=done, ok=True, receipt={"reservation": "R-1"}, actor=actor)
    now = timezone.now()
    CustomerMessage.objects.create(run=run, channel="email", body="We are on it.", told_at=now)
    Escalation.objects.create(run=run, reason="run_died_mid_sequence", created_at=now)
    fanout = FanOut.objects.create(
        run=run, turn=1, name="stock", deadline_ms=2000, started_at=now, deadline_at=now
    )
    FanOutBranch.objects.create(fanout=fanout, name="erp", tool="stock_level", started_at=now)
    compensation = Compensation.objects.create(original=done, status=CompensationStatus.DEAD_LETTERED)
    DeadLetter.objects.create(compensation=compensation, error_class="permanent", error="refused", attempts=5)
    AgentToken.objects.create(tenant=tenant, name="bot", digest=f"{tenant.slug:0<64}")
    TenantSettings.objects.create(tenant=tenant)
    NotificationRule.objects.create(tenant=tenant, task_type="returns", emails="lead@example.com")
    CatalogueEntry.objects.create(
        tenant=tenant, tool="reserve", description="hold stock", reversibility=Reversibility.REVERSIBLE
    )
    policy = TaskPolicy.objects.create(tenant=tenant, task_type="returns", strategy=Strategy.RESUME)
    policy.notes = "a second version"
    policy.save()


def reaches_tenant(model: Any, hops: int = HOPS_TO_TENANT) -> bool:
    """Whether the model's rows belong to a tenant: a chain of foreign keys leads to Tenant."""
    return model is Tenant or (
        hops > 0
        and any(
            reaches_tenant(field.related_model, hops - 1)
            for field in model._meta.get_fields()
            if (field.many_to_one or field.one_to_one) and field.concrete and field.related_model is not None
        )
    )


def admin_changelist_parameters(model_admin: Any, user: Any) -> list[str]:
    """The change list's filters' parameters as the change list names them, and the others."""
    request = RequestFactory().get("/")
    request.user = user
    changelist = model_admin.get_changelist_instance(request)
    names = {name for spec in changelist.filter_specs for name in spec.expected_parameters()}
    return sorted(names | set(CHANGELIST_PARAMETERS))


def row_of(model_admin: Any, tenant: Tenant) -> str | None:
    """The (quoted) id of a row of the model in `tenant`; None for a model of no tenant."""
    if not isinstance(model_admin, TenantScopedAdmin):
        return None
    rows = model_admin.model._default_manager.filter(model_admin.own_filter(tenant))
    pk = rows.order_by("pk").values_list("pk", flat=True).first()
    return None if pk is None else quote(str(pk))


def version_of(model: Any, object_id: str | None) -> str | None:
    """The id of the row's first version in its history, where the model keeps one."""
    history = getattr(model, "history", None)
    if history is None or object_id is None:
        return None
    first = history.filter(**{model._meta.pk.attname: object_id}).order_by("history_id").first()
    return None if first is None else str(first.history_id)


def missing_ids(model: Any) -> tuple[str, str]:
    """An object id and a version id that exist nowhere."""
    if isinstance(model._meta.pk, dj_models.UUIDField):
        return "00000000-0000-4000-8000-000000000000", "2147483000"
    return "2147483000", "2147483000"


def admin_views(model: Any, object_id: str, version_id: str | None = None) -> dict[str, str]:
    """The admin's views of one row, by name."""
    base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/{object_id}/"
    views = {"change": f"{base}change/", "history": f"{base}history/", "delete": f"{base}delete/"}
    if model is get_user_model():
        views["password"] = f"{base}password/"
    if version_id is not None and hasattr(model, "history"):
        views["version"] = f"{base}history/{version_id}/"
    return views


class AdminFuzz:
    """Sends the requests; keeps the figures and the failures."""

    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.failures: list[str] = []
        self.requests = 0

    def send(self, client: Client, method: str, url: str, data: dict[str, str], who: str) -> int:
        before = table_state() if method == "POST" else None
        response = (client.post if method == "POST" else client.get)(url, data)
        self.requests += 1
        self.statuses[response.status_code] += 1
        where = f"{method} {url[:100]} as {who} with {sorted((k, v[:12]) for k, v in data.items())}"
        if response.status_code >= 500:
            self.failures.append(f"{where}: {response.status_code}")
        if before is not None and response.status_code >= 400 and table_state() != before:
            self.failures.append(f"{where}: refused ({response.status_code}) but wrote")
        return int(response.status_code)

    def changelist(self, client: Client, model_admin: Any, user: Any, who: str) -> None:
        model = model_admin.model
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for name in admin_changelist_parameters(model_admin, user):
            for value in ADMIN_HOSTILE:
                self.send(client, "GET", url, {name: value}, who)
        for value in ["\x00", "abc", "99999999999999999999999", "٣", "1e400", ""]:
            self.send(client, "POST", url, {"action": "delete_selected", "_selected_action": value}, who)

    def objects(self, client: Client, model_admin: Any, tenant: Tenant, who: str) -> None:
        model = model_admin.model
        own = row_of(model_admin, tenant)
        version = version_of(model, own)
        for object_id in [*HOSTILE_IDS, ALIASING_ID]:
            for url in admin_views(model, object_id, version or HOSTILE_IDS[0]).values():
                self.send(client, "GET", url, {}, who)
                if object_id != ALIASING_ID:
                    self.send(client, "POST", url, {"post": "yes"}, who)
        if own is not None:
            for url in [*admin_views(model, own, version).values(), *admin_views(model, own, "abc").values()]:
                self.send(client, "GET", url, {}, who)

    def outside(self, client: Client, model_admin: Any, other_tenant: Tenant, who: str) -> None:
        """Acme's row answers as a row that exists nowhere: a 404 where the person may use the
        model at all (its change list opens), else the same refusal."""
        model = model_admin.model
        theirs = row_of(model_admin, other_tenant)
        if theirs is None:
            return
        may_use = client.get(f"/admin/{model._meta.app_label}/{model._meta.model_name}/").status_code == 200
        nowhere = admin_views(model, *missing_ids(model))
        for name, url in admin_views(model, theirs, version_of(model, theirs)).items():
            for method in ("GET", "POST"):
                got, missing = (self.send(client, method, u, {}, who) for u in (url, nowhere[name]))
                if got != missing or (may_use and got != 404):
                    self.failures.append(f"{method} {url} as {who}: {got}, where no such row: {missing}")


def test_no_admin_page_answers_bad_input_with_a_5xx_or_shows_another_tenants_row(
    persona: Any, tenant: Tenant, other_tenant: Tenant
) -> None:
    users = {
        name: persona(role, tenant, username=f"admin-fuzz-{name}") for name, role in ADMIN_PERSONAS.items()
    }
    persona("support_staff", other_tenant, username="admin-fuzz-acme")
    for each in (tenant, other_tenant):
        _tenant_rows(each)
    registry = sorted(admin.site._registry.values(), key=lambda m: m.model._meta.label)
    # Every admin of rows that belong to a tenant is scoped, and each has a row of acme's to ask for.
    bound = [m for m in registry if reaches_tenant(m.model)]
    assert [m.model._meta.label for m in bound if not isinstance(m, TenantScopedAdmin)] == []
    scoped = [m for m in registry if isinstance(m, TenantScopedAdmin)]
    assert [m.model._meta.label for m in scoped if row_of(m, other_tenant) is None] == []
    fuzz = AdminFuzz()
    for who, user in users.items():
        client = Client(raise_request_exception=False)
        client.force_login(user)
        for model_admin in registry:
            state = table_state()
            if who != "tenant_admin":  # the granted admin reaches every change list it does, and more
                fuzz.changelist(client, model_admin, user, who)
            fuzz.objects(client, model_admin, tenant, who)
            if not user.is_superuser:
                fuzz.outside(client, model_admin, other_tenant, who)
            if table_state() != state and model_admin.model is not get_user_model():
                fuzz.failures.append(f"{model_admin.model._meta.label} as {who}: a GET or a refusal wrote")
    ADMIN_FUZZ.update(
        models=len(registry), requests=fuzz.requests, statuses=dict(sorted(fuzz.statuses.items()))
    )
    assert not fuzz.failures, "\n".join(fuzz.failures[:60])
