"""Every page a researcher opens, on the campaign-sized world of benchmarks/scale.py.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/scale.py
    .venv/bin/python benchmarks/researcher_pages.py [--repeat 5] [--only admin]

It walks, as a logged-in superuser with the Django test client (server time: routing, queries,
templates; no network), every admin list page of the project's models with its default filters,
ordering and a search where it has one, the change page of one row of each, each family's and
tournament's workflow page (a sample), the dashboard and each tournament's leaderboard, and the
API's list endpoints; each --repeat times. It prints each page's p95 and its query count, slowest
first, against the goal (p95 under 300 ms).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.scale import DATABASE_NAME  # noqa: E402

GOAL_MS = 300


def set_up_django(server_url, database):
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(server_url)
    os.environ["DATABASE_URL"] = urlunsplit((parts.scheme, parts.netloc, f"/{database}", "", ""))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    os.environ["DJANGO_DEBUG"] = "false"
    os.environ["DJANGO_SECURE_SSL_REDIRECT"] = "false"
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    import django

    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


def pages():
    """(group, label, url) of every page walked."""
    from django.contrib import admin
    from django.urls import reverse

    from annotation.models import InstructionFamily, Tournament

    found = []
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        found.append(("admin", f"{meta.app_label}.{meta.model_name} list", changelist))
        if model_admin.search_fields:
            found.append(("admin", f"{meta.app_label}.{meta.model_name} search", changelist + "?q=1"))
        row = model_admin.get_queryset(_request()).order_by().values_list("pk", flat=True).first()
        if row is not None:
            found.append(("admin", f"{meta.app_label}.{meta.model_name} change",
                          reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[row])))
    for family in InstructionFamily.objects.order_by("pk")[:3]:
        found.append(("workflow", f"family {family.pk} workflow",
                      reverse("admin:annotation_instructionfamily_workflow", args=[family.pk])))
    for tournament in Tournament.objects.order_by("pk")[:3]:
        found.append(("workflow", f"tournament {tournament.pk} workflow",
                      reverse("admin:annotation_tournament_workflow", args=[tournament.pk])))
        found.append(("dashboard", f"tournament {tournament.pk} leaderboard",
                      reverse("dashboard:leaderboard", args=[tournament.pk])))
    found.append(("dashboard", "dashboard", reverse("dashboard:index")))
    for name in ("families", "instances", "tournaments", "human-judgements", "judge-judgements", "snapshots"):
        found.append(("api", f"api {name}", f"/api/{name}/"))
    return found


def _request():
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    request.user = get_user_model().objects.filter(is_superuser=True).first()
    return request


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", choices=["admin", "workflow", "dashboard", "api"])
    parser.add_argument("--database", default=DATABASE_NAME, help="the world benchmarks/scale.py filled")
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    args = parser.parse_args()
    set_up_django(args.server, args.database)
    from django.contrib.auth import get_user_model
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user = get_user_model().objects.filter(username="benchmark").first() or get_user_model().objects.create_superuser(
        "benchmark", "benchmark@example.org", "benchmark-password")
    client = Client()
    client.force_login(user)
    results = []
    for group, label, url in pages():
        if args.only and group != args.only:
            continue
        times, queries, status = [], 0, None
        for _ in range(args.repeat):
            reset_queries()
            with CaptureQueriesContext(connection) as captured:
                started = time.perf_counter()
                response = client.get(url, headers={"Accept": "text/html"})
                times.append((time.perf_counter() - started) * 1000)
            queries, status = len(captured), response.status_code
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        results.append((p95, statistics.median(times), queries, status, group, label))
    results.sort(reverse=True)
    print(f"{len(results)} pages, each {args.repeat} times, in-process (server time), {os.cpu_count()} CPUs")
    print(f"{'p95 ms':>9}{'median':>9}{'queries':>9}{'status':>8}  page")
    for p95, median, queries, status, group, label in results:
        mark = "  over" if p95 > GOAL_MS else ""
        print(f"{p95:9.0f}{median:9.0f}{queries:9d}{status:8d}  {group}: {label}{mark}")
    over = sum(1 for row in results if row[0] > GOAL_MS)
    print(f"goal: p95 under {GOAL_MS} ms on every page; {over} over")


if __name__ == "__main__":
    main()
