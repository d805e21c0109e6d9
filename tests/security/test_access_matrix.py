"""Every URL the application serves x every kind of caller → the status each must get.

The URL patterns are read from the resolver, so a route added without a row in `EXPECTED` (or
a row left behind for a removed route) fails `test_every_url_pattern_has_an_expectation`. Path
parameters are filled with real objects of the right kind: a run of the callers' tenant with an
open step, a (resolved) dead letter of that tenant, each action slug the view knows, and for the
admin the primary key of an existing row of the model.

The callers: nobody logged in; support staff, a team lead and an admin (superuser) of tenant
sundry; a read-only person of sundry (a member with no role: they may read the console, never
act); support staff of another tenant (acme); an admin of acme who is no superuser (the admin
role: a tenant's admin); an agent token of sundry, and one of acme, sent as `Authorization:
Bearer`. Decisions this table records:

- HTML pages and their actions are for staff sessions. An agent token is not a session, so it
  is sent to log in like nobody (302), never served a page.
- The REST API authenticates agent tokens and staff sessions. Staff sessions may read (their
  tenant only) and may not write the journal (403): only an agent records intents and outcomes.
- Another tenant's run or dead letter is a 404 (the object does not exist for that caller);
  a role that may not do something is a 403 (the read-only person, for every staff action).
- The OpenAPI schema and its browser (`/api/schema/`, `/api/docs/`) are public: they describe
  the contract, not any tenant's data.
- The Django admin is for the admin and a tenant's admin; everyone else is sent to its login
  page. A tenant's admin gets past its door, and a page naming a row of another tenant (the change,
  delete and history views of every tenant-scoped model: sundry's notification rule, catalogue
  entry, task policy, dead letter, users, runs...) is a 404 or 403 for it.
- The sandbox (a test double of the downstream systems) answers everyone the same: it has no
  users at all, which is why production does not mount it (test_production_settings)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.apps import apps
from django.contrib.admin.sites import site as admin_site
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from compensations.models import CatalogueEntry, Compensation, CompensationStatus, DeadLetter, Reversibility
from console import staff_actions
from console.actions import ACT
from console.dead_letters import ASSIGN
from console.forms import RunActionForm
from console.models import NotificationRule
from journal import services
from journal.models import AgentToken, Run, Tenant
from journal.tenant_admin import TenantScopedAdmin
from reconciliation.models import Strategy, TaskPolicy
from tests import factories
from tests.security.figures import MATRIX

pytestmark = pytest.mark.django_db(transaction=True)

PERSONAS = [
    "anonymous",
    "support",
    "lead",
    "admin",
    "read_only",
    "outsider",
    "tenant_admin",
    "agent",
    "other_agent",
]
STAFF = ["support", "lead", "admin"]
AGENTS = ["agent", "other_agent"]


# --- what a response may be -------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What a response must be, said in words for the failure message."""

    words: str
    test: Callable[[Any], bool]

    def __call__(self, response: Any) -> bool:
        return self.test(response)


def status(*codes: int) -> Expect:
    return Expect(" or ".join(map(str, codes)), lambda r: r.status_code in codes)


def _redirect_to(prefix: str) -> Callable[[Any], bool]:
    return lambda r: r.status_code == 302 and r["Location"].startswith(prefix)


LOGIN = Expect("302 to /accounts/login/", _redirect_to("/accounts/login/"))
ADMIN_LOGIN = Expect("302 to /admin/login/", _redirect_to("/admin/login/"))
PAST_THE_ADMIN_DOOR = Expect(
    "served by the admin (not sent to its login, no 5xx)",
    lambda r: r.status_code < 500 and not _redirect_to("/admin/login/")(r),
)
ANSWERED = Expect("any answer but a 5xx (the same for every caller)", lambda r: r.status_code < 500)
OK = status(200)
UNAUTHORISED = status(401)
FORBIDDEN = status(403)
NOT_FOUND = status(404)
# The service decided (created, the same row again, or a refusal of the state): past auth.
AGENT_WRITE = status(200, 201, 409)


def action_names(kind: staff_actions.Kind, permission: str = "") -> Callable[[], tuple[str, ...]]:
    """The registered actions of a kind (of one permission, if given), read when the test runs:
    an action added to console.staff_actions is requested here without a line of this file."""
    return lambda: tuple(
        a.name for a in staff_actions.actions_of(kind) if not permission or a.permission == permission
    )


