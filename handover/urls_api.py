from django.urls import path

from . import api

app_name = "api"

urlpatterns = [
    path("runs/", api.RunListCreateApi.as_view(), name="runs"),
    path("runs/<str:run_id>/", api.RunDetailApi.as_view(), name="run"),
    path("runs/<str:run_id>/handover/", api.HandoverApi.as_view(), name="handover"),
    path("runs/<str:run_id>/intents/", api.IntentCreateApi.as_view(), name="intents"),
    path(
        "runs/<str:run_id>/intents/<str:step_id>/outcome/",
        api.OutcomeApi.as_view(),
        name="outcome",
    ),
    path(
        "runs/<str:run_id>/customer-messages/",
        api.CustomerMessageCreateApi.as_view(),
        name="customer_messages",
    ),
    path("runs/<str:run_id>/heartbeat/", api.HeartbeatApi.as_view(), name="heartbeat"),
    path("runs/<str:run_id>/complete/", api.CompleteApi.as_view(), name="complete"),
    path("runs/<str:run_id>/cancel/", api.CancelApi.as_view(), name="cancel"),
    path("runs/<str:run_id>/counters/", api.CountApi.as_view(), name="counters"),
]
