from django.urls import path

from . import catalogue_views, dead_letter_views, views

app_name = "handover"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("runs/", views.run_list, name="run_list"),
    path("runs/bulk/", views.run_bulk, name="run_bulk"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<uuid:run_id>/panel/", views.run_panel, name="run_panel"),
    path("runs/<uuid:run_id>/confirm/<slug:action>/", views.run_confirm, name="run_confirm"),
    path("runs/<uuid:run_id>/act/<slug:action>/", views.run_act, name="run_act"),
    path("runs/<uuid:run_id>/preview/<slug:action>/", views.run_preview, name="run_preview"),
    path("audit/", views.audit, name="audit"),
    path("audit.csv", views.audit_csv, name="audit_csv"),
    path("audit/verify/", views.audit_verify, name="audit_verify"),
    path("dead-letters/", dead_letter_views.dead_letters, name="dead_letters"),
    path(
        "dead-letters/<int:dead_letter_id>/<slug:action>/",
        dead_letter_views.dead_letter_act,
        name="dead_letter_act",
    ),
    path("catalogue/", dead_letter_views.catalogue, name="catalogue"),
    path("catalogue/<int:entry_id>/edit/", catalogue_views.catalogue_edit, name="catalogue_edit"),
    path("catalogue/<int:entry_id>/preview/", catalogue_views.catalogue_preview, name="catalogue_preview"),
]