@dataclass(frozen=True)
class Call:
    method: str
    expect: dict[str, Expect]
    data: dict[str, Any] = field(default_factory=dict)
    # Fill `<slug:action>` with each of these (one request each); empty: the pattern has none.
    actions: Callable[[], tuple[str, ...]] = tuple


def page(**overrides: Expect) -> Call:
    """A staff page of the caller's tenant: staff 200, the rest sent to log in."""
    expect = {
        "anonymous": LOGIN,
        "support": OK,
        "lead": OK,
        "admin": OK,
        "read_only": OK,
        "outsider": OK,
        "tenant_admin": OK,
        "agent": LOGIN,
        "other_agent": LOGIN,
    }
    return Call("GET", expect | overrides)


def everyone(expect: Expect, method: str = "GET") -> Call:
    return Call(method, dict.fromkeys(PERSONAS, expect))


def api_read(outsider: Expect = NOT_FOUND) -> Call:
    return Call(
        "GET",
        {
            "anonymous": UNAUTHORISED,
            **dict.fromkeys([*STAFF, "read_only"], OK),
            "outsider": outsider,
            "tenant_admin": outsider,
            "agent": OK,
            "other_agent": outsider,
        },
    )


def api_write(data: dict[str, Any] | None = None, outsider_agent: Expect = NOT_FOUND) -> Call:
    return Call(
        "POST",
        {
            "anonymous": UNAUTHORISED,
            # A staff session may read the API but never write the journal.
            **dict.fromkeys([*STAFF, "read_only", "outsider", "tenant_admin"], FORBIDDEN),
            "agent": AGENT_WRITE,
            "other_agent": outsider_agent,
        },
        data or {},
    )


RUN_ACT = Call(
    "POST",
    {
        "anonymous": LOGIN,
        # Past the role and tenant checks, the action refuses a form without the page's state.
        **dict.fromkeys(STAFF, status(400)),
        "read_only": FORBIDDEN,
        "outsider": NOT_FOUND,
        "tenant_admin": NOT_FOUND,
        "agent": LOGIN,
        "other_agent": LOGIN,
    },
    {"note": "checked the carrier portal"},
    action_names(staff_actions.Kind.RUN),
)


def _dead_letter_act(allowed: Expect, support: Expect, outsider: Expect = NOT_FOUND) -> dict[str, Expect]:
    return {
        "anonymous": LOGIN,
        "support": support,
        "lead": allowed,
        "admin": allowed,
        "read_only": FORBIDDEN,
        "outsider": outsider,
        "tenant_admin": NOT_FOUND,  # every role's check passes; the letter is of another tenant
        "agent": LOGIN,
        "other_agent": LOGIN,
    }


# --- the table --------------------------------------------------------------------------------

