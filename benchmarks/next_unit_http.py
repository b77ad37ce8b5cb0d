"""Next-unit latency through a real gunicorn over HTTP, with persistent database connections (the
default) beside one connection per request (the anchor: the old default), and the queries per
request.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/next_unit_http.py \
        [--workers 4] [--repeat 3] [--world own|scale] [--database NAME] [--template NAME]

It fills the database `crowdbench_bench_annotator` as benchmarks/annotator_pages.py does
(caption units behind a Prolific study); with `--world scale` it copies the campaign-sized world
benchmarks/scale.py seeded (`--template`, default `crowdbench_bench_scale`, left unchanged) into
`--database` and adds the same study and caption units on top of it. Then it counts the queries
of one next-unit request in-process (what `tests/annotation/test_next_unit_queries.py` bounds),
then starts gunicorn with DEBUG off and --workers sync workers, as the compose file's `web`
service does. Each simulated participant is a thread with its own cookie jar that, as
annotator.js does, arrives through the study link, then submits a caption and loads the page the
answer names, waiting a random time (uniform, mean --think) before each request. Two loads: 20
participants thinking ~1 s (10 units each), and 200 thinking ~10 s (3 units each). Every load runs
--repeat times against each configuration, alternating, each time on fresh units; it prints p50
and p95 of the next-unit request (client-side: HTTP, routing, queue, template) as min and median
over the repetitions, with the machine's load average after each load. The load generator shares
the machine's CPUs with the server.
"""

import argparse
import json
import os
import random
import signal
import statistics
import sys
import threading
import time
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode
from urllib.request import HTTPCookieProcessor, Request, build_opener

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.annotator_pages import (  # noqa: E402
    CAPTION,
    DATABASE_NAME,
    TOKEN,
    percentile,
    seed,
    set_up_django,
    study_url,
)
from benchmarks.scale import DATABASE_NAME as SCALE_DATABASE_NAME  # noqa: E402
from benchmarks.support import (  # noqa: E402
    copy_of_database,
    fresh_database,
    server_environment,
    start_gunicorn,
)

LOADS = ((20, 1.0, 10), (200, 10.0, 3))  # participants, mean think seconds, units each
CONFIGURATIONS = (("persistent connections (CONN_MAX_AGE=60)", 60), ("a connection per request (0)", 0))
SCALE_WORLD_COPY = "crowdbench_bench_next_unit_scale"
GOAL = "goal (issue 42): p95 < 40 ms at 200 participants, < 60 ms with a connection per request"


def prepare_world(*, server, world, units, database=None, template=SCALE_DATABASE_NAME, wait_minutes=0):
    """The database the loads run on, with `units` caption units behind the benchmark's study, set
    up for this process's Django, analysed: its URL. `world` is "own" (a database of nothing else)
    or "scale" (a copy of the campaign-sized world in `template`, waiting up to `wait_minutes` for
    nobody to be connected to it)."""
    if world == "scale":
        database_url = copy_of_database(server, database or SCALE_WORLD_COPY, template,
                                        wait_seconds=60 * wait_minutes)
    else:
        database_url = fresh_database(server, database or DATABASE_NAME)
    set_up_django(database_url, 60)
    seed(units)
    return database_url


def world_size():
    """A line saying how big the world under the queue is."""
    from annotation.models import Assignment, HumanJudgement, Instance, Worker, WorkUnit

    counts = {name: model.objects.count() for name, model in (
        ("instances", Instance), ("workers", Worker), ("work units", WorkUnit), ("assignments", Assignment),
        ("human judgements", HumanJudgement))}
    return ", ".join(f"{count:,} {name}" for name, count in counts.items())


