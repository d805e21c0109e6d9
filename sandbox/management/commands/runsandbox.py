"""`python manage.py runsandbox [--host 127.0.0.1] [--port 8100]`: serve the sandbox's providers
(docs/sandbox.md) from a process of their own, on sandbox.server, which can drop a connection
after acting (the `drop_after` fault). `--port 0` takes a free port; the line printed at start
names the one taken."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections

from sandbox import seeded_world
from sandbox.server import make_server


class Command(BaseCommand):
    help = "Serve the sandbox of downstream providers (drop_after needs this server, not runserver)."
    # The sandbox stands in for other companies' systems; Seam's own checks are not its concern.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8100, help="0 takes a free port")

    def handle(self, *args: Any, **options: Any) -> None:
        # Seeding first also proves the database is reachable and migrated before we listen.
        try:
            seeded_world.world_seed()
        except DatabaseError as exc:
            raise CommandError(
                f"cannot reach the sandbox's tables ({exc}); is the database up and migrated?"
            ) from exc
        connections.close_all()
        # This process is the downstream systems, not Seam: serve the sandbox's routes only (Seam
        # itself mounts them only where SEAM_SANDBOX_ENABLED, never in production).
        settings.ROOT_URLCONF = "sandbox.root_urls"
        server = make_server(options["host"], options["port"], WSGIHandler())
        url = f"http://{options['host']}:{server.server_port}"
        self.stdout.write(f"Sandbox listening on {url} (API under /sandbox/api/)")
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