# Route (as the resolver spells it, prefixes joined) → the calls made to it.
EXPECTED: dict[str, list[Call]] = {
    # The staff dashboard.
    "": [page()],
    "runs/": [page()],
    # Bulk assign / resolve from the queue: past the role check, a form naming no runs is a 400
    # (another tenant's runs in it would be reported not found, run by run).
    "runs/bulk/": [
        Call(
            "POST",
            {
                "anonymous": LOGIN,
                # Another tenant's people may act in their own tenant: past the role check too.
                **dict.fromkeys([*STAFF, "outsider", "tenant_admin"], status(400)),
                "read_only": FORBIDDEN,
                "agent": LOGIN,
                "other_agent": LOGIN,
            },
            {"action": "resolve", "note": "checked the carrier portal"},
        )
    ],
    "runs/<uuid:run_id>/": [page(outsider=NOT_FOUND, tenant_admin=NOT_FOUND)],
    "runs/<uuid:run_id>/panel/": [page(outsider=NOT_FOUND, tenant_admin=NOT_FOUND)],
    "runs/<uuid:run_id>/confirm/<slug:action>/": [
        Call(
            "GET",
            page(outsider=NOT_FOUND, tenant_admin=NOT_FOUND, read_only=FORBIDDEN).expect,
            actions=action_names(staff_actions.Kind.RUN),
        )
    ],
    "runs/<uuid:run_id>/act/<slug:action>/": [RUN_ACT],
    # The dialog of an action that shows what the typed values change (StaffAction.previews),
    # past the role and tenant checks refused without the page's state; nothing is written.
    "runs/<uuid:run_id>/preview/<slug:action>/": [
        Call(
            "POST",
            RUN_ACT.expect,
            {"note": "checked the carrier portal"},
            lambda: tuple(a.name for a in staff_actions.actions_of(staff_actions.Kind.RUN) if a.previews),
        )
    ],
    "audit/": [page(support=FORBIDDEN, read_only=FORBIDDEN, outsider=FORBIDDEN)],
    "audit.csv": [page(support=FORBIDDEN, read_only=FORBIDDEN, outsider=FORBIDDEN)],
    # A lead's re-run of the chain's verification: queued, then back to the audit page.
    "audit/verify/": [
        Call(
            "POST",
            page(
                support=FORBIDDEN,
                read_only=FORBIDDEN,
                outsider=FORBIDDEN,
                lead=Expect("302 to /audit/", _redirect_to("/audit/")),
                admin=Expect("302 to /audit/", _redirect_to("/audit/")),
                tenant_admin=Expect("302 to /audit/", _redirect_to("/audit/")),
            ).expect,
        )
    ],
    "insights/": [page(support=FORBIDDEN, read_only=FORBIDDEN, outsider=FORBIDDEN)],
    "insights.csv": [
        # Past the role check, a CSV must name its chart: 400 without one, 200 with one.
        Call(
            "GET",
            page(
                support=FORBIDDEN,
                read_only=FORBIDDEN,
                outsider=FORBIDDEN,
                lead=status(400),
                admin=status(400),
                tenant_admin=status(400),
            ).expect,
        ),
        Call(
            "GET",
            page(support=FORBIDDEN, read_only=FORBIDDEN, outsider=FORBIDDEN).expect,
            {"chart": "escalations"},
        ),
    ],
    "dead-letters/": [page()],
    "dead-letters/<int:dead_letter_id>/<slug:action>/": [
        # The letter is resolved, so every action that passes the role and tenant checks is
        # refused with 409 and nothing is written; assigning needs a team lead.
        Call(
            "POST",
            _dead_letter_act(status(409), support=status(409)),
            {"note": "undone by hand"},
            action_names(staff_actions.Kind.DEAD_LETTER, ACT),
        ),
        # Support staff of another tenant: the role is checked first, then the tenant.
        Call(
            "POST",
            _dead_letter_act(status(409), support=FORBIDDEN, outsider=FORBIDDEN),
            {"owner": "0"},
            action_names(staff_actions.Kind.DEAD_LETTER, ASSIGN),
        ),
    ],
    "catalogue/": [page(read_only=FORBIDDEN)],
    # The catalogue editor: admins only (the role first), and only their tenant's entry.
    "catalogue/<int:entry_id>/edit/": [
        page(
            support=FORBIDDEN, lead=FORBIDDEN, read_only=FORBIDDEN, outsider=FORBIDDEN, tenant_admin=NOT_FOUND
        )
    ],
    "catalogue/<int:entry_id>/preview/": [
        Call(
            "POST",
            page(
                support=FORBIDDEN,
                lead=FORBIDDEN,
                read_only=FORBIDDEN,
                outsider=FORBIDDEN,
                tenant_admin=NOT_FOUND,
                admin=status(400),
            ).expect,
        )
    ],
    # Logging in and out.
    "accounts/login/": [everyone(OK)],
    "accounts/logout/": [everyone(LOGIN, method="POST")],
    # The REST API.
    "api/v1/runs/": [
        api_read(outsider=OK),
        api_write(
            {"task_type": "returns", "versions": dict(factories.VERSIONS), "plan": []},
            outsider_agent=AGENT_WRITE,  # creates a run in its own tenant
        ),
    ],
    "api/v1/runs/<str:run_id>/": [api_read()],
    "api/v1/runs/<str:run_id>/handover/": [api_read()],
    "api/v1/runs/<str:run_id>/intents/": [
        api_write({"tool": "issue_refund", "args": {"amount": "14.95"}, "turn": 7})
    ],
    "api/v1/runs/<str:run_id>/intents/<str:step_id>/outcome/": [
        api_write({"ok": True, "summary": "label RL-7734", "receipt": {"label": "RL-7734"}})
    ],
    "api/v1/runs/<str:run_id>/export/": [api_read()],
    "api/v1/runs/<str:run_id>/customer-messages/": [
        api_write({"channel": "email", "body": "Your return label is on its way."})
    ],
    "api/v1/runs/<str:run_id>/heartbeat/": [api_write()],
    "api/v1/runs/<str:run_id>/complete/": [api_write()],
    "api/v1/runs/<str:run_id>/cancel/": [api_write({"reason": "the customer withdrew"})],
    "api/v1/runs/<str:run_id>/counters/": [api_write({"kind": "retry"})],
    "api/schema/": [everyone(OK)],
    "api/docs/": [everyone(OK)],
    # Operations: a health check for the load balancer, and Prometheus's scrape (public here:
    # SEAM_METRICS_TOKEN is unset in the test settings; see test_metrics_need_their_token_when_set).
    "healthz": [everyone(OK)],
    "metrics": [everyone(OK)],
    # The admin's own login and logout (every other admin route is ADMIN_ROUTE below).
    "admin/login/": [
        Call(
            "GET",
            dict.fromkeys(PERSONAS, OK)
            | dict.fromkeys(["admin", "tenant_admin"], Expect("302 to /admin/", _redirect_to("/admin/"))),
        )
    ],
    "admin/logout/": [
        Call(
            "POST",
            dict.fromkeys(PERSONAS, Expect("302 to /admin/", _redirect_to("/admin/")))
            | dict.fromkeys(["admin", "tenant_admin"], LOGIN),  # logged out, then LOGOUT_REDIRECT_URL
        )
    ],
}
# Every other route under admin/ is one of the admin site's own views (its index, app lists,
# and the views of each registered model), all behind `admin_site.admin_view`.
ADMIN_ROUTE = Call(
    "GET",
    dict.fromkeys(PERSONAS, ADMIN_LOGIN) | dict.fromkeys(["admin", "tenant_admin"], PAST_THE_ADMIN_DOOR),
)
# A tenant's admin asking for a view of one row of another tenant.
ANOTHER_TENANTS_ROW = Expect("403 or 404 (a row of another tenant)", lambda r: r.status_code in (403, 404))
_ONE_ROW_VIEW = re.compile(r"(<path:object_id>|<id>|\^\(\[\^/\]\+\))/(change|delete|history|password)/")
# Every route under sandbox/ is the test double's, answered alike to everyone.
SANDBOX_ROUTE = everyone(ANSWERED)


