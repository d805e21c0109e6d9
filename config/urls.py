from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.utils.csp import CSP
from django.views.decorators.csp import csp_override
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

API_DOCS_POLICY: dict[str, Any] = {**settings.SECURE_CSP, "style-src": [CSP.SELF, CSP.UNSAFE_INLINE]}

urlpatterns = [
    # First: an agent's call resolves here without trying the console's patterns before it.
    path("api/v1/", include("agent_api.urls")),
    path("", include("console.urls")),
    path("", include("insights.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's starter as a script of its own, so the page runs under
    # the site's policy; only the viewer's own <style> block needs inline styles.
    path(
        "api/docs/",
        csp_override(API_DOCS_POLICY)(SpectacularSwaggerSplitView.as_view(url_name="schema")),
        name="api-docs",
    ),
    path("", include("monitoring.urls")),
]

# The sandbox is a test double of the downstream systems with no users and no authentication:
# mounted for the demo and the tests, never in production (SEAM_SANDBOX_ENABLED).
if settings.SEAM_SANDBOX_ENABLED:
    urlpatterns.append(path("sandbox/", include("sandbox.urls")))
