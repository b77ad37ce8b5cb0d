"""Annotator pages, at the site root (/work/...). The researcher dashboard has frontend/urls.py."""

from django.urls import path

from frontend import annotator_views, qualification_views, worker_views

app_name = "frontend"

urlpatterns = [
    path("work/", worker_views.home, name="home"),
    path("work/login/", worker_views.login, name="login"),
    path("work/me/", worker_views.worker_page, name="worker"),
    path("work/logout/", worker_views.logout, name="logout"),
    path("work/submit/", annotator_views.submit, name="submit"),
    path("work/give-back/", annotator_views.give_back, name="give_back"),
    path("work/heartbeat/", annotator_views.heartbeat, name="heartbeat"),
    path("work/finish/", annotator_views.finish, name="finish"),
    path("work/unit/<int:unit_id>/", annotator_views.unit_page, name="unit"),
    path("work/qualify/<slug:stage>/", qualification_views.qualify, name="qualify"),
    path("work/<slug:stage>/", annotator_views.stage_page, name="stage"),
]
