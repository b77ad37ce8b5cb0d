"""Every page a researcher opens, on the campaign-sized world of benchmarks/scale.py.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/scale.py
    .venv/bin/python benchmarks/researcher_pages.py [--repeat 20] [--rounds 5] [--only admin]

It walks, as a logged-in superuser with the Django test client (server time: routing, queries,
templates; no network), every admin list page of the project's models with its default filters
and ordering, the same list searched (for a word a researcher would type, that few rows hold)
where it has a search, and filtered by its first filter's first choice, the change page of one row
of each, each workflow page of a sample of families and tournaments and the status its script
polls, Table 2, the busiest worker's page, the dashboard and the leaderboards
(from the result the real job stored, as a researcher sees them once it has run), and the API's
list endpoints. Each page is asked once unmeasured (a gunicorn worker has long since imported
what it needs and compiled its templates), then --repeat times. It prints each page's p95 and
median and its query count, slowest first, against the goal (p95 under 300 ms), with the load
average the machine had meanwhile.
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
# Jobs a page queues for a figure it keeps (run by the walk as a worker would), and the pages whose
# first view, before any such figure was kept, is printed on its own.
QUEUED_BY_PAGES = ("tasks.keep_stage_median",)
FIRST_VIEWS_SHOWN = ("busiest worker's page",)
# Few rows hold it, so a search reads the whole table to find them: the slow case.
SEARCH = "otter"


def set_up_django(server_url, database):
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(server_url)
    os.environ["DATABASE_URL"] = urlunsplit((parts.scheme, parts.netloc, f"/{database}", "", ""))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    os.environ["DJANGO_DEBUG"] = "false"
    os.environ["DJANGO_SECURE_SSL_REDIRECT"] = "false"
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    # Production's cache (compose's Redis): the worker page keeps its stage median there for the
    # web processes, which the process's own memory would not.
    os.environ.setdefault("CACHE_URL", "redis://127.0.0.1:6379/13")
    import django

    django.setup()
    from crowdbench import scoping

    scoping.enter(scoping.EveryGroup("a benchmark builds and reads every group's rows"))
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


def pages():
    """(group, label, url) of every page walked."""
    from django.contrib import admin
    from django.db.models import Count
    from django.urls import reverse

    from annotation.models import Assignment, InstructionFamily

    found = []
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        found.append(("admin", f"{meta.app_label}.{meta.model_name} list", changelist))
        if model_admin.search_fields:
            found.append(("admin", f"{meta.app_label}.{meta.model_name} search", changelist + f"?q={SEARCH}"))
        first_filter = _first_filter_choice(model_admin)
        if first_filter:
            found.append(("admin", f"{meta.app_label}.{meta.model_name} filtered", changelist + first_filter))
        row = model_admin.get_queryset(_request()).order_by().values_list("pk", flat=True).first()
        if row is not None:
            found.append(("admin", f"{meta.app_label}.{meta.model_name} change",
                          reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[row])))
    for family in InstructionFamily.objects.order_by("pk")[:3]:
        found.append(("workflow", f"family {family.pk} workflow",
                      reverse("admin:annotation_instructionfamily_workflow", args=[family.pk])))
        found.append(("workflow", f"family {family.pk} workflow status",
                      reverse("admin:annotation_instructionfamily_workflow_status", args=[family.pk])))
    found.append(("workflow", "Table 2", reverse("admin:annotation_instructionfamily_table2")))
    busiest = Assignment.objects.values("worker").annotate(n=Count("pk")).order_by("-n").first()
    if busiest:
        found.append(("workflow", "busiest worker's page", reverse("admin:annotation_worker_page",
                                                                   args=[busiest["worker"]])))
    for tournament in _sampled_tournaments():
        found.append(("workflow", f"tournament {tournament.pk} workflow",
                      reverse("admin:annotation_tournament_workflow", args=[tournament.pk])))
        found.append(("workflow", f"tournament {tournament.pk} workflow status",
                      reverse("admin:annotation_tournament_workflow_status", args=[tournament.pk])))
        found.append(("dashboard", f"tournament {tournament.pk} leaderboard",
                      reverse("dashboard:leaderboard", args=[tournament.pk])))
    found.append(("dashboard", "dashboard", reverse("dashboard:index")))
    for name in ("families", "instances", "tournaments", "human-judgements", "judge-judgements", "snapshots",
                 "webhook-endpoints", "webhook-deliveries"):
        found.append(("api", f"api {name}", f"/api/{name}/"))
    return found


def _sampled_tournaments():
    from annotation.models import Tournament

    return list(Tournament.objects.order_by("pk")[:3])


def _first_filter_choice(model_admin):
    """The query string of the first choice of the list's first filter, as a click on it makes."""
    from django.contrib.admin.views.main import ChangeList

    request = _request()
    try:
        changelist = model_admin.get_changelist_instance(request)
    except Exception:  # noqa: BLE001 - a list that cannot be built is walked unfiltered
        return None
    if not isinstance(changelist, ChangeList):
        return None
    for spec in changelist.filter_specs:
        for choice in list(spec.choices(changelist))[1:2]:
            return choice["query_string"]
    return None


