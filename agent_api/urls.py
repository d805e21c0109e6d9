from django.urls import path

from . import views

app_name = "api"

urlpatterns = [
    path("runs/", views.RunListCreateApi.as_view(), name="runs"),
    path("runs/<str:run_id>/", views.RunDetailApi.as_view(), name="run"),
    path("runs/<str:run_id>/export/", views.RunExportApi.as_view(), name="export"),
    path("runs/<str:run_id>/handover/", views.HandoverApi.as_view(), name="handover"),
    path("runs/<str:run_id>/intents/", views.IntentCreateApi.as_view(), name="intents"),
    path(
        "runs/<str:run_id>/intents/<str:step_id>/outcome/",
        views.OutcomeApi.as_view(),
        name="outcome",
    ),
    path(
        "runs/<str:run_id>/customer-messages/",
        views.CustomerMessageCreateApi.as_view(),
        name="customer_messages",
    ),
    path("runs/<str:run_id>/heartbeat/", views.HeartbeatApi.as_view(), name="heartbeat"),
    path("runs/<str:run_id>/complete/", views.CompleteApi.as_view(), name="complete"),
    path("runs/<str:run_id>/cancel/", views.CancelApi.as_view(), name="cancel"),
    path("runs/<str:run_id>/counters/", views.CountApi.as_view(), name="counters"),
]
