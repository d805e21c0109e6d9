"""`pip install ./clients/python` works in an empty virtual environment: the package installs
with only httpx, Django is not there, and the installed client drives a live Seam."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devtools.processes import ROOT
from journal.models import Intent, IntentStatus, Run, RunStatus
from tests.factories import VERSIONS

# A fresh virtualenv and a pip install: a minute, so in `make chaos` (which CI runs after `make test`).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chaos]

PACKAGE = ROOT / "clients" / "python"

AGENT = textwrap.dedent(
    """
    import json, sys
    from seam_client import Outcome, SeamClient

    url, token, versions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    with SeamClient(url, token) as seam:
        run = seam.start_run(task_type="returns", versions=versions, external_id="fresh-venv-1")
        done = run.perform(
            "start_return", {"order_id": "SU-1"}, lambda args, key: Outcome(receipt={"label": key[:8]}), turn=1
        )
        run.complete()
        print(json.dumps({"run": run.id, "status": done.status, "key": done.idempotency_key}))
    """
)


def fresh_venv(where: Path) -> Path:
    """An empty virtual environment (no system site-packages) at `where`; its python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True, timeout=120)
    return where / "bin" / "python"


def test_the_package_installs_without_django_and_drives_a_live_seam(
    tmp_path: Path, seam_server: str, agent_token: str
) -> None:
    python = fresh_venv(tmp_path / "env")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}

    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "./clients/python"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util, pathlib, seam_client; "
            "print(seam_client.__file__, importlib.util.find_spec('django') is None, "
            "pathlib.Path(seam_client.__file__).with_name('py.typed').exists())",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=True,
    )
    where, no_django, typed = probe.stdout.split()
    assert where.startswith(str(tmp_path / "env")) and (no_django, typed) == ("True", "True")
    # The build wrote nothing into the checkout.
    assert not (PACKAGE / "build").exists() and not list(PACKAGE.glob("**/*.egg-info"))
    freeze = subprocess.run(
        [str(python), "-m", "pip", "freeze"], capture_output=True, text=True, env=env, check=True
    ).stdout.lower()
    assert "httpx==" in freeze and "django" not in freeze and "requests" not in freeze

    agent = subprocess.run(
        [str(python), "-c", AGENT, seam_server, agent_token, json.dumps(VERSIONS)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )
    assert agent.returncode == 0, agent.stderr
    said = json.loads(agent.stdout)
    run = Run.objects.get(pk=said["run"])
    assert (run.status, run.external_id) == (RunStatus.COMPLETED, "fresh-venv-1")
    intent = Intent.objects.get(run=run)
    assert (intent.status, intent.idempotency_key) == (IntentStatus.PERFORMED, said["key"])
    assert intent.receipt == {"label": said["key"][:8]}
