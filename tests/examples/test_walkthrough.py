"""docs/integrating.md's giftdesk walkthrough works as written: its ```sh blocks, run in order in
one shell against the test database (under the suite's settings and the demo's), take the example
from nothing to a recovered, handed-over run, and what they print says so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from devtools.processes import ROOT, database_url, free_port, settings_environment

pytestmark = pytest.mark.django_db(transaction=True)

DOC = ROOT / "docs" / "integrating.md"
SECTION = "## A worked example: the giftdesk"


def walkthrough_commands() -> list[str]:
    """The walkthrough section's ```sh blocks, in order."""
    text = DOC.read_text()
    start = text.index(SECTION)
    following = text.find("\n## ", start + len(SECTION))
    section = text[start : following if following != -1 else len(text)]
    return re.findall(r"^```sh\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)


def test_the_walkthrough_shows_each_step_as_a_command() -> None:
    script = "\n".join(walkthrough_commands())
    for step in (
        "examples.giftdesk.provider",
        "seam_seed",
        "replay_ticket GD-100",
        "reconcile",
        "handover_for",
    ):
        assert step in script


# The walkthrough is an integrator's development loop: its kill harness (`replay_ticket`) is a
# command of the demo's scenarios app, which production's settings never install. So it is
# followed under the suite's settings and, in `make chaos`, under the demo's; not production's.
@pytest.mark.parametrize("settings_kind", ["suite", pytest.param("demo", marks=pytest.mark.chaos)])
def test_the_walkthrough_takes_the_example_to_a_recovered_handed_over_run(
    tmp_path: Path, settings_kind: str
) -> None:
    script = "set -euo pipefail\n" + "\n".join(walkthrough_commands())
    settings_env = (
        {"DJANGO_SETTINGS_MODULE": "config.settings.test"}
        if settings_kind == "suite"
        else settings_environment(settings_kind)
    )
    env = {
        **os.environ,
        # `python` is this interpreter, as the doc assumes the project's virtualenv.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        **settings_env,
        "DATABASE_URL": database_url(connection.settings_dict),
        "GIFTDESK_PORT": str(free_port()),
        "GIFTDESK_STATE": str(tmp_path / "giftdesk.json"),
    }

    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "GD-100: the runner was killed (SIGKILL)" in out
    assert "world: 2 effect(s); journal: 1 performed, 1 open" in out
    assert "VIOLATION" not in out
    assert "completed: load_gift_card" in out and "completed: award_points" in out
    # The sweep found the points by their reference, and the policy resumed the run to the end.
    assert re.search(r"^intent \d+: performed$", out, flags=re.MULTILINE)
    assert "reconciled 1 stale intent(s): 1 performed" in out
    assert "(GD-100): completed" in out
    assert "completed: send_goodwill_email" in out
    assert "uncertain: 0" in out
    assert "next: nothing_waiting" in out
    # The provider booked the points once: the resume did not send them again.
    assert '"entry_id": "pt_1"' in out and '"entry_id": "pt_2"' not in out
    assert '"message_id": "msg_1"' in out and '"message_id": "msg_2"' not in out
    assert "curl" not in "\n".join(walkthrough_commands())  # nothing beyond Python is assumed
