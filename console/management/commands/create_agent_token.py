from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import IntegrityError

from journal.models import AgentToken, Tenant


class Command(BaseCommand):
    help = "Create an API token for one agent runtime of one tenant and print it (shown only once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="Tenant slug; created if it does not exist.")
        parser.add_argument(
            "--name", required=True, help="The runtime's name, shown as the actor in the journal."
        )

    def handle(self, *args: Any, tenant: str, name: str, **options: Any) -> None:
        owner, _ = Tenant.objects.get_or_create(slug=tenant, defaults={"name": tenant})
        secret = AgentToken.new_secret()
        try:
            AgentToken.objects.create(tenant=owner, name=name, digest=AgentToken.digest_of(secret))
        except IntegrityError as exc:
            raise CommandError(f"Tenant {tenant} already has a token named {name!r}.") from exc
        self.stdout.write(secret)
