"""Settings for `make demo` and development: PostgreSQL, the machine's when DATABASE_URL names it,
else the demo's embedded server under var/postgres (config/embedded_postgres.py, which
scripts/serve-demo.sh starts); the broker is Kombu's SQLAlchemy transport on that same database
unless CELERY_BROKER_URL says otherwise, so the demo needs no Redis."""

from urllib.parse import quote

from .base import *  # noqa: F403
from .base import BASE_DIR, DEMO_APPS, INSTALLED_APPS, database_from_env, env

# The embedded server's socket (config/embedded_postgres.py: its data folder, the socket beside
# it, no TCP port). `make demo` passes the URL the server reports in DATABASE_URL anyway; this
# default lets a second terminal's `manage.py` find the running demo.
_EMBEDDED_DATABASE_URL = (
    f"postgres://postgres@/seam?host={quote(str(BASE_DIR / 'var' / 'postgres'))}&port=5432"
)
DATABASES = {"default": database_from_env(_EMBEDDED_DATABASE_URL)}
# Kombu's SQLAlchemy transport (messages are rows of its own two tables) on the database above,
# through psycopg 3 as Django connects. It takes no transport options: they go to SQLAlchemy's
# create_engine.
_DATABASE_URL = env("DATABASE_URL", default=_EMBEDDED_DATABASE_URL)
CELERY_BROKER_URL = env(
    "CELERY_BROKER_URL", default="sqla+postgresql+psycopg://" + _DATABASE_URL.partition("://")[2]
)
if CELERY_BROKER_URL.startswith("sqla+"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {}

# Off, so the demo's pages are the ones people meet: the styled 404 and 500 (templates/404.html,
# 500.html), never Django's debug page with its URL patterns and settings. DJANGO_DEBUG=true
# brings the debug pages back while developing.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
MAILERS = {"default": {"BACKEND": "django.core.mail.backends.console.EmailBackend"}}

# Serve static files from the app and static/ folders directly; no collectstatic in development.
# WhiteNoise serves them whatever DEBUG says (runserver's own static handler only with DEBUG on).
# The sandbox of downstream systems is served at /sandbox/ beside Seam's pages.
SEAM_SANDBOX_ENABLED = env.bool("SEAM_SANDBOX_ENABLED", default=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# The demo: the sandbox of downstream systems and its tools, the scripted flows and tickets (with
# their running versions), each app declaring its plug-ins in its seam.py, and, seeded when
# `migrate` runs, the sandbox's compensation catalogue and the flows' recovery policies
# (sandbox.catalogue, scenarios.policies).
INSTALLED_APPS = [*INSTALLED_APPS, *DEMO_APPS]
SEAM_RUNNING_VERSIONS = env("SEAM_RUNNING_VERSIONS", default="scenarios.registry.running_versions")
SEAM_FLOWS = env("SEAM_FLOWS", default="scenarios.registry.all_flows")
