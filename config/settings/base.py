"""Settings shared by every environment. Everything that differs between machines comes from
the environment (or a `.env` file beside manage.py) through django-environ; a malformed value
stops start-up with a message naming the variable."""

import ipaddress
from datetime import timedelta
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _env_or_fail(read: Any, name: str, **kwargs: Any) -> Any:
    """Read one variable; turn a parse failure into an error that names the variable."""
    try:
        return read(name, **kwargs)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(f"Environment variable {name} is malformed: {exc}") from exc


SECRET_KEY = env("DJANGO_SECRET_KEY", default="insecure-local-only-key-do-not-use-in-production")
# The audit chain's HMAC key (audit.chain). Kept outside the database on purpose: someone who
# can rewrite the audit table cannot recompute the chain without it. Production requires its own.
SEAM_AUDIT_KEY = env("SEAM_AUDIT_KEY", default="insecure-local-only-audit-key-do-not-use-in-production")
# Where every committed head of the audit chain is also written, keyed, outside the database
# (audit.witness): a file path (append-only lines; keep it on storage the database's owner
# cannot rewrite, or ship it off the host) or "log" (a line on the logger seam.audit.witness).
# Only a file is read back by verification, which then reports a wipe, a truncation or a
# rollback of the trail. Empty: no witness.
SEAM_AUDIT_WITNESS = env("SEAM_AUDIT_WITNESS", default=str(BASE_DIR / "var" / "audit-witness.log"))
# The archive store (retention): one gzip'd JSON-lines file per batch of ended runs, by tenant and
# month, named relative to this directory in retention.Archive. Keep it on storage that is backed
# up apart from the database: once a month's partitions are dropped it is the runs' only copy.
SEAM_ARCHIVE_DIR = Path(env("SEAM_ARCHIVE_DIR", default=str(BASE_DIR / "var" / "archive")))
DEBUG = _env_or_fail(env.bool, "DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = _env_or_fail(env.list, "DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

# Every page's Content-Security-Policy: scripts, styles, images and requests from this origin
# only, no inline script or style (the console has none; htmx's indicator styles are off in
# templates/base.html), no framing, forms posting here only. The browser tests fail on any
# violation (tests/browser/conftest.py). The API's Swagger page alone allows its viewer's inline
# style block (config/urls.py).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "font-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # OpClass in index expressions (the trigram indexes of journal.models.Run), pg_trgm lookups.
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "simple_history",
    "journal",
    "audit",
    "console",
    "agent_api",
    "insights",
    "reconciliation",
    "compensations",
    "fanout",
    "tools",
    "retention",
    "observability",
    "axes",
]
# An integrator's own Django apps, from the environment (comma-separated; a deployment with a
# settings module of its own adds them to INSTALLED_APPS there instead). Each may declare tools,
# compensation catalogue entries, task policies and flows in its seam.py, which Seam discovers as
# the admin discovers admin.py (tools.discovery): which plug-ins are on is which apps are installed.
INSTALLED_APPS += _env_or_fail(env.list, "SEAM_APPS", default=[])
# The demo (the sandbox of downstream systems, the scripted flows and tickets) is no part of the
# product: local and test settings add these apps, production never does.
DEMO_APPS = ["sandbox", "scenarios"]

