"""Production settings serve their static files through a manifest storage, so the pages need the
manifest `collectstatic` writes (issue 29, finding 8: the login page and every 404 answered 500
until it ran). Followed in order (docs/operations.md: migrate, collectstatic, the web server), the
login page and a 404 answer as they should; a web server started before `collectstatic` refuses
to start, saying what to run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.security.test_production_settings import (  # noqa: F401 - scratch_database_url is a fixture
    ROOT,
    deployment_env,
    run_python,
    scratch_database_url,
)

PAGES = """
import config.wsgi  # what gunicorn loads: its start-up check runs here
from django.test import Client
client = Client(HTTP_HOST="seam.example.com", raise_request_exception=False)
for path in ("/accounts/login/", "/no-such-page/"):
    print(path, client.get(path, secure=True).status_code)
"""


def _manage(*command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_web_server_refuses_to_start_before_collectstatic_saying_what_to_run(tmp_path: Path) -> None:
    env = deployment_env(DJANGO_STATIC_ROOT=str(tmp_path / "static"))

    result = run_python("import config.wsgi", env)

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr, result.stderr
    assert "python manage.py collectstatic --noinput" in result.stderr, result.stderr


def test_production_steps_in_order_serve_the_login_page_and_a_404(
    tmp_path: Path,
    scratch_database_url: str,  # noqa: F811 - the fixture
) -> None:
    env = deployment_env(DATABASE_URL=scratch_database_url, DJANGO_STATIC_ROOT=str(tmp_path / "static"))
    for step in (("migrate", "--noinput"), ("collectstatic", "--noinput")):
        done = _manage(*step, env=env)
        assert done.returncode == 0, done.stdout + done.stderr

    result = run_python(PAGES, env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["/accounts/login/", "200", "/no-such-page/", "404"], (
        result.stdout + result.stderr
    )
