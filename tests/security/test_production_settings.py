"""Production settings: `check --deploy` is clean with the environment a deployment gives, every
secret comes from the environment (start-up refuses without it), no secret is written in the
repository, and the sandbox (a test double without authentication) is not served. Production has
no demo: neither the sandbox nor the scenarios are installed or imported, the tools are the ones
the environment names, and `migrate` writes no demo catalogue entry or task policy."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.urls import Resolver404, resolve

from devtools.processes import database_url

ROOT = Path(__file__).resolve().parent.parent.parent


def deployment_env(**changes: str | None) -> dict[str, str]:
    """The environment a deployment gives production settings, and nothing of this shell's
    (so no DJANGO_* or DATABASE_URL of the test run leaks in); a change to None removes one."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
        "DJANGO_ALLOWED_HOSTS": "seam.example.com",
        "DATABASE_URL": "postgres://seam@127.0.0.1:5432/seam",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
        "SEAM_METRICS_TOKEN": secrets.token_urlsafe(32),
        "SEAM_AUDIT_KEY": secrets.token_urlsafe(32),
    }
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


SETUP = "import django; django.setup(); print('started')"


def test_check_deploy_is_clean_under_production_settings() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=deployment_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr
    assert "WARNING" not in result.stdout + result.stderr


def test_production_settings_start_with_a_deployments_environment() -> None:
    result = run_python(SETUP, deployment_env())
    assert result.returncode == 0, result.stderr
    assert "started" in result.stdout


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"DJANGO_SECRET_KEY": None}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_SECRET_KEY": "too-short"}, "DJANGO_SECRET_KEY"),
        (
            {"DJANGO_SECRET_KEY": "insecure-local-only-key-do-not-use-in-production" + "x" * 20},
            "DJANGO_SECRET_KEY",
        ),
        ({"DATABASE_URL": None}, "DATABASE_URL"),
        ({"CELERY_BROKER_URL": None}, "CELERY_BROKER_URL"),
        ({"DJANGO_ALLOWED_HOSTS": None}, "DJANGO_ALLOWED_HOSTS"),
        ({"SEAM_SANDBOX_ENABLED": "true"}, "SEAM_SANDBOX_ENABLED"),
        ({"SEAM_METRICS_TOKEN": None}, "SEAM_METRICS_TOKEN"),
        ({"SEAM_AUDIT_KEY": None}, "SEAM_AUDIT_KEY"),
        ({"SEAM_AUDIT_KEY": "too-short"}, "SEAM_AUDIT_KEY"),
        ({"SEAM_AUDIT_KEY": "insecure-local-only-audit-key-do-not-use-in-production"}, "SEAM_AUDIT_KEY"),
    ],
    ids=lambda value: next(iter(value)) if isinstance(value, dict) else None,
)
def test_production_refuses_to_start_without_each_secret_from_the_environment(
    changes: dict[str, str | None], named: str
) -> None:
    result = run_python(SETUP, deployment_env(**changes))
    assert result.returncode != 0
    assert "started" not in result.stdout
    assert "ImproperlyConfigured" in result.stderr, result.stderr
    assert named in result.stderr, result.stderr


