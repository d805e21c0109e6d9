"""Production: every secret and host from the environment; no defaults that would be unsafe."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import DEMO_APPS, INSTALLED_APPS, LOGGING, _env_or_fail, database_from_env, env

SECRET_KEY = env("DJANGO_SECRET_KEY")
if SECRET_KEY.startswith("insecure") or len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set to a long random value in production.")
SEAM_AUDIT_KEY = env("SEAM_AUDIT_KEY")
if SEAM_AUDIT_KEY.startswith("insecure") or len(SEAM_AUDIT_KEY) < 32:
    raise ImproperlyConfigured(
        "SEAM_AUDIT_KEY must be set to a random value of 32+ characters in production."
    )
DEBUG = False
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS")
DATABASES = {"default": database_from_env(env("DATABASE_URL"))}
if not DATABASES["default"]["ENGINE"].endswith("postgresql"):
    raise ImproperlyConfigured("DATABASE_URL must name PostgreSQL (postgres://...) in production.")
# Persistent connections, checked before each request or task reuses them (CONN_HEALTH_CHECKS,
# set by database_from_env): a worker's connection that PostgreSQL or a proxy dropped overnight
# is replaced instead of failing the next task. 0 closes each at the end of its request.
DATABASES["default"]["CONN_MAX_AGE"] = _env_or_fail(env.int, "DJANGO_CONN_MAX_AGE", default=60)
CELERY_BROKER_URL = env("CELERY_BROKER_URL")
if not CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    raise ImproperlyConfigured("CELERY_BROKER_URL must name Redis (redis:// or rediss://) in production.")

# JSON log lines by default (SEAM_LOG_JSON=0 for readable ones).
SEAM_LOG_JSON = _env_or_fail(env.bool, "SEAM_LOG_JSON", default=True)
LOGGING["handlers"]["console"]["formatter"] = "json" if SEAM_LOG_JSON else "plain"

# No demo: INSTALLED_APPS is base's, without the sandbox or the scenarios (so neither their
# tables nor the demo's catalogue and policies are migrated into a production database, and
# none of their tools is declared). The tools are those of the operator's own apps, from the
# environment (SEAM_APPS, comma-separated app names; none by default), and so are SEAM_FLOWS and
# SEAM_RUNNING_VERSIONS (none by default).
if set(DEMO_APPS) & set(INSTALLED_APPS):
    raise ImproperlyConfigured(f"The demo apps {DEMO_APPS} cannot be installed in production.")

# The sandbox (a test double of the downstream systems, without authentication) is never part
# of a production Seam; its routes are not mounted.
if _env_or_fail(env.bool, "SEAM_SANDBOX_ENABLED", default=False):
    raise ImproperlyConfigured("SEAM_SANDBOX_ENABLED cannot be true in production.")
SEAM_SANDBOX_ENABLED = False

# /metrics names runs in doubt and dead letters: a deployment either gives Prometheus a token or
# says, explicitly, that its metrics port is private (SEAM_METRICS_PUBLIC=1).
if not env("SEAM_METRICS_TOKEN", default="") and not _env_or_fail(
    env.bool, "SEAM_METRICS_PUBLIC", default=False
):
    raise ImproperlyConfigured("SEAM_METRICS_TOKEN must be set in production (or SEAM_METRICS_PUBLIC=1).")

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
# Prometheus and the load balancer's health check talk plain HTTP to each node directly.
SECURE_REDIRECT_EXEMPT = [r"^metrics$", r"^healthz$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 30)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