def load_average():
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def captured_requests(participant_id="QUERY-COUNT"):
    """The SQL of a participant's next unit after a submit (the page the submit sends the browser
    to), and of their first arrival through the study link (admitting them as a new worker): a
    participant id not seen before."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    browser = Client()
    url = study_url("caption", "BENCH-CAPTION", participant_id)
    # Counted at once: the next request's start empties the connection's query log. A new
    # participant's link is sent on with an arrival token (frontend/arrival.py): both requests are
    # the arrival.
    with CaptureQueriesContext(connection) as arriving:
        first = browser.get(url, follow=True)
    saved = browser.post("/work/submit/", {"token": TOKEN.search(first.content.decode())[1],
                                           "caption-0": CAPTION})
    with CaptureQueriesContext(connection) as next_unit:
        browser.get(saved["Location"])
    return [query["sql"] for query in next_unit], [query["sql"] for query in arriving]


def queries_per_request():
    """How many queries a next unit after a submit makes, and a first arrival."""
    next_unit, arrival = captured_requests()
    return len(next_unit), len(arrival)


def explained(queries):
    """EXPLAIN ANALYZE of each SELECT of `queries`, run again in a transaction rolled back (their
    row locks are let go): (SQL, plan) pairs. Writes are left out, since replaying them would
    collide with the rows they made."""
    from django.db import connection, transaction

    plans = []
    for sql in queries:
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            plans.append((sql, "\n".join(row[0] for row in cursor.fetchall())))
            transaction.set_rollback(True)
    return plans


def participant(base, name, think, units, barrier, next_unit_times, errors, index=None):
    """A browser as annotator.js drives it: the study link once, then after each submit the page
    the answer names."""
    opener = build_opener(HTTPCookieProcessor(CookieJar()))
    pace = random.Random(name)
    url = base + study_url("caption", "BENCH-CAPTION", name)
    try:
        barrier.wait()
        for _ in range(units):
            time.sleep(pace.uniform(0, 2 * think))
            started = time.perf_counter()
            with opener.open(url, timeout=120) as page:
                html = page.read().decode()
            next_unit_times.append(time.perf_counter() - started)
            token = TOKEN.search(html)
            if token is None:
                raise RuntimeError(f"no task in the page of {url}")
            time.sleep(pace.uniform(0, 2 * think))
            body = urlencode({"token": token[1], "caption-0": CAPTION, "active_seconds": "30"}).encode()
            with opener.open(Request(base + "/work/submit/", data=body,
                                     headers={"Accept": "application/json"}), timeout=120) as answer:
                url = base + json.loads(answer.read())["next"]
    except Exception as error:  # noqa: BLE001 - reported after the run
        errors.append(error)


def load(base, tag, participants, think, units, behaviour=participant):
    """`participants` threads released together, each doing `units` units as `behaviour` does;
    p50 and p95 of the next-unit requests, and the 1-minute load average once they are done.
    `behaviour` is called as `participant` is, with the participant's index last."""
    times, errors = [], []
    barrier = threading.Barrier(participants)
    threads = [threading.Thread(target=behaviour,
                                args=(base, f"{tag}-{i:03d}", think, units, barrier, times, errors, i))
               for i in range(participants)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        sys.exit(f"{len(errors)} participants failed, first: {errors[0]!r}")
    return percentile(times, 0.5), percentile(times, 0.95), os.getloadavg()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--world", choices=("own", "scale"), default="own",
                        help="a world of the benchmark's units alone, or a copy of benchmarks/scale.py's")
    parser.add_argument("--database", help=f"the database to (re)create: default {DATABASE_NAME}, "
                                           f"or {SCALE_WORLD_COPY} with --world scale")
    parser.add_argument("--template", default=SCALE_DATABASE_NAME,
                        help="with --world scale, the seeded world to copy (nobody may be connected to it)")
    parser.add_argument("--wait", type=float, default=0,
                        help="with --world scale, minutes to wait for the template to be free (its seeding to end)")
    parser.add_argument("--explain", action="store_true",
                        help="print EXPLAIN ANALYZE of a next unit's and a first arrival's queries, and stop")
    parser.add_argument("--server", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL URL; only its server is used")
    args = parser.parse_args()

    needed = sum(p * u for p, _, u in LOADS) * args.repeat * len(CONFIGURATIONS)
    database_url = prepare_world(server=args.server, world=args.world, units=needed + 50,
                                 database=args.database, template=args.template, wait_minutes=args.wait)
    if args.explain:
        for title, queries in zip(("next unit after a submit", "first arrival"), captured_requests(), strict=True):
            for sql, plan in explained(queries):
                print(f"--- {title}: {sql}\n{plan}\n")
        return
    next_unit_queries, arrival_queries = queries_per_request()

    results = {}
    for repetition in range(args.repeat):
        for label, conn_max_age in CONFIGURATIONS:
            server, base = start_gunicorn(server_environment(
                database_url, DATABASE_CONN_MAX_AGE=str(conn_max_age)), args.workers)
            try:
                for participants, think, units in LOADS:
                    tag = f"r{repetition}-{conn_max_age}-{participants}"
                    results.setdefault((participants, label), []).append(
                        load(base, tag, participants, think, units))
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=60)

    print(f"world: {args.world} ({world_size()})")
    print(f"gunicorn, {args.workers} sync workers, DEBUG off, PostgreSQL on loopback, {os.cpu_count()} CPUs; "
          f"{args.repeat} repetitions, configurations alternating")
    print(f"queries per request: {next_unit_queries} for a study participant's next unit after a submit "
          f"(goal: at most 6), {arrival_queries} for a participant's first arrival through the study link "
          f"(with its redirect for an arrival token)")
    print(f"{'participants':<14}{'configuration':<44}{'p50 ms min/median':>20}{'p95 ms median (min-max)':>26}"
          f"  load after each run")
    for (participants, label), runs in results.items():
        p50s, p95s = [r[0] * 1000 for r in runs], [r[1] * 1000 for r in runs]
        print(f"{participants:<14}{label:<44}{min(p50s):>9.1f} /{statistics.median(p50s):>7.1f}"
              f"{statistics.median(p95s):>11.1f} ({min(p95s):.1f}-{max(p95s):.1f})".ljust(106)
              + "  " + " ".join(f"{r[2]:.2f}" for r in runs))
    print(f"{GOAL}; {load_average()} at the end")


if __name__ == "__main__":
    main()
