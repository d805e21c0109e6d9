from django.urls import path

from . import views

app_name = "compensations"

urlpatterns = [
    path("dead-letters/", views.dead_letters, name="dead_letters"),
    path("dead-letters/<int:dead_letter_id>/<slug:action>/", views.dead_letter_act, name="dead_letter_act"),
    path("catalogue/", views.catalogue, name="catalogue"),
]
