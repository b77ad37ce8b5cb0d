"""The researcher dashboard (staff only), mounted at /dashboard/."""

from django.urls import path

from frontend import dashboard

app_name = "dashboard"

urlpatterns = [
    path("", dashboard.index, name="index"),
    path("tournaments/<int:tournament_id>/leaderboard/", dashboard.leaderboard, name="leaderboard"),
    path("tournaments/<int:tournament_id>/plots/judge-report-length.png", dashboard.judge_report_length_plot,
         name="judge_report_length_plot"),
    path("tournaments/<int:tournament_id>/plots/elo-<str:judge>.png", dashboard.elo_plot, name="elo_plot"),
    path(
        "tournaments/<int:tournament_id>/plots/categories-<str:judge>.png",
        dashboard.category_plot,
        name="category_plot",
    ),
    path(
        "tournaments/<int:tournament_id>/plots/agreement-<str:judge>.png",
        dashboard.agreement_plot,
        name="agreement_plot",
    ),
]
