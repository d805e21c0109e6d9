"""The compensations pages of the console (dead letters, the catalogue), under their own
namespace: `compensations:dead_letters`."""

from django.urls import path

from . import dead_letter_views as views

app_name = "compensations"

urlpatterns = [
    path("dead-letters/", views.dead_letters, name="dead_letters"),
    path("dead-letters/<int:dead_letter_id>/<slug:action>/", views.dead_letter_act, name="dead_letter_act"),
    path("catalogue/", views.catalogue, name="catalogue"),
]
