from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SandboxConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sandbox"
    verbose_name = "Sandbox of downstream providers"

    def ready(self) -> None:
        from .catalogue import catalogue_seed_after_migrate

        # Once per `migrate`, after every app's migrations (the catalogue's table exists by then).
        post_migrate.connect(catalogue_seed_after_migrate, sender=self, dispatch_uid="sandbox.seed_catalogue")