def expected_calls(route: str) -> list[Call] | None:
    if route in EXPECTED:
        return EXPECTED[route]
    if route.startswith("admin/"):
        if _ONE_ROW_VIEW.search(route) and _sundry_row_pk(route) is not None:
            return [Call("GET", ADMIN_ROUTE.expect | {"tenant_admin": ANOTHER_TENANTS_ROW})]
        return [ADMIN_ROUTE]
    if route.startswith("sandbox/"):
        return [SANDBOX_ROUTE]
    return None


# --- the routes -------------------------------------------------------------------------------


def routes(patterns: list[Any] | None = None, prefix: str = "") -> Iterator[str]:
    """Every URL pattern the resolver knows, as the concatenation of its prefixes' patterns."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            assert isinstance(pattern, URLPattern)
            yield prefix + str(pattern.pattern)


# Regular-expression routes (the admin's and the sandbox's catch-alls, the admin's app lists and
# django-simple-history's views), each with a path that matches it.
REGEX_SAMPLES = {
    "admin/^(?P<app_label>auth|journal|handover|reconciliation|compensations|fanout|axes)/$": "admin/handover/",
    "admin/(?P<url>.*)$": "admin/no-such-page/",
    "admin/reconciliation/taskpolicy/^([^/]+)/history/([^/]+)/$": "admin/reconciliation/taskpolicy/{pk}/history/1/",
    "admin/compensations/catalogueentry/^([^/]+)/history/([^/]+)/$": "admin/compensations/catalogueentry/{pk}/history/1/",
    "sandbox/^api/(?P<rest>.*)$": "sandbox/api/no-such-thing",
}


@dataclass
class World:
    tenant: Tenant
    run: Run
    step_id: str
    dead_letter: DeadLetter
    clients: dict[str, Callable[[], Client]]


def _route_model(route: str) -> Any:
    match = re.match(r"admin/(\w+)/(\w+)/", route)
    if match is None:
        return None
    try:
        return apps.get_model(match[1], match[2])
    except LookupError:
        return None


def _sundry_row_pk(route: str) -> str | None:
    """For a tenant-scoped model's route, a row of tenant sundry (the world's), if it has one."""
    model = _route_model(route)
    model_admin = admin_site._registry.get(model) if model is not None else None
    if not isinstance(model_admin, TenantScopedAdmin):
        return None
    sundry = Tenant.objects.filter(slug="sundry").first()
    if sundry is None:
        return None
    row = model._default_manager.filter(model_admin.own_filter(sundry)).order_by("pk").first()
    return str(row.pk) if row is not None else None


def _admin_object_pk(route: str) -> str:
    """A real primary key of the model an admin route is about (or 0 when it has no rows): of
    tenant sundry's rows where the model belongs to tenants."""
    model = _route_model(route)
    if model is None:
        return "0"
    first = (
        _sundry_row_pk(route) or model._default_manager.order_by("pk").values_list("pk", flat=True).first()
    )
    return str(first) if first is not None else "0"


