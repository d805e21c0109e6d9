"""Schema-driven fuzzing of the REST API (docs/reliability.md, "Bad input and access").

Schemathesis reads the OpenAPI schema the application serves (`/api/schema/`, through the
Django WSGI application in process) and, for each operation, Hypothesis generates requests that
fit the schema and requests that break it, sent with an agent token. Path parameters are
sometimes a real run (and a real step of it) of the token's tenant, sometimes another tenant's
run, sometimes whatever the schema allows. Two properties hold for every request:

- no answer is a 5xx (schemathesis's `not_a_server_error`);
- a refused request (status >= 400) writes nothing: the row counts of runs, intents, customer
  messages and journal events are the same after it as before.

The number of inputs tried per operation is printed at the end of the run (docs/reliability.md)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from journal import services
from journal.models import AgentToken, CustomerMessage, Intent, JournalEvent, Run, Tenant
from tests import factories
from tests.security.figures import FUZZ_REFUSED, FUZZ_TRIED

pytestmark = pytest.mark.django_db(transaction=True)

MAX_EXAMPLES = 30  # per operation and generation mode
JOURNAL_TABLES = (Run, Intent, CustomerMessage, JournalEvent)

APPLICATION = get_wsgi_application()
SCHEMA = schemathesis.openapi.from_wsgi("/api/schema/?format=json", APPLICATION)
OPERATIONS = {op.label: op for op in (result.ok() for result in SCHEMA.get_all_operations())}
# Schema-breaking requests need something the schema constrains: a body or query parameters.
# (A path parameter is any string and the token header is fixed, so nothing else can break.)
CASES = [
    (label, mode)
    for label, op in sorted(OPERATIONS.items())
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or op.body or op.query
]


def journal_counts() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in JOURNAL_TABLES)


def _token(tenant: Tenant, name: str) -> str:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name=name, digest=AgentToken.digest_of(secret))
    return secret


def _run_with_open_step(tenant: Tenant, actor: services.Actor) -> tuple[Run, str]:
    run = factories.run_via_service(tenant=tenant, actor=actor)
    intent = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=actor
    ).intent
    return run, intent.step_id


def _strategy(
    operation: Any, mode: GenerationMode, fixed: dict[str, str] | None, headers: dict[str, str]
) -> Any:
    return operation.as_strategy(generation_mode=mode, path_parameters=fixed, headers=headers)


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{label} {mode.value}" for label, mode in CASES])
def test_no_input_is_a_server_error_or_a_partial_write(label: str, mode: GenerationMode) -> None:
    operation = OPERATIONS[label]
    tenant = factories.TenantFactory(slug="sundry")
    other = factories.TenantFactory(slug="acme")
    actor = services.Actor.agent("fuzz-bot")
    run, step_id = _run_with_open_step(tenant, actor)
    foreign_run, foreign_step = _run_with_open_step(other, actor)
    real = {"run_id": str(run.pk), "step_id": step_id}
    foreign = {"run_id": str(foreign_run.pk), "step_id": foreign_step}
    headers = {"Authorization": f"Bearer {_token(tenant, 'fuzz-bot')}"}

    # Real objects first: Hypothesis draws the earlier branches of one_of more often.
    strategies = [_strategy(operation, mode, None, headers)]
    if operation.path_parameters:
        strategies = [
            _strategy(operation, mode, real, headers),
            _strategy(operation, mode, foreign, headers),
            *strategies,
        ]

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(strategies))
    def check(case: Any) -> None:
        before = journal_counts()
        response = case.call()
        FUZZ_TRIED[label] += 1
        case.validate_response(response, checks=[not_a_server_error])
        if response.status_code >= 400:
            FUZZ_REFUSED[label] += 1
            assert journal_counts() == before, (
                f"{case.method} {case.formatted_path} answered {response.status_code} but wrote rows: "
                f"{before} -> {journal_counts()} (runs, intents, messages, events)"
            )

    check()
