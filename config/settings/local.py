"""Settings for `make demo` and development: the embedded SQLite and filesystem broker unless
DATABASE_URL / CELERY_BROKER_URL say otherwise."""

from .base import *  # noqa: F403
from .base import env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
MAILERS = {"default": {"BACKEND": "django.core.mail.backends.console.EmailBackend"}}

# Serve static files from the app and static/ folders directly; no collectstatic in development.
# The sandbox of downstream systems is served at /sandbox/ beside Seam's pages.
SEAM_SANDBOX_ENABLED = env.bool("SEAM_SANDBOX_ENABLED", default=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
