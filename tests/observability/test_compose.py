"""compose.yaml and the Dockerfile, checked without Docker: the services are there, each Django
process gets every variable the production settings insist on, and there is one beat."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
DJANGO_SERVICES = ("migrate", "web", "worker", "beat")


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def _required_by(settings_file: Path) -> set[str]:
    """Names read with env(...) / env.<type>(...) and no default: start-up fails without them."""
    names = set()
    for node in ast.walk(ast.parse(settings_file.read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        is_env = (isinstance(func, ast.Name) and func.id == "env") or (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "env"
        )
        name = node.args[0]
        if is_env and isinstance(name, ast.Constant) and not any(k.arg == "default" for k in node.keywords):
            names.add(name.value)
    return names


def _command(service: dict[str, Any]) -> str:
    command = service.get("command", "")
    return " ".join(command) if isinstance(command, list) else command


def test_compose_has_the_database_the_broker_and_every_process() -> None:
    services = _compose()["services"]
    assert set(services) >= {"postgres", "redis", "migrate", "web", "worker", "beat", "sandbox"}
    assert services["postgres"]["image"] == "postgres:16"
    assert services["redis"]["image"] == "redis:7"
    assert "gunicorn -c config/gunicorn.conf.py config.wsgi" in _command(services["web"])
    assert "celery -A config worker" in _command(services["worker"])
    assert "celery -A config beat" in _command(services["beat"])
    assert "migrate" in _command(services["migrate"]) and services["migrate"]["restart"] == "no"
    assert services["sandbox"]["profiles"] == ["demo"]
    # Nothing runs before the schema is migrated.
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    # One beat: not scaled (a doubled one is harmless, but not the design).
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1


def test_every_django_process_gets_what_the_production_settings_require() -> None:
    required = _required_by(ROOT / "config" / "settings" / "production.py")
    assert {"DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "DATABASE_URL", "CELERY_BROKER_URL"} <= required
    services = _compose()["services"]
    for name in DJANGO_SERVICES:
        environment = services[name]["environment"]
        assert environment["DJANGO_SETTINGS_MODULE"] == "config.settings.production", name
        missing = required - set(environment)
        assert not missing, (name, missing)
        assert environment["DATABASE_URL"].startswith("postgres://"), name
        assert re.match(r"rediss?://", environment["CELERY_BROKER_URL"]), name


def test_the_image_installs_the_locked_dependencies_on_python_3_12() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM python:3.12-slim" in dockerfile
    assert "pip install --no-cache-dir -c requirements.lock ." in dockerfile
    assert "USER seam" in dockerfile