def url_for(route: str, world: World, action: str = "") -> str:
    pk = _admin_object_pk(route)
    if route in REGEX_SAMPLES:
        return "/" + REGEX_SAMPLES[route].format(pk=pk)
    values = {
        "run_id": str(world.run.pk),
        "step_id": world.step_id,
        "dead_letter_id": str(world.dead_letter.pk),
        "entry_id": str(CatalogueEntry.objects.get(tenant=world.run.tenant, tool="start_return").pk),
        "action": action,
        "object_id": pk,
        "id": pk,
        "content_type_id": "1",
        "key": "no-such-key",
        "code": "W1",
        "order_id": "SU-90317",
    }

    def fill(match: re.Match[str]) -> str:
        return values[match[2]]

    path = re.sub(r"<(?:(\w+):)?(\w+)>", fill, route)
    assert not re.search(r"[\^$(]", path), f"{route}: add a sample path to REGEX_SAMPLES"
    return "/" + path


@pytest.fixture
def world(persona: Any, tenant: Tenant, other_tenant: Tenant) -> World:
    actor = services.Actor.agent("returns-bot")
    run = factories.run_via_service(tenant=tenant, actor=actor)
    intent = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=actor
    ).intent
    done = services.intent_record(run=run, tool="reserve", args={"sku": "B-1"}, turn=2, actor=actor).intent
    services.outcome_record(intent=done, ok=True, receipt={"reservation": "R-1"}, actor=actor)
    compensation = Compensation.objects.create(original=done, status=CompensationStatus.DEAD_LETTERED)
    users = {
        "support": persona("support_staff", tenant),
        "lead": persona("team_lead", tenant),
        "admin": persona("admin", tenant),
        "outsider": persona("support_staff", other_tenant),
        "tenant_admin": persona("tenant_admin", other_tenant),
        "read_only": factories.StaffUserFactory(username="read-only-sundry", membership__tenant=tenant),
    }
    # One row of sundry's own in each tenant-scoped model an admin edits, for the admin routes.
    NotificationRule.objects.create(tenant=tenant, webhook_url="https://chat.sundry.example/hook")
    CatalogueEntry.objects.create(
        tenant=tenant, tool="start_return", description="sundry's own", reversibility=Reversibility.NONE
    )
    TaskPolicy.objects.create(tenant=tenant, task_type="returns", strategy=Strategy.COMPENSATE_AND_ESCALATE)
    letter = DeadLetter.objects.create(
        compensation=compensation,
        error_class="permanent",
        error="refused",
        attempts=5,
        owner=users["lead"],
        resolved_at=timezone.now(),
        resolved_by=users["lead"],
        resolution_note="undone by hand",
    )
    tokens = {"agent": tenant, "other_agent": other_tenant}
    secrets = {}
    for name, owner in tokens.items():
        secrets[name] = AgentToken.new_secret()
        AgentToken.objects.create(tenant=owner, name=name, digest=AgentToken.digest_of(secrets[name]))

    def client_for(name: str) -> Callable[[], Client]:
        def make() -> Client:
            if name in users:
                client = Client()
                client.force_login(users[name])
                return client
            if name in secrets:
                return Client(headers={"Authorization": f"Bearer {secrets[name]}"})
            return Client()

        return make

    return World(tenant, run, intent.step_id, letter, {name: client_for(name) for name in PERSONAS})


