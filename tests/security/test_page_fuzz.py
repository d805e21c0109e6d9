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
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from compensations.models import Compensation, CompensationStatus, DeadLetter
from console import forms, staff_actions
from handover import run_state_token
from journal import services
from journal.models import Run
from tests import factories
from tests.security.figures import PAGE_FUZZ

# About 3,700 requests (a minute and a half): in `make chaos`, which CI runs after `make test`.
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
