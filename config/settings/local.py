"""Settings for `make demo` and development: the embedded SQLite and filesystem broker unless
DATABASE_URL / CELERY_BROKER_URL say otherwise."""

from .base import *  # noqa: F403
from .base import DEMO_APPS, INSTALLED_APPS, _env_or_fail, env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
MAILERS = {"default": {"BACKEND": "django.core.mail.backends.console.EmailBackend"}}

# Serve static files from the app and static/ folders directly; no collectstatic in development.
# The sandbox of downstream systems is served at /sandbox/ beside Seam's pages.
SEAM_SANDBOX_ENABLED = env.bool("SEAM_SANDBOX_ENABLED", default=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# The demo: the sandbox of downstream systems and its tools, the scripted flows and tickets (with
# their running versions), and, seeded when `migrate` runs, the sandbox's compensation catalogue
# and the flows' recovery policies (sandbox.catalogue, scenarios.policies).
INSTALLED_APPS = [*INSTALLED_APPS, *DEMO_APPS]
SEAM_TOOL_MODULES = _env_or_fail(env.list, "SEAM_TOOL_MODULES", default=["sandbox.tools"])
SEAM_FLOW_MODULES = _env_or_fail(
    env.list, "SEAM_FLOW_MODULES", default=["scenarios.flows", "scenarios.tickets"]
)
SEAM_CATALOGUE_MODULES = _env_or_fail(env.list, "SEAM_CATALOGUE_MODULES", default=["sandbox.catalogue"])
SEAM_POLICY_MODULES = _env_or_fail(env.list, "SEAM_POLICY_MODULES", default=["scenarios.policies"])
SEAM_RUNNING_VERSIONS = env("SEAM_RUNNING_VERSIONS", default="scenarios.registry.running_versions")
SEAM_FLOWS = env("SEAM_FLOWS", default="scenarios.registry.all_flows")
