"""Annotator pages, at the site root (/work/...). The researcher dashboard has frontend/urls.py."""

from django.urls import path

from frontend import annotator_views as views

app_name = "frontend"

urlpatterns = [
    path("work/", views.home, name="home"),
    path("work/login/", views.login, name="login"),
    path("work/me/", views.worker_page, name="worker"),
    path("work/logout/", views.logout, name="logout"),
    path("work/submit/", views.submit, name="submit"),
    path("work/give-back/", views.give_back, name="give_back"),
    path("work/finish/", views.finish, name="finish"),
    path("work/unit/<int:unit_id>/", views.unit_page, name="unit"),
    path("work/qualify/<slug:stage>/", views.qualify, name="qualify"),
    path("work/<slug:stage>/", views.stage_page, name="stage"),
]
