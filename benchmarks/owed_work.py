"""Owed work under load and database restarts: does the sweep buy any caption twice?

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/owed_work.py \
        [--instances 2000] [--overlap 3] [--participants 200] [--restarts 2]

For each sweep setting (the defaults, a sweep every 60 s that queues work owed for 600 s, and a
fast one, every 3 s after 5 s), it fills the database `crowdbench_bench_owed` on the PostgreSQL
server of DATABASE_URL with --instances instances awaiting captions, their caption stage launched
an hour ago with the given overlap (so the sweep takes any gap for old owed work, as in a running
campaign), behind a Prolific study. It then runs the production processes (gunicorn as the compose
`web` service, a Celery worker and beat on Redis database 14) and --participants participants over
HTTP, each a thread with its own cookies that follows the study link and submits captions until
the study has nothing left for it; meanwhile PostgreSQL is restarted --restarts times
(`pg_ctlcluster ... restart`, so run as root beside a local cluster). A participant that meets an
error (a restart) waits a second and asks again.

It prints, per setting: caption units against instances, the most captions an instance has, the
instances with more captions than the overlap, the captions by a worker who had captioned the same
instance already, the errors the participants met (restarts, refusals) and how many gave up after
20 refusals in a row. The goal: units = instances, no instance
above the overlap, no worker twice.
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode
from urllib.request import HTTPCookieProcessor, Request, build_opener

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import (  # noqa: E402
    analyse_as_autovacuum_would,
    fresh_database,
    server_environment,
    set_up_django,
    start_gunicorn,
)

DATABASE_NAME = "crowdbench_bench_owed"
BROKER_URL = "redis://127.0.0.1:6379/14"
TOKEN = re.compile(r'name="token" value="([^"]+)"')
CAPTION = "A white cup of espresso on a red saucer, a spoon on the saucer, on a wooden table, from above."
SWEEPS = (("defaults (sweep every 60 s, owed after 600 s)", {}),
          ("fast (sweep every 3 s, owed after 5 s)", {"JOB_SWEEP_SECONDS": "3", "JOB_REQUEUE_AFTER_SECONDS": "5"}))


def seed(instances, overlap):
    """Instances awaiting captions, their stage launched an hour ago, behind a Prolific study."""
    from datetime import timedelta

    from django.utils import timezone

    from annotation.collection.instructions import add_instance
    from annotation.crowdwork.stages import create_work_units
    from annotation.models import ImageAsset, InstructionFamily, Stage, StageConfig
    from mturk.models import CrowdStudy

    family = InstructionFamily.objects.create(name="Bench owed captions", target_instances=instances)
    for n in range(instances):
        image = ImageAsset.objects.create(url=f"https://upload.wikimedia.org/bench/{n}.jpg",
                                          licence="CC0 1.0", author="Bench")
        add_instance(family=family, instruction=f"Is this drink hot or cold? ({n})", images=[image])
    StageConfig.objects.create(family=family, stage=Stage.CAPTION, overlap=overlap,
                               launched_at=timezone.now() - timedelta(hours=1))
    create_work_units(family=family, stage=Stage.CAPTION)
    CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, family=family, name="BENCH-OWED",
                              external_id="BENCH-OWED", completion_code="BENCH")
    analyse_as_autovacuum_would()
    return family


def start_celery(environment, *arguments):
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "crowdbench", *arguments, "--loglevel=WARNING"],
                            cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def participant(base, name, think, errors, captions, stuck):
    """A browser as annotator.js drives it: the study link, then after each submit the page the
    answer names, until the study has nothing more for it (or it has been refused 20 times in a
    row: a participant the old keys handed an instance they had captioned was refused forever)."""
    opener = build_opener(HTTPCookieProcessor(CookieJar()))
    pace = random.Random(name)
    link = base + "/work/caption/?" + urlencode({"PROLIFIC_PID": name, "STUDY_ID": "BENCH-OWED",
                                                 "SESSION_ID": f"S-{name}"})
    url, empty, refused = link, 0, 0
    while empty < 3:
        if refused >= 20:
            stuck.append(name)
            return
        try:
            time.sleep(pace.uniform(0, 2 * think))
            with opener.open(url, timeout=120) as page:
                token = TOKEN.search(page.read().decode())
            if token is None:
                empty += 1
                url = link
                time.sleep(1)
                continue
            empty = 0
            body = urlencode({"token": token[1], "caption-0": f"{CAPTION} ({name})", "active_seconds": "30"}).encode()
            with opener.open(Request(base + "/work/submit/", data=body, headers={"Accept": "application/json"}),
                             timeout=120) as answer:
                url = base + json.loads(answer.read())["next"]
            captions.append(name)
            refused = 0
        except (HTTPError, URLError, OSError, ValueError) as error:
            errors.append(repr(error)[:200])
            refused += 1
            url = link
            time.sleep(1)


def restart_postgres(times, every, stop):
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    done = 0
    while done < times and not stop.wait(every):
        subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"], check=True)
        done += 1
    return done


def counts(family):
    from django.db import connections
    from django.db.models import Count

    from annotation.models import Caption, Stage, WorkUnit

    connections.close_all()  # the one it had died with a restart
    per_instance = Caption.objects.filter(instance__family=family).values("instance").annotate(n=Count("pk"))
    authors = Caption.objects.filter(instance__family=family, author__isnull=False)
    return {
        "units": WorkUnit.objects.filter(stage=Stage.CAPTION, family=family).count(),
        "instances": family.instances.count(),
        "most": max((row["n"] for row in per_instance), default=0),
        "over": sum(1 for row in per_instance if row["n"] > family.stage_configs.get(stage=Stage.CAPTION).overlap),
        "repeat": authors.count() - authors.values("instance", "author").distinct().count(),
        "unfinished": family.instances.filter(status="awaiting_caption").count(),
    }


def run(args, label, sweep_settings):
    from django.core.management import call_command
    from django.db import connections

    connections.close_all()
    database_url = fresh_database(args.server, DATABASE_NAME)
    call_command("migrate", verbosity=0)
    family = seed(args.instances, args.overlap)
    connections.close_all()
    environment = server_environment(database_url, CELERY_BROKER_URL=BROKER_URL, **sweep_settings)
    subprocess.run(["redis-cli", "-n", "14", "flushdb"], check=True, stdout=subprocess.DEVNULL)
    worker = start_celery(environment, "worker", "--concurrency=2")
    beat = start_celery(environment, "beat", "--schedule", f"/tmp/{DATABASE_NAME}-beat")
    server, base = start_gunicorn(environment, args.workers)
    errors, captions, stuck, stop = [], [], [], threading.Event()
    started = time.perf_counter()
    try:
        restarts = threading.Thread(target=restart_postgres, args=(args.restarts, args.restart_every, stop))
        restarts.start()
        threads = [threading.Thread(target=participant, args=(base, f"P{n:04d}", args.think, errors, captions, stuck))
                   for n in range(args.participants)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stop.set()
        restarts.join()
        # One more sweep after the last caption: what it makes now is made beyond the need.
        time.sleep(float(sweep_settings.get("JOB_SWEEP_SECONDS", 60)) + 5)
    finally:
        for process in (server, worker, beat):
            process.send_signal(signal.SIGTERM)
        for process in (server, worker, beat):
            process.wait(timeout=60)
    return {**counts(family), "captions": len(captions), "errors": len(errors), "stuck": len(stuck),
            "seconds": time.perf_counter() - started}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument("--participants", type=int, default=200)
    parser.add_argument("--think", type=float, default=0.5, help="mean seconds between requests")
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--restart-every", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--only", choices=["defaults", "fast"], help="one sweep setting only")
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
                        help="a PostgreSQL URL; only its server is used")
    args = parser.parse_args()
    set_up_django(fresh_database(args.server, DATABASE_NAME))
    rows = [(label, run(args, label, sweep)) for label, sweep in SWEEPS
            if args.only is None or label.startswith(args.only)]
    print(f"{args.instances} instances awaiting captions, overlap {args.overlap}; {args.participants} participants "
          f"over HTTP (gunicorn, {args.workers} workers); {args.restarts} PostgreSQL restart(s), "
          f"{args.restart_every:.0f} s apart; {os.cpu_count()} CPUs")
    print(f"{'sweep':<48}{'units':>7}{'instances':>11}{'captions':>10}{'most':>6}{'over':>6}{'repeat':>8}"
          f"{'unfinished':>12}{'errors':>8}{'stuck':>7}{'seconds':>9}")
    for label, row in rows:
        print(f"{label:<48}{row['units']:>7}{row['instances']:>11}{row['captions']:>10}{row['most']:>6}"
              f"{row['over']:>6}{row['repeat']:>8}{row['unfinished']:>12}{row['errors']:>8}{row['stuck']:>7}"
              f"{row['seconds']:>9.0f}")
    print("goal: units = instances, most <= overlap, over = 0, repeat = 0, stuck = 0")


if __name__ == "__main__":
    main()
