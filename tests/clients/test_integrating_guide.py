"""docs/integrating.md's seam-client walkthrough works as written: its ```python blocks are saved
as the files their first line names, its ```sh blocks run in order in one shell, against a live
Seam served under the demo's settings and under production's, from an empty virtual environment
to a run that died mid-call, was recovered without a second call and handed to a person."""

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
    ROOT,
    database_url,
    manage_py,
    serving_seam,
    settings_environment,
)
from journal.models import CustomerMessage, Intent, IntentStatus, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

DOC = ROOT / "docs" / "integrating.md"
SECTION = "## From pip install to a handed-over run with seam-client"


def blocks() -> list[tuple[str, str]]:
    """The section's fenced blocks, in order: (language, text)."""
    text = DOC.read_text()
    start = text.index(SECTION)
    following = text.find("\n## ", start + len(SECTION))
    section = text[start : following if following != -1 else len(text)]
    return re.findall(r"^```(sh|python)\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)


def test_every_block_of_the_guide_is_a_file_or_a_command() -> None:
    found = blocks()
    assert [language for language, _ in found].count("python") == 3
    for language, text in found:
        if language == "python":
            assert re.match(r"# [\w.]+\.py\n", text), text[:40]
    script = "\n".join(text for language, text in found if language == "sh")
    for step in (
        "pip install",
        "create_agent_token",
        "agent.py",
        "reconcile",
        "show_handover.py",
        "async_agent.py",
    ):
        assert step in script


# The whole walkthrough (an install, a killed agent, reconciliation) takes a minute and a half:
# in `make chaos`, which CI runs after `make test`.
@pytest.fixture(params=GUIDE_SETTINGS)
def guide_seam(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    """A Seam served under the demo's settings and under production's (the guide is followed
    against both), on the test database: its base URL and the environment its settings need,
    which the guide's own `manage.py` commands are given too."""
    environment = dict(settings_environment(request.param))
    db_url = database_url(connection.settings_dict)
    if request.param == "demo":  # the demo's tools ask its sandbox, which `make demo` starts
        environment["SEAM_SANDBOX_URL"] = request.getfixturevalue("sandbox_server")
        # The demo's catalogue and policies, as `make demo`'s migrations seed them: an earlier
        # transactional test may have emptied them, and manage.py's system check then refuses
        # every command of the page (compensations.E001).
        manage_py("seam_seed", env={**os.environ, **environment, "DATABASE_URL": db_url}, check=True)
    with serving_seam(db_url, environment=environment) as base:
        yield base, environment


@pytest.mark.chaos
def test_the_guide_takes_an_agent_from_pip_install_to_a_handed_over_run(
    tmp_path: Path, guide_seam: tuple[str, dict[str, str]]
) -> None:
    seam_url, environment = guide_seam
    settings_kind = "production" if environment["DJANGO_SETTINGS_MODULE"].endswith("production") else "demo"
    script = ["set -euo pipefail"]
    for language, text in blocks():
        if language == "python":
            name = text.split("\n", 1)[0].removeprefix("# ").strip()
            (tmp_path / name).write_text(text)
        else:
            script.append(text)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        # `python` is Seam's own virtualenv, as the guide says; the agent has one of its own.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SEAM_CHECKOUT": str(ROOT),
        "SEAM_URL": seam_url,
        "DATABASE_URL": database_url(connection.settings_dict),
        **environment,
    }

    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )

    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert re.search(r"^seam-client \d", out, flags=re.MULTILINE)
    # The first process called both tools and died inside the refund; the second called neither.
    assert out.count("calling start_return") == 1 and out.count("calling issue_refund") == 1
    assert "agent exited with 137" in out
    assert "found again" in out and "start_return: performed (replayed, not called)" in out
    assert "in doubt, not sent again: issue_refund" in out and "agent exited with 3" in out
    assert "completed: start_return {'label': 'RL-7734'}" in out
    # Under production's settings no connector is declared for the refund: nobody can say, and a
    # person settles it. The demo's sandbox is asked, and its ledger holds no refund.
    refund_settled = IntentStatus.UNKNOWN if settings_kind == "production" else IntentStatus.NOT_PERFORMED
    uncertain = re.findall(r"^uncertain: issue_refund key \w{12} - (\w+)$", out, flags=re.MULTILINE)
    assert uncertain == (["unknown"] if settings_kind == "production" else [])
    assert "customer told: email 'Your return label is attached.'" in out
    assert f"next: {'settle_uncertain' if settings_kind == 'production' else 'resume'}" in out
    assert "async run completed - start_return performed" in out

    run = Run.objects.get(external_id="returns:T-40912")
    assert run.status == RunStatus.ESCALATED
    rows = {i.tool: i for i in Intent.objects.filter(run=run)}
    assert (rows["start_return"].status, rows["issue_refund"].status) == (
        IntentStatus.PERFORMED,
        refund_settled,
    )
    assert CustomerMessage.objects.filter(run=run).count() == 1
    assert Run.objects.get(ticket_id="T-40913").status == RunStatus.COMPLETED
    assert not (ROOT / "clients" / "python" / "build").exists()
