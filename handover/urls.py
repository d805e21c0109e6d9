from django.urls import path

from . import views

app_name = "handover"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run_detail"),
]
