# Seam's one image: the web (gunicorn), the Celery worker and beat, migrations and the demo
# sandbox all run from it with different commands (compose.yaml).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=config.settings.production

WORKDIR /app

# Dependencies first (only the project's runtime ones, at the versions the lock pins), so a code
# change does not reinstall them.
COPY pyproject.toml requirements.lock README.md ./
RUN pip install --no-cache-dir -c requirements.lock .

COPY . .

# Static files are collected at build time; the values below exist only to let the production
# settings load for this one command and are never used at run time.
RUN DJANGO_SECRET_KEY=build-only-collectstatic-key-not-used-at-run-time-0123456789 \
    DJANGO_ALLOWED_HOSTS=build \
    SEAM_AUDIT_KEY=build-only-audit-key-not-used-at-run-time-0123456789 \
    DATABASE_URL=postgres://build@localhost/build \
    CELERY_BROKER_URL=redis://localhost:6379/0 \
    SEAM_METRICS_PUBLIC=1 \
    python manage.py collectstatic --noinput \
 && useradd --system --uid 10001 --home-dir /app seam

USER seam
EXPOSE 8000
CMD ["gunicorn", "-c", "config/gunicorn.conf.py", "config.wsgi"]