MIDDLEWARE = [
    # First, so every later middleware's and view's log records carry the request id.
    "observability.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Every /api/ request, both ways it travels: the Host checked, a missing trailing slash
    # answered, every refusal in JSON (agent_api/edges.py).
    "agent_api.edges.ApiEdgesMiddleware",
    # Before the lane, so the API's answers carry it too (it only sets a response header).
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # Agent-token calls to /api/v1/ go from here to their view (agent_api/lane.py): the
    # middleware below serves the console's people, not agent runtimes.
    "agent_api.lane.AgentLaneMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",
    # The Django admin answers 400 to a NUL or a selected row that is no id (journal.tenant_admin).
    "journal.tenant_admin.AdminBadInputMiddleware",
    # Last, as django-axes requires: it turns a lockout raised during authentication into the
    # lockout page (AXES_LOCKOUT_CALLABLE).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def database_from_env(default_url: str) -> dict[str, Any]:
    """DATABASE_URL → Django database settings, with the options the journal's durability needs.
    Seam runs on PostgreSQL only, the demo included (config/embedded_postgres.py when no server is
    given); any other engine stops start-up here."""
    db: dict[str, Any] = _env_or_fail(env.db_url, "DATABASE_URL", default=default_url)
    if db.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured(
            f"Environment variable DATABASE_URL must name PostgreSQL (postgres://...), not {db.get('ENGINE')!r}"
        )
    options = db.setdefault("OPTIONS", {})
    # An intent row must survive a crash the moment its commit returns: never let a role or
    # database default of synchronous_commit=off loosen that for this application's sessions.
    # JIT off: the app's queries are short index reads, where compiling costs more than it saves
    # (46 ms of one insights panel at 1,000,000 runs, bench/pages.py, planned as costly because
    # of the tables' size).
    options.setdefault("options", "-c synchronous_commit=on -c jit=off")
    # Django's own cursors bind client-side and never prepare; the journal's hot statements
    # (journal/sql.py) use server-binding cursors, and with a threshold psycopg
    # prepares them once per connection instead of parsing and planning every call.
    # (Behind a transaction-pooling PgBouncer older than 1.21, turn this off.)
    options.setdefault("prepare_threshold", 5)
    db.setdefault("CONN_MAX_AGE", 60)
    db["CONN_HEALTH_CHECKS"] = True
    # Django's backend with a health check that costs no round trip (journal.postgresql).
    db["ENGINE"] = "journal.postgresql"
    # Durability rule: nothing durable runs inside a request-wide transaction.
    db["ATOMIC_REQUESTS"] = False
    return db


# Each environment's settings module sets DATABASES from database_from_env with its own default.
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Login throttling (django-axes, console.login_throttle): after SEAM_LOGIN_FAILURE_LIMIT wrong
# passwords for one username from one address, that pair is refused (429, the lockout page) for
# SEAM_LOGIN_COOLOFF_MINUTES, counted again from each further failure; after
# SEAM_LOGIN_ADDRESS_FAILURE_LIMIT from one address over any usernames (password spraying), the
# address is. From an address the person has signed in from before, either lasts
# SEAM_LOGIN_USUAL_ADDRESS_COOLOFF_MINUTES. The admin's login is covered too. The right password
# does not help while locked out. A lockout is a `login_locked_out` audit row; an admin lifts it
# at once with the people admin's "let them sign in again" action (a `login_unlocked` row).
# The address is the connection's, or, behind SEAM_TRUSTED_PROXY_COUNT proxies of ours,
# X-Forwarded-For's entry the outermost of them wrote (docs/operations.md, "Proxies").
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = _env_or_fail(env.int, "SEAM_LOGIN_FAILURE_LIMIT", default=10)
SEAM_LOGIN_COOLOFF_MINUTES = _env_or_fail(env.int, "SEAM_LOGIN_COOLOFF_MINUTES", default=15)
AXES_COOLOFF_TIME = timedelta(minutes=SEAM_LOGIN_COOLOFF_MINUTES)
if AXES_FAILURE_LIMIT < 1 or SEAM_LOGIN_COOLOFF_MINUTES < 1:
    raise ImproperlyConfigured("SEAM_LOGIN_FAILURE_LIMIT and SEAM_LOGIN_COOLOFF_MINUTES must be at least 1.")
SEAM_LOGIN_ADDRESS_FAILURE_LIMIT = _env_or_fail(env.int, "SEAM_LOGIN_ADDRESS_FAILURE_LIMIT", default=20)
SEAM_LOGIN_USUAL_ADDRESS_COOLOFF_MINUTES = _env_or_fail(
    env.int, "SEAM_LOGIN_USUAL_ADDRESS_COOLOFF_MINUTES", default=2
)
if (
    SEAM_LOGIN_ADDRESS_FAILURE_LIMIT < 1
    or not 1 <= SEAM_LOGIN_USUAL_ADDRESS_COOLOFF_MINUTES <= SEAM_LOGIN_COOLOFF_MINUTES
):
    raise ImproperlyConfigured(
        "SEAM_LOGIN_ADDRESS_FAILURE_LIMIT must be at least 1, and SEAM_LOGIN_USUAL_ADDRESS_COOLOFF_MINUTES "
        "between 1 and SEAM_LOGIN_COOLOFF_MINUTES."
    )
# How many proxies of ours (load balancer, CDN) stand between clients and Seam, each appending to
# X-Forwarded-For. 0: none, the header is never read (a client could write anything in it).
SEAM_TRUSTED_PROXY_COUNT = _env_or_fail(env.int, "SEAM_TRUSTED_PROXY_COUNT", default=0)
if SEAM_TRUSTED_PROXY_COUNT < 0:
    raise ImproperlyConfigured("SEAM_TRUSTED_PROXY_COUNT must be 0 or more.")
AXES_CLIENT_IP_CALLABLE = "console.login_throttle.client_address"
AXES_HANDLER = "console.login_throttle.SeamLoginHandler"
# One person mistyping from the office does not lock out a colleague, and one address cannot guess
# one account's password past the limit.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "console.login_throttle.login_locked_out_response"
AXES_USERNAME_CALLABLE = "console.login_throttle.login_username"

LOGIN_URL = "login"
# Staff come to the console to see who waits for them: the queue, not every run.
LOGIN_REDIRECT_URL = "handover:queue"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where `collectstatic` writes and the web server serves from (DJANGO_STATIC_ROOT to move it).
STATIC_ROOT = Path(env("DJANGO_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))

# The product declares no tool of its own: the installed apps' seam.py modules do (SEAM_APPS
# above; the demo's sandbox app declares the sandbox's). An intent for a tool no installed app
# declares: `refuse` (400 naming `tool` and the declared tools; only when some tool is declared)
# or `accept` (journaled, but no lookup can settle it: for agents that also run tools Seam never
# calls and that are not declared, behind the MCP proxy or a framework adapter). docs/api.md.
SEAM_UNDECLARED_TOOLS = env("SEAM_UNDECLARED_TOOLS", default="refuse")
if SEAM_UNDECLARED_TOOLS not in ("refuse", "accept"):
    raise ImproperlyConfigured(
        f"Environment variable SEAM_UNDECLARED_TOOLS is malformed: {SEAM_UNDECLARED_TOOLS!r} is not refuse or accept"
    )
# Where the demo's sandbox of downstream systems listens (python manage.py runsandbox); its tools
# call it there (sandbox/seam.py).
SEAM_SANDBOX_URL = env("SEAM_SANDBOX_URL", default="http://127.0.0.1:8100")
# Whether Seam's own URLs include the sandbox at /sandbox/ (the demo and the tests do; it has no
# authentication, so production refuses to). `manage.py runsandbox` (a command of the sandbox app,
# installed by the local and test settings) serves it either way.
SEAM_SANDBOX_ENABLED = _env_or_fail(env.bool, "SEAM_SANDBOX_ENABLED", default=False)

# What versions the running code has per task type (schema, flow, policy, capability): a dotted
# path to a function returning {task_type: {...}}. A dead run recorded under other versions is not
# resumed silently (reconciliation.decisions). Blank (the default): none are declared, so no dead
# run's versions can be compared with the running code and reconciliation hands every one that
# would have been resumed to a person (version_mismatch) instead.
SEAM_RUNNING_VERSIONS = env("SEAM_RUNNING_VERSIONS", default="")
# The flows agents run (a dotted path to {task_type: Flow} or a list of flows); the compensations
# system checks read it to refuse a flow that does something irreversible before something
# reversible. Blank (the default): no flows are declared and that check has nothing to check.
SEAM_FLOWS = env("SEAM_FLOWS", default="")
# The installed apps' flows (their seam.py's `flows()`, scenarios.registry) are read by
# SEAM_FLOWS=scenarios.registry.all_flows and SEAM_RUNNING_VERSIONS=
# scenarios.registry.running_versions; their catalogue entries and task policies are written
# where missing by `manage.py seam_seed` (compensations.defaults, reconciliation.defaults).
SEAM_RESUME_TRANSIENT_RETRIES = _env_or_fail(env.int, "SEAM_RESUME_TRANSIENT_RETRIES", default=3)
# The recovery policy of a task type that has none, for the whole deployment: a strategy, with
# its phase for resume_until_phase, e.g. SEAM_DEFAULT_RECOVERY_POLICY=resume_until_phase:act.
# Blank (the default): a dead run of such a task type goes to a person, saying so.
SEAM_DEFAULT_RECOVERY_POLICY = env("SEAM_DEFAULT_RECOVERY_POLICY", default="")
# The error taxonomy's budgets (journal.attempts), "*" for every task type, a task type's own
# keys over them: repairs per tool after invalid_input, retries per call after transient and
# their spacing, and how many refusals within how many minutes make a run "looping".
SEAM_ERROR_BUDGETS: dict[str, dict[str, float]] = {
    "*": {"repairs": 2, "retries": 3, "retry_spacing_seconds": 1.0, "loop_refusals": 5, "loop_minutes": 10},
}

# Compensations: transient failures are retried this many times before the dead-letter queue;
# a dead letter's owner is this user if set, else the tenant's first team lead, else a superuser.
SEAM_COMPENSATION_MAX_ATTEMPTS = _env_or_fail(env.int, "SEAM_COMPENSATION_MAX_ATTEMPTS", default=5)
SEAM_DEAD_LETTER_DEFAULT_OWNER = env("SEAM_DEAD_LETTER_DEFAULT_OWNER", default="")
# Actions moving at least this amount (in any currency) say "high value" before the click.
SEAM_HIGH_VALUE_AMOUNT = _env_or_fail(env.float, "SEAM_HIGH_VALUE_AMOUNT", default=100.0)
# A compensation whose own call is in doubt waits this long for reconciliation before retrying.
SEAM_COMPENSATION_PENDING_RETRY_SECONDS = _env_or_fail(
    env.int, "SEAM_COMPENSATION_PENDING_RETRY_SECONDS", default=30
)

# Escalation notifications (console.notifications): links in emails and webhook posts point at
# SEAM_BASE_URL (where staff open the console), emails come from DEFAULT_FROM_EMAIL, and a
# webhook that has not answered within SEAM_WEBHOOK_TIMEOUT_SECONDS counts as failed.
SEAM_BASE_URL = env("SEAM_BASE_URL", default="http://127.0.0.1:8000")
DEFAULT_FROM_EMAIL = env("DJANGO_DEFAULT_FROM_EMAIL", default="seam@localhost")
SEAM_WEBHOOK_TIMEOUT_SECONDS = _env_or_fail(env.float, "SEAM_WEBHOOK_TIMEOUT_SECONDS", default=5.0)

# Where a tenant's webhook may point (console.outbound; docs/operations.md, "Where webhooks may
# go"): https only, plain http too where SEAM_WEBHOOK_ALLOW_HTTP (or DEBUG) is set, and never a
# loopback, private, link-local, multicast, reserved or cloud-metadata address unless its network
# is in SEAM_WEBHOOK_ALLOWED_NETWORKS (CIDRs, e.g. an internal chat server's 10.20.0.0/16) or its
# host name is in SEAM_WEBHOOK_ALLOWED_HOSTS. At most SEAM_WEBHOOK_MAX_RESPONSE_BYTES of an
# answer are read.
SEAM_WEBHOOK_ALLOW_HTTP = _env_or_fail(env.bool, "SEAM_WEBHOOK_ALLOW_HTTP", default=False)
SEAM_WEBHOOK_ALLOWED_NETWORKS = _env_or_fail(
    lambda name, **kw: [str(ipaddress.ip_network(n, strict=False)) for n in env.list(name, **kw)],
    "SEAM_WEBHOOK_ALLOWED_NETWORKS",
    default=[],
)
SEAM_WEBHOOK_ALLOWED_HOSTS = _env_or_fail(env.list, "SEAM_WEBHOOK_ALLOWED_HOSTS", default=[])
SEAM_WEBHOOK_MAX_RESPONSE_BYTES = _env_or_fail(env.int, "SEAM_WEBHOOK_MAX_RESPONSE_BYTES", default=65536)

# Agents send arguments up to the journal's own limit (journal.services.MAX_ARGS_BYTES);
# the request as a whole may carry a plan of several such steps.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# Bounded work (docs/reliability.md, "Bounded work"): a run's plan holds at most
# SEAM_MAX_PLAN_STEPS steps and a run records at most SEAM_MAX_INTENTS_PER_RUN intents (0: no
# limit; undos are admitted beyond it); beyond either the journal refuses, naming the field and
# the setting. A resumption or an undo of a run sends at most SEAM_STEPS_PER_PASS calls in one
# task, then queues the rest, so one run never holds a worker for long.
SEAM_MAX_PLAN_STEPS = _env_or_fail(env.int, "SEAM_MAX_PLAN_STEPS", default=200)
SEAM_MAX_INTENTS_PER_RUN = _env_or_fail(env.int, "SEAM_MAX_INTENTS_PER_RUN", default=1000)
SEAM_STEPS_PER_PASS = _env_or_fail(env.int, "SEAM_STEPS_PER_PASS", default=50)
# A deadline or a "told at" time is refused outside [SEAM_EARLIEST_TIME, now + its horizon].
SEAM_EARLIEST_TIME = env("SEAM_EARLIEST_TIME", default="2000-01-01T00:00:00+00:00")
SEAM_MAX_DEADLINE_DAYS = _env_or_fail(env.int, "SEAM_MAX_DEADLINE_DAYS", default=366)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agent_api.authentication.AgentTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "agent_api.views.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Seam API",
    "DESCRIPTION": "The run journal: intent before every side-effecting call, outcome after.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "journal.models.RunStatus",
        "IntentStatusEnum": "journal.models.IntentStatus",
        "CompensationStatusEnum": "compensations.models.CompensationStatus",
        "NextActionCodeEnum": "handover.NextActionCode",
        "ReversibilityKindEnum": "compensations.reversibility.ReversibilityKind",
    },
}

# Celery. Each environment's settings module sets CELERY_BROKER_URL: Redis in production and in
# the suite; the demo's is Kombu's SQLAlchemy transport on its own PostgreSQL (local.py).
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {"visibility_timeout": 3600}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = TIME_ZONE
# Workers log through LOGGING below (JSON lines with task and run ids), not Celery's own format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Reconciliation (reconciliation/): an intent row still `intended` this long after it was
# recorded, with its run silent as long, is in doubt and its downstream is asked about its key.
SEAM_STALE_AFTER_SECONDS = _env_or_fail(env.float, "SEAM_STALE_AFTER_SECONDS", default=60.0)
# Per-tool overrides, e.g. SEAM_STALE_AFTER_BY_TOOL=issue_refund=120,adjust_stock=300
SEAM_STALE_AFTER_BY_TOOL: dict[str, float] = {
    tool: float(seconds)
    for tool, seconds in _env_or_fail(env.dict, "SEAM_STALE_AFTER_BY_TOOL", default={}).items()
}
# Reconciliation never asks about a call that may still be in flight: an open intent younger
# than its tool's call timeout (ToolSpec.call_timeout, else its connector's, else
# SEAM_CALL_TIMEOUT_SECONDS) plus SEAM_IN_FLIGHT_MARGIN_SECONDS is left alone, whatever
# `reconcile --older-than` says.
SEAM_CALL_TIMEOUT_SECONDS = _env_or_fail(env.float, "SEAM_CALL_TIMEOUT_SECONDS", default=7.0)
SEAM_IN_FLIGHT_MARGIN_SECONDS = _env_or_fail(env.float, "SEAM_IN_FLIGHT_MARGIN_SECONDS", default=10.0)
SEAM_LOOKUP_MAX_ATTEMPTS = _env_or_fail(env.int, "SEAM_LOOKUP_MAX_ATTEMPTS", default=5)
SEAM_LOOKUP_BACKOFF_SECONDS = _env_or_fail(env.float, "SEAM_LOOKUP_BACKOFF_SECONDS", default=5.0)
SEAM_LOOKUP_BACKOFF_MAX_SECONDS = _env_or_fail(env.float, "SEAM_LOOKUP_BACKOFF_MAX_SECONDS", default=600.0)
# How long a sweeper's claim on a row lasts while it asks (longer than a lookup's timeouts).
SEAM_LOOKUP_LEASE_SECONDS = _env_or_fail(env.float, "SEAM_LOOKUP_LEASE_SECONDS", default=60.0)
# How many stale rows reconciliation claims, asks about and settles together: one transaction to
# claim them and one to settle them, instead of two per row. Their lookups must fit in the lease
# (SEAM_LOOKUP_LEASE_SECONDS); a row whose lease lapsed before its turn is left to the next sweep.
SEAM_RECONCILE_BATCH_SIZE = _env_or_fail(env.int, "SEAM_RECONCILE_BATCH_SIZE", default=50)
# Threads a sweeper asks a batch's downstreams with, side by side, each downstream within its
# declared bound (ToolSpec.lookup_concurrency and lookup_rate; reconciliation.lookups). More than
# a batch, so a batch's lookups can all be in flight at once: they mostly wait on the network.
SEAM_LOOKUP_THREADS = _env_or_fail(env.int, "SEAM_LOOKUP_THREADS", default=64)
SEAM_SWEEP_INTERVAL_SECONDS = _env_or_fail(env.float, "SEAM_SWEEP_INTERVAL_SECONDS", default=10.0)
# A pending compensation no worker has touched for this long lost its message (a broker restart
# or flush, a whole worker killed) and is queued again from its row. Longer than the longest
# retry countdown (about two minutes), so a compensation waiting out a retry is left alone.
SEAM_COMPENSATION_REQUEUE_AFTER_SECONDS = _env_or_fail(
    env.float, "SEAM_COMPENSATION_REQUEUE_AFTER_SECONDS", default=300.0
)
CELERY_BEAT_SCHEDULE = {
    "reconciliation-sweep-stale-intents": {
        "task": "reconciliation.sweep_stale_intents",
        "schedule": SEAM_SWEEP_INTERVAL_SECONDS,
        # A sweep not started within its interval is dropped: the next one re-finds the rows.
        "options": {"expires": SEAM_SWEEP_INTERVAL_SECONDS},
    },
    "compensations-requeue-stalled": {
        "task": "compensations.requeue_stalled",
        "schedule": SEAM_SWEEP_INTERVAL_SECONDS,
        "options": {"expires": SEAM_SWEEP_INTERVAL_SECONDS},
    },
    # The journal's monthly partitions, made two months ahead (journal.partitions); daily, so a
    # missed day changes nothing.
    "journal-create-months": {
        "task": "journal.create_months",
        "schedule": 86400.0,
        "options": {"expires": 3600.0},
    },
    # The insights page's error rollup (insights.error_counts): what it has not folded yet is
    # counted live on each view, so the interval bounds that work, not the numbers' freshness.
    "insights-fold-error-counts": {
        "task": "insights.fold_error_counts",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    # Daily: archive the ended runs past their tenant's retention (retention.services). A run
    # becomes due a day at a time, so a day's delay archives it a day later, nothing worse.
    "retention-archive-due-runs": {
        "task": "retention.archive_due_runs",
        "schedule": 24 * 3600.0,
        "options": {"expires": 12 * 3600.0},
    },
}

# Logs (observability/logs.py): one JSON object per line with SEAM_LOG_JSON=1 (production's
# default), a readable line otherwise; both carry request_id, task_id, run_id and step_id where
# known. The journal's per-call lines (logger seam.journal) are DEBUG.
SEAM_LOG_JSON = _env_or_fail(env.bool, "SEAM_LOG_JSON", default=False)
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "observability.logs.ContextFilter"}},
    "formatters": {
        "plain": {"()": "observability.logs.PlainFormatter"},
        "json": {"()": "observability.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if SEAM_LOG_JSON else "plain",
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": env("DJANGO_LOG_LEVEL", default="INFO")},
    # django-axes logs every login at INFO; its warnings (failures, lockouts) are what matter.
    "loggers": {"axes": {"level": "WARNING"}},
}

# /metrics (observability): when set, a scrape must present it as `Authorization: Bearer ...`.
SEAM_METRICS_TOKEN = env("SEAM_METRICS_TOKEN", default="")
