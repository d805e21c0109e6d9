"""docs/integrating.md's LangGraph, OpenAI Agents and Pydantic AI pages run as written: the
page's agent module, saved under the name it gives, is run by the page's own command (`python
points_….py TICKET`, its scripted model standing in for a real one) against a Seam and the
giftdesk's ledger; the ledger books each award once, and the run is completed; under the suite's
settings, and (`make chaos`) under the demo's and production's. The kill, the reconciliation and the replay of
the same modules are test_framework_adapters.py's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from devtools.processes import (
    GUIDE_SETTINGS,
    database_url,
    serving_seam,
    settings_environment,
)
from journal.models import Intent, IntentStatus, Run, RunStatus, Tenant
from tests.clients.adapter_support import Desk, desk  # noqa: F401 - the fixture
from tests.clients.agent_support import AWARDS, DOC, FINAL_ANSWER, doc_file
from tests.clients.mcp_support import agent_token
from tests.clients.test_framework_adapters import giftdesk  # noqa: F401 - the fixture
from tests.examples.giftdesk_support import APP, Provider

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = {
    "## A LangGraph or LangChain agent": "points_langgraph.py",
    "## An OpenAI Agents SDK agent": "points_openai.py",
    "## A Pydantic AI agent": "points_pydantic.py",
}


def sh_blocks(heading: str) -> list[str]:
    text = DOC.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    page = text[start : end if end != -1 else len(text)]
    return re.findall(r"^```sh\n(.*?)^```$", page, flags=re.DOTALL | re.MULTILINE)


# The suite's own settings, in process: the OpenAI Agents page in `make test`, every page in
# `make chaos` (where each also runs against the demo's and production's settings below).
@pytest.mark.parametrize(
    "heading",
    [heading if "OpenAI" in heading else pytest.param(heading, marks=pytest.mark.chaos) for heading in PAGES],
)
def test_the_pages_agent_runs_as_written_with_its_scripted_model(
    heading: str,
    tmp_path: Path,
    desk: Desk,  # noqa: F811
) -> None:
    run_the_page(heading, tmp_path, desk)


@pytest.fixture(params=GUIDE_SETTINGS)
def desk_served(
    request: pytest.FixtureRequest,
    giftdesk: Provider,  # noqa: F811
    tenant: Tenant,
) -> Iterator[Desk]:
    """The giftdesk served by a Seam under the demo's settings and under production's (the page
    is followed against both), with the example's app installed and its ledger's address."""
    environment = {**settings_environment(request.param), "SEAM_APPS": APP, "GIFTDESK_URL": giftdesk.url}
    with serving_seam(database_url(connection.settings_dict), environment=environment) as base:
        yield Desk(base, agent_token(tenant, name="framework-agent"), giftdesk, tenant)


# Two servers a page, each a minute of start-up and agent: `make chaos`.
@pytest.mark.chaos
@pytest.mark.parametrize("heading", PAGES)
def test_the_pages_agent_runs_as_written_against_the_demo_and_production(
    heading: str, tmp_path: Path, desk_served: Desk
) -> None:
    run_the_page(heading, tmp_path, desk_served)


def run_the_page(heading: str, tmp_path: Path, desk: Desk) -> None:  # noqa: F811
    module = PAGES[heading]
    (tmp_path / module).write_text(doc_file(module))
    [command] = [block for block in sh_blocks(heading) if block.startswith(f"python {module} ")]
    ticket = re.fullmatch(rf"python {re.escape(module)} (\S+)\n", command)
    assert ticket, command

    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env={
            **os.environ,
            # `python` is this virtualenv's, with seam-client installed, as the page assumes.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "SEAM_URL": desk.seam_url,
            "SEAM_TOKEN": desk.token,
            "GIFTDESK_URL": desk.ledger.url,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith(FINAL_ANSWER)
    assert [len(desk.booked(award["reference"])) for award in AWARDS] == [1, 1]
    run = Run.objects.get(tenant=desk.tenant, external_id=ticket[1])
    assert run.status == RunStatus.COMPLETED
    assert list(Intent.objects.filter(run=run).order_by("turn").values_list("args", "status")) == [
        (award, IntentStatus.PERFORMED) for award in AWARDS
    ]
