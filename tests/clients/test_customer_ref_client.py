"""seam-client's start_run records who a run is for (issue 32, "Triage"), sync and async, against
a live Seam: the reference is stored on the run, answered back, and one too long is refused with
the field named and nothing written."""

from __future__ import annotations

import asyncio

import pytest
from seam_client import AsyncSeamClient, SeamClient, SeamRefused

from journal.models import CUSTOMER_REF_MAX
from journal.models import Run as RunRow
from tests.factories import BENCH_PLAN, VERSIONS

pytestmark = pytest.mark.django_db(transaction=True)


def test_start_run_records_the_customer_reference(seam: SeamClient) -> None:
    run = seam.start_run(
        task_type="returns",
        versions=VERSIONS,
        plan=BENCH_PLAN,
        ticket_id="T-1",
        customer_ref="ada@example.com",
    )

    assert RunRow.objects.get(pk=run.id).customer_ref == "ada@example.com"
    assert seam.run(run.id).fetch()["customer_ref"] == "ada@example.com"


def test_start_run_without_one_records_none(seam: SeamClient) -> None:
    run = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN, ticket_id="T-2")
    assert RunRow.objects.get(pk=run.id).customer_ref == ""


def test_a_reference_too_long_is_refused_naming_it_and_nothing_is_written(seam: SeamClient) -> None:
    with pytest.raises(SeamRefused) as refused:
        seam.start_run(task_type="returns", versions=VERSIONS, customer_ref="x" * (CUSTOMER_REF_MAX + 1))

    assert refused.value.status == 400 and list(refused.value.fields) == ["customer_ref"]
    assert not RunRow.objects.exists()


def test_the_async_client_records_it_too(seam_server: str, agent_token: str) -> None:
    async def main() -> str:
        async with AsyncSeamClient(seam_server, agent_token, retries=0) as client:
            run = await client.start_run(task_type="returns", versions=VERSIONS, customer_ref="ACC-7781")
            return run.id

    run_id = asyncio.run(main())
    assert RunRow.objects.get(pk=run_id).customer_ref == "ACC-7781"