def store_leaderboards():
    """The leaderboard result of each sampled tournament, made by the real job, as the dashboard
    serves it once the job has run."""
    from annotation.scoring import freshness

    for tournament in _sampled_tournaments():
        started = time.perf_counter()
        freshness.refresh_leaderboard(tournament=tournament)
        print(f"  leaderboard job for {tournament.name}: {time.perf_counter() - started:.1f} s", flush=True)


def _request():
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = get_user_model().objects.filter(is_superuser=True).first()
    return request


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1, help="walks of every page; p95 is the median of theirs")
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
    from django.core.cache import cache

    cache.clear()  # nothing kept from an earlier walk: the first views are first views
    store_leaderboards()
    walked = [(group, label, url) for group, label, url in pages() if not args.only or group == args.only]
    rounds, loads, first_views = [], [], {}
    for number in range(args.rounds):
        loads.append([os.getloadavg()[0]])
        measured = {}
        for group, label, url in walked:
            started = time.perf_counter()
            client.get(url, headers={"Accept": "text/html"})
            if number == 0:
                first_views[(group, label)] = (time.perf_counter() - started) * 1000
            run_queued_jobs()
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
            measured[(group, label)] = (p95, statistics.median(times), queries, status)
            loads[-1].append(os.getloadavg()[0])
        rounds.append(measured)
        print(f"  round {number + 1}: load average (1 min) {min(loads[-1]):.1f} to {max(loads[-1]):.1f}", flush=True)
    report(walked, rounds, loads, first_views, repeat=args.repeat)


def run_queued_jobs():
    """Run the jobs a page queued (the worker page's stage median) as a Celery worker would have
    by the time the page is read again: no worker takes them here."""
    from crowdbench.celery import app
    from tasks.models import Job

    app.loader.import_default_modules()
    for job in Job.objects.filter(status=Job.Status.QUEUED, task__in=QUEUED_BY_PAGES):
        app.tasks[job.task].run(*job.args)
        job.delete()


def report(walked, rounds, loads, first_views, *, repeat):
    every_load = [load for round_loads in loads for load in round_loads]
    print(f"{len(walked)} pages, {len(rounds)} round(s), each page {repeat} times a round after one unmeasured, "
          f"in-process (server time), {os.cpu_count()} CPUs, load average (1 min) {min(every_load):.1f} to "
          f"{max(every_load):.1f}")
    print(f"{'p95 ms':>9}{'spread':>15}{'median':>9}{'queries':>9}{'status':>8}  page (p95: median of the rounds' "
          f"p95, spread: their least and most)")
    rows = []
    for key in ((group, label) for group, label, _ in walked):
        p95s = [measured[key][0] for measured in rounds]
        medians = [measured[key][1] for measured in rounds]
        _, _, queries, status = rounds[-1][key]
        rows.append((statistics.median(p95s), min(p95s), max(p95s), statistics.median(medians), queries, status, key))
    rows.sort(reverse=True)
    for p95, least, most, median, queries, status, (group, label) in rows:
        mark = "  over" if p95 > GOAL_MS else ""
        print(f"{p95:9.0f}{least:7.0f} to {most:5.0f}{median:9.0f}{queries:9d}{status:8d}  {group}: {label}{mark}")
    over = sum(1 for row in rows if row[0] > GOAL_MS)
    print(f"goal: p95 under {GOAL_MS} ms on every page; {over} over")
    for (group, label), milliseconds in first_views.items():
        if label in FIRST_VIEWS_SHOWN:
            print(f"first view of {group}: {label} (nothing kept yet): {milliseconds:.0f} ms")


if __name__ == "__main__":
    main()
