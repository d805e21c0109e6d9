"""Refuse to start the suite when PostgreSQL or Redis is not reachable, naming which one and how
to start it. The suite proves things on the real services; it never skips them."""

from __future__ import annotations

import os
import socket
import sys
from urllib.parse import urlparse

SERVICES = {
    "PostgreSQL": (
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"),
        "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    ),
    "Redis": (
        os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15"),
        "redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no",
    ),
}


def reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 0), timeout=3):
            return True
    except OSError:
        return False


def main() -> int:
    missing = [(name, url, how) for name, (url, how) in SERVICES.items() if not reachable(url)]
    for name, url, how in missing:
        print(
            f"ERROR: {name} is not reachable at {urlparse(url).netloc}. Start it with: {how}", file=sys.stderr
        )
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
