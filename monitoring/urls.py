from django.urls import path

from . import views

app_name = "monitoring"

urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    path("healthz", views.healthz, name="healthz"),
]
