import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
application = get_asgi_application()

# Only once Django is set up: the check reads the settings' static files storage.
from config.static_files import static_files_collected  # noqa: E402

static_files_collected()
