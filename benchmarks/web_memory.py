"""Resident memory of each gunicorn web worker: at start, after serving annotator pages, and after
a researcher's leaderboard.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/web_memory.py \
        [--workers 4] [--requests 200]

Creates (drops first) the database `crowdbench_bench_web_memory` on the PostgreSQL server of
DATABASE_URL, migrates it, loads the demo (`load_demo`: families at every stage) and a preference
tournament, and starts gunicorn with DEBUG off and --workers workers, as the compose
file's `web` service does. It reads each worker's resident set size (VmRSS in /proc) when the
workers are up, after --requests annotator and admin page loads spread over them, and after every
worker has served the leaderboard with its figures, from the result and the files the leaderboard
job stored (run here first, as a worker would). Before figures were stored, a worker that served a
leaderboard drew them with matplotlib and grew from about 130 MB to about 350 MB.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import HTTPCookieProcessor, Request, build_opener

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import fresh_database, server_environment, start_gunicorn  # noqa: E402

DATABASE_NAME = "crowdbench_bench_web_memory"
# The demo has no tournament; the leaderboard needs one (its battles are enough).
A_PREFERENCE_TOURNAMENT = """
from tests.scoring_factories import create_tournament
from tests.scoring_factories import verified_instance, with_responses
for number in range(5):
    with_responses(verified_instance(caption=[f"A photo, number {number}."]), "llava-1.5", "otter")
tournament = create_tournament(name="memory benchmark", include_reference=True)
"""
# The leaderboard job's work, as a Celery worker does it, so the pages serve a stored result and
# its figures are files: the web workers draw nothing.
THE_LEADERBOARD_JOB = """
from annotation.models import Tournament
from tasks.scoring import refresh_leaderboard_job
for tournament in Tournament.objects.all():
    refresh_leaderboard_job.run(tournament.pk)
"""


def children_rss_mb(parent_pid):
    sizes = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if re.search(rf"^PPid:\s+{parent_pid}$", text, re.M):
            sizes[int(status.parent.name)] = int(re.search(r"^VmRSS:\s+(\d+)", text, re.M)[1]) / 1024
    return sizes


def fetch(opener, url):
    with opener.open(url, timeout=120) as response:
        response.read()
        return response.status


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--requests", type=int, default=200)
    options = parser.parse_args()

    environment = server_environment(fresh_database(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/"), DATABASE_NAME))
    python = sys.executable
    for command in (["migrate", "--noinput", "-v0"], ["collectstatic", "--noinput", "-v0"], ["load_demo"],
                    ["shell", "-c", A_PREFERENCE_TOURNAMENT], ["shell", "-c", THE_LEADERBOARD_JOB]):
        subprocess.run([python, "manage.py", *command], cwd=ROOT, env=environment, check=True,
                       stdout=subprocess.DEVNULL)
    gunicorn, base = start_gunicorn(environment, options.workers)
    try:
        while len(children_rss_mb(gunicorn.pid)) < options.workers:
            time.sleep(0.2)
        time.sleep(1)
        started = children_rss_mb(gunicorn.pid)

        annotator = build_opener(HTTPCookieProcessor())
        for number in range(options.requests):
            fetch(annotator, base + ("/work/login/" if number % 2 else "/"))
        served = children_rss_mb(gunicorn.pid)

        researcher = build_opener(HTTPCookieProcessor())
        login = base + "/admin/login/"
        with researcher.open(login) as page:
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.read().decode())[1]
        body = f"csrfmiddlewaretoken={token}&username=admin&password=crowdbench&next=/dashboard/".encode()
        researcher.open(Request(login, data=body, headers={"Referer": login}))
        dashboard = researcher.open(base + "/dashboard/").read().decode()
        boards = sorted(set(re.findall(r'href="(/dashboard/tournaments/\d+/leaderboard/)"', dashboard)))
        if not boards:
            raise SystemExit("The dashboard lists no leaderboard:\n" + dashboard[:1500])
        # Enough loads that every worker serves one (the kernel spreads accepts over workers), each
        # with its figures, as a browser loads them.
        figures = 0
        for _ in range(options.workers * 6):
            for board in boards[:1]:
                page = researcher.open(base + board).read().decode()
                for source in re.findall(r'<img class="plot"[^>]* src="([^"]+)"', page):
                    fetch(researcher, base + source.replace("&amp;", "&"))
                    figures += 1
        if not figures:
            raise SystemExit("The leaderboard showed no figure:\n" + page[:1500])
        scored = children_rss_mb(gunicorn.pid)
    finally:
        gunicorn.send_signal(signal.SIGTERM)
        gunicorn.wait(timeout=60)

    print(f"gunicorn, {options.workers} workers, DEBUG off, PostgreSQL; resident MB per worker; "
          f"{options.workers * 6} leaderboards served with {figures} figures")
    print(f"{'worker':>8}{'at start':>10}{'after pages':>13}{'after leaderboard':>19}")
    for pid in sorted(started):
        print(f"{pid:>8}{started[pid]:10.0f}{served.get(pid, 0):13.0f}{scored.get(pid, 0):19.0f}")
    total = sum(started.values()), sum(served.values()), sum(scored.values())
    print(f"{'all':>8}{total[0]:10.0f}{total[1]:13.0f}{total[2]:19.0f}")
    print("anchor: a worker that drew a leaderboard's figures grew to about 350 MB (2026-11-26); "
          "Label Studio 1.23.2, measured for issue 13: 1,090 MB for four workers")


if __name__ == "__main__":
    main()
