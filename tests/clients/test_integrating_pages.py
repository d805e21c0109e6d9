"""docs/integrating.md's pages for the MCP proxy and the framework adapters work as written.

The MCP page's ```sh blocks run in order in one shell (its ```python blocks saved as the files
they name), against the test database, under the demo's settings and under production's: from seeding the example to a proxy killed after the
desk accepted a credit, reconciled by the desk's lookup, and the handover printed through
seam_client (`make chaos`). The framework pages' agent modules are run by
test_framework_adapters.py. The `pip install` lines of the three pages install into an empty
virtual environment, without Django (`make chaos`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from devtools.processes import GUIDE_SETTINGS, ROOT, database_url, free_port, settings_environment
from journal.models import Intent, IntentStatus, Run, RunStatus
from tests.clients.agent_support import DOC

MCP_PAGE = "## An MCP server behind Seam's proxy"
PAGES = (
    MCP_PAGE,
    "## A LangGraph or LangChain agent",
    "## An OpenAI Agents SDK agent",
    "## A Pydantic AI agent",
)


def section(heading: str) -> str:
    text = DOC.read_text()
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    return text[start : following if following != -1 else len(text)]


def blocks(heading: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", section(heading), flags=re.DOTALL | re.MULTILINE)


def is_install(block: str) -> bool:
    return block.startswith("pip install ")


# About a minute (a Seam server, a proxy, a desk, the in-flight wait): the same kill is in the
# default suite as test_mcp_proxy.py's; the page's own run is `make chaos`.
@pytest.mark.chaos
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("settings_kind", GUIDE_SETTINGS)
def test_the_mcp_page_takes_the_desk_from_a_killed_proxy_to_a_handed_over_session(
    tmp_path: Path, settings_kind: str
) -> None:
    # The page's files, saved where it says (beside manage.py, which the shell runs from).
    for block in blocks(MCP_PAGE, "python"):
        name = re.match(r"# (\S+\.py):", block)
        assert name, f"a python block names no file: {block[:60]}"
        (tmp_path / name[1]).write_text(block)
    (tmp_path / "manage.py").symlink_to(ROOT / "manage.py")
    script = "set -euo pipefail\n" + "\n".join(b for b in blocks(MCP_PAGE, "sh") if not is_install(b))
    env = {
        **os.environ,
        # `python` and `seam-mcp-proxy` are this virtualenv's, as the page assumes.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url(connection.settings_dict),
        # The page is followed against the demo's settings and against production's.
        **settings_environment(settings_kind),
        "SEAM_PORT": str(free_port()),
        "MCPDESK_STATE": str(tmp_path / "mcpdesk-state.json"),
    }

    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )

    log = done.stdout[-3000:] + done.stderr[-3000:]
    client_log = (tmp_path / "client.log").read_text() if (tmp_path / "client.log").exists() else ""
    assert done.returncode == 0, log + client_log
    # The client saw the desk's tools through the proxy and the first credit's answer; the second
    # never came back.
    assert "tools: get_balance, credit_account, close_account, find_call" in client_log
    assert "A-1 {'credit_id'" in client_log and "A-2 {" not in client_log
    out = done.stdout
    assert "reconciled 1 stale intent(s): 1 performed" in out
    state = json.loads((tmp_path / "mcpdesk-state.json").read_text())
    assert {account: entry["balance"] for account, entry in state["accounts"].items()} == {
        "A-1": "25.00",
        "A-2": "10.00",
    }
    credits = sorted(call["receipt"]["credit_id"] for call in state["calls"].values())
    assert len(credits) == 2
    # The handover, printed by the page's print_handover.py: both credits, undoable, nothing in doubt.
    printed = sorted(re.findall(r"^completed: credit_account (CR-\w+) - ", out, flags=re.MULTILINE))
    assert printed == credits
    assert "uncertain: 0" in out
    assert "status: escalated" in out
    run = Run.objects.get(task_type="desk_session")
    assert run.status == RunStatus.ESCALATED
    assert (
        list(Intent.objects.filter(run=run).values_list("status", flat=True)) == [IntentStatus.PERFORMED] * 2
    )


def test_each_page_installs_its_extra_and_shows_its_agent() -> None:
    installs = {heading: [b for b in blocks(heading, "sh") if is_install(b)] for heading in PAGES}
    assert installs == {
        MCP_PAGE: ['pip install "./clients/python[mcp]"\n'],
        "## A LangGraph or LangChain agent": ['pip install "./clients/python[langchain]" langgraph\n'],
        "## An OpenAI Agents SDK agent": ['pip install "./clients/python[openai-agents]"\n'],
        "## A Pydantic AI agent": ['pip install "./clients/python[pydantic-ai]"\n'],
    }
    shown = {heading: [b.split(":")[0] for b in blocks(heading, "python")] for heading in PAGES[1:]}
    # Each module is run by test_framework_adapters.py (through tests/clients/*_agent.py).
    assert shown == {
        "## A LangGraph or LangChain agent": ["# points_langgraph.py"],
        "## An OpenAI Agents SDK agent": ["# points_openai.py"],
        "## A Pydantic AI agent": ["# points_pydantic.py"],
    }


@pytest.mark.chaos
def test_the_pages_install_lines_work_in_an_empty_virtualenv_without_django(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    script = "set -euo pipefail\n" + "\n".join(
        b for heading in PAGES for b in blocks(heading, "sh") if is_install(b)
    )
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    check = (
        "import importlib.util, seam_client.mcp_proxy, seam_client.adapters.langchain, "
        "seam_client.adapters.openai_agents, seam_client.adapters.pydantic_ai, langchain.agents; "
        "assert importlib.util.find_spec('django') is None"
    )
    subprocess.run([str(venv / "bin" / "python"), "-c", check], cwd=tmp_path, check=True, timeout=120)
    assert (venv / "bin" / "seam-mcp-proxy").exists()
