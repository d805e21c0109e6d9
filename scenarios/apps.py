from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ScenariosConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "scenarios"
    verbose_name = "Flows, tickets and the kill-point harness"

    def ready(self) -> None:
        from .policies import policies_seed_after_migrate

        # Once per `migrate`, after every app's migrations (the policies' table exists by then).
        post_migrate.connect(policies_seed_after_migrate, sender=self, dispatch_uid="scenarios.seed_policies")