def test_the_sandbox_is_not_served_under_production_settings() -> None:
    code = (
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from django.urls import Resolver404, resolve, reverse, NoReverseMatch\n"
        "assert settings.SEAM_SANDBOX_ENABLED is False\n"
        "for path in ('/sandbox/', '/sandbox/api/payments/refund', '/sandbox/api/ledger/'):\n"
        "    try:\n"
        "        match = resolve(path)\n"
        "    except Resolver404:\n"
        "        continue\n"
        "    raise SystemExit(f'{path} is served by {match.view_name}')\n"
        "try:\n"
        "    reverse('sandbox:world')\n"
        "except NoReverseMatch:\n"
        "    print('no sandbox')\n"
    )
    result = run_python(code, deployment_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no sandbox" in result.stdout


def test_the_sandbox_is_served_under_the_test_settings() -> None:
    assert resolve("/sandbox/api/ledger/").view_name == "sandbox:ledger"


def test_runsandbox_serves_the_sandbox_whatever_seams_urls_mount() -> None:
    from sandbox import root_urls

    with pytest.raises(Resolver404):
        resolve("/api/v1/runs/", urlconf=root_urls)
    assert resolve("/sandbox/api/ledger/", urlconf=root_urls).view_name == "sandbox:ledger"


# --- no demo in production ----------------------------------------------------------------

DEMO = ("sandbox", "scenarios")
PRODUCT = (
    "config",
    "journal",
    "tools",
    "reconciliation",
    "compensations",
    "fanout",
    "handover",
    "monitoring",
    "observability",
)


def test_production_installs_neither_the_sandbox_nor_the_scenarios() -> None:
    # ... nor offers their commands (no demo users, no seeded runs, no sandbox server).
    code = (
        "import django; django.setup()\n"
        "from django.apps import apps\n"
        "from django.conf import settings\n"
        f"for app in {DEMO!r}:\n"
        "    assert not apps.is_installed(app), app\n"
        "    assert app not in settings.INSTALLED_APPS, app\n"
        "from django.core.management import get_commands\n"
        "demo_commands = {'runsandbox', 'seed_demo', 'create_demo_users', 'replay_ticket'}\n"
        "assert not demo_commands & set(get_commands()), demo_commands & set(get_commands())\n"
        "assert settings.SEAM_FLOWS == '', settings.SEAM_FLOWS\n"
        "assert settings.SEAM_RUNNING_VERSIONS == '', settings.SEAM_RUNNING_VERSIONS\n"
        "print('no demo')\n"
    )
    result = run_python(code, deployment_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no demo" in result.stdout


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A STATIC_ROOT that `collectstatic` filled under production settings (config.wsgi refuses
    to load without one: config.static_files)."""
    root = str(tmp_path_factory.mktemp("static"))
    result = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=deployment_env(DJANGO_STATIC_ROOT=root),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return root


def test_production_imports_nothing_of_the_demo(collected_static: str) -> None:
    """What import-linter's `demo-outside-the-product` contract says of the source, at run time:
    every module of the product (migrations and management commands included) and the URLconf
    load under production settings without loading a module of the sandbox or the scenarios."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import django; django.setup()\n"
        "from django.urls import get_resolver\n"
        "get_resolver().url_patterns\n"
        f"for package in {PRODUCT!r}:\n"
        "    module = importlib.import_module(package)\n"
        "    for info in pkgutil.walk_packages(module.__path__, package + '.'):\n"
        "        importlib.import_module(info.name)\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {DEMO!r})\n"
        "assert not loaded, loaded\n"
        "print('imported', len(sys.modules))\n"
    )
    result = run_python(code, deployment_env(DJANGO_STATIC_ROOT=collected_static))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "imported" in result.stdout


TOOLS = (
    "import django; django.setup()\n"
    "from tools.discovery import seam_modules\n"
    "from tools.registry import all_tools\n"
    "print([module.__name__ for module in seam_modules()], sorted(all_tools()))\n"
)


@pytest.mark.parametrize(
    ("apps", "expected"),
    [
        (None, "[] []"),
        ("", "[] []"),
        ("tests.security.operator_tools", "['tests.security.operator_tools.seam'] ['open_ticket']"),
    ],
    ids=["unset", "empty", "an-operators-app"],
)
def test_production_declares_the_tools_of_the_apps_the_environment_installs(
    apps: str | None, expected: str
) -> None:
    result = run_python(TOOLS, deployment_env(SEAM_APPS=apps))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == expected


@pytest.fixture
def scratch_database_url() -> Iterator[str]:
    """An empty PostgreSQL database on the suite's server, created for the test and dropped after."""
    server = dict(settings.DATABASES["default"])
    name = f"seam_prod_migrate_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(database_url({**server, "NAME": "postgres"}), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url({**server, "NAME": name})
    finally:
        with psycopg.connect(database_url({**server, "NAME": "postgres"}), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_migrate_under_production_settings_writes_no_demo_data(scratch_database_url: str) -> None:
    env = deployment_env(DATABASE_URL=scratch_database_url)
    for _ in range(2):  # a second `migrate` (the next release's) adds nothing either
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    with psycopg.connect(scratch_database_url) as conn:
        counts = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608
            for table in (
                "compensations_catalogueentry",
                "compensations_historicalcatalogueentry",
                "reconciliation_taskpolicy",
                "reconciliation_historicaltaskpolicy",
            )
        }
        demo_tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'sandbox%' OR tablename LIKE 'scenarios%'"
        ).fetchall()
        demo_migrations = conn.execute(
            "SELECT app, name FROM django_migrations WHERE app IN ('sandbox', 'scenarios')"
        ).fetchall()
        roles = {row[0] for row in conn.execute("SELECT name FROM auth_group").fetchall()}
    assert counts == dict.fromkeys(counts, 0)
    assert demo_tables == []
    assert demo_migrations == []
    # What the product's migrations do set up is still there: the staff roles.
    assert {"support_staff", "team_lead", "admin"} <= roles


# --- no secret in the repository -------------------------------------------------------------

SECRET_PATTERNS = {
    "a private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "an AWS access key": re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    "a GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    "a Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    # A placeholder (`user:password@`, `${POSTGRES_PASSWORD}`) is not a password.
    "a password in a URL": re.compile(
        r"\b(?:postgres(?:ql)?|redis|rediss|amqp)://[^\s:/@$]+:(?!\$\{|password@|secret@|\.\.\.@)[^\s@/$]+@"
    ),
    "a secret assigned in settings": re.compile(
        r"^\s*(?:SECRET_KEY|[A-Z_]*(?:PASSWORD|TOKEN|API_KEY))\s*=\s*['\"][^'\"]{8,}['\"]", re.M
    ),
}
SKIP_DIRS = {
    ".git",
    ".venv",
    "node_modules",
    "var",
    "staticfiles",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
}
SCANNED = {".py", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".env", ".sh", ".json", ".md", ""}
# Throwaway credentials of users that benchmarks create in their own scratch databases.
ALLOWED = {"bench/load.py", "bench/pages.py"}


def _scanned_files() -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in filenames:
            path = Path(dirpath) / name
            if path.suffix in SCANNED and not str(path.relative_to(ROOT)).startswith("tests/"):
                files.append(path)
    return files


def test_no_secret_is_written_in_the_repository() -> None:
    found = []
    for path in _scanned_files():
        relative = str(path.relative_to(ROOT))
        if relative in ALLOWED:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{relative}: {what}" for what, pattern in SECRET_PATTERNS.items() if pattern.search(text)]
    assert not found, found
