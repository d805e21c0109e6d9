"""The URLconf of `manage.py runsandbox`: the sandbox alone, at /sandbox/ as in config.urls.
Its own process serves only the test double, whatever SEAM_SANDBOX_ENABLED says about Seam's."""

from django.urls import include, path

urlpatterns = [path("sandbox/", include("sandbox.urls"))]