# --- the tests --------------------------------------------------------------------------------


def test_every_url_pattern_has_an_expectation() -> None:
    served = list(routes())
    missing = [route for route in served if expected_calls(route) is None]
    stale = sorted(set(EXPECTED) - set(served))
    assert not missing, f"URL patterns with no row in EXPECTED: {missing}"
    assert not stale, f"rows in EXPECTED for routes that no longer exist: {stale}"
    assert set(PERSONAS) == {name for calls in EXPECTED.values() for c in calls for name in c.expect}
    admin_models = {f"admin/{m._meta.app_label}/{m._meta.model_name}/" for m in admin_site._registry}
    assert admin_models <= set(served)


def answer_the_table(world: World, only_action: str = "") -> tuple[list[str], int, list[str]]:
    """Make every call of the table (or only those filling `<slug:action>` with `only_action`):
    what was answered wrongly, how many requests were made, and the URLs requested."""
    wrong: list[str] = []
    requested: list[str] = []
    requests = 0
    clients: dict[str, Client] = {}
    for route in routes():
        calls = expected_calls(route)
        assert calls is not None
        for call in calls:
            for action in call.actions() or ("",):
                if only_action and action != only_action:
                    continue
                url = url_for(route, world, action)
                requested.append(f"{call.method} {url}")
                answers: dict[str, int] = {}
                for persona in PERSONAS:
                    # One client per caller, logged in again after a logout.
                    if persona not in clients:
                        clients[persona] = world.clients[persona]()
                    client = clients[persona]
                    send = client.post if call.method == "POST" else client.get
                    kwargs: dict[str, Any] = {}
                    if call.method == "POST" and url.startswith("/api/"):
                        kwargs["content_type"] = "application/json"
                    response = send(url, call.data, **kwargs)
                    if "logout" in route:
                        del clients[persona]
                    requests += 1
                    answers[persona] = response.status_code
                    if not call.expect[persona](response):
                        location = f" -> {response.get('Location')}" if response.status_code == 302 else ""
                        wrong.append(
                            f"{call.method} {url} as {persona}: {response.status_code}{location}, "
                            f"expected {call.expect[persona].words}"
                        )
                if call is SANDBOX_ROUTE and len(set(answers.values())) != 1:
                    wrong.append(f"GET {url}: the sandbox answered callers differently: {answers}")
    return wrong, requests, requested


def test_every_url_answers_every_caller_as_the_table_says(world: World) -> None:
    wrong, requests, _requested = answer_the_table(world)
    MATRIX.update(urls=len(list(routes())), personas=len(PERSONAS), requests=requests)
    assert not wrong, "\n".join(wrong)


def test_every_registered_action_is_in_the_table() -> None:
    """Each action of the registry is requested by some call of its route, so none is left out
    of the matrix (a new permission would need a row saying who holds it)."""
    for kind, route in [
        (staff_actions.Kind.RUN, "runs/<uuid:run_id>/act/<slug:action>/"),
        (staff_actions.Kind.DEAD_LETTER, "dead-letters/<int:dead_letter_id>/<slug:action>/"),
    ]:
        covered = {name for call in EXPECTED[route] for name in call.actions()}
        assert covered == {a.name for a in staff_actions.actions_of(kind)}, route


@pytest.fixture
def dummy_action() -> Iterator[staff_actions.StaffAction]:
    """A run action added to the registry and nowhere else (no URL, template or test edited)."""
    action = staff_actions.StaffAction(
        kind=staff_actions.Kind.RUN,
        name="dummy-escalate",
        label="Escalate again",
        permission=ACT,
        form_class=RunActionForm,
        perform=lambda ctx, run, data: None,
        done_message="Escalated again.",
        offer=lambda action, page: [],
    )
    with staff_actions.registered(action):
        yield action


def test_an_action_added_to_the_registry_alone_is_in_the_access_matrix(
    world: World, dummy_action: staff_actions.StaffAction
) -> None:
    wrong, requests, requested = answer_the_table(world, only_action=dummy_action.name)
    run = world.run.pk
    # Its confirmation and its action, each asked by every caller, answered as the table says.
    assert requested == [
        f"GET /runs/{run}/confirm/dummy-escalate/",
        f"POST /runs/{run}/act/dummy-escalate/",
    ]
    assert requests == 2 * len(PERSONAS)
    assert not wrong, "\n".join(wrong)
