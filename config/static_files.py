"""The web server refuses to start without its collected static files.

Under production settings static files are served from STATIC_ROOT through a manifest storage
(whitenoise's CompressedManifestStaticFilesStorage), which names each file by its hash from
the manifest that `collectstatic` writes. Without that manifest every page that links a static
file (the login page, every 404) fails with "Missing staticfiles manifest entry" and answers a
bare 500. So the WSGI and ASGI applications check for it when they load, and a server started
before `collectstatic` stops at once saying what to run (docs/operations.md lists the steps)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import storages


def static_files_collected() -> None:
    """Raise ImproperlyConfigured when the static files storage is a manifest storage and no
    manifest was collected into STATIC_ROOT; nothing otherwise (a plain storage needs none)."""
    storage = storages["staticfiles"]
    if not isinstance(storage, ManifestFilesMixin) or storage.read_manifest() is not None:
        return
    raise ImproperlyConfigured(
        f"The static files are not collected: {settings.STATIC_ROOT}/{storage.manifest_name} is missing, "
        "so every page would answer 500. Run `python manage.py collectstatic --noinput` (with these "
        "settings) before starting the web server; docs/operations.md lists every production step."
    )
