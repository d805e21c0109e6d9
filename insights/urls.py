from django.urls import path

from . import views

app_name = "insights"

urlpatterns = [
    path("insights/", views.insights_page, name="page"),
    path("insights.csv", views.insights_csv, name="csv"),
]
