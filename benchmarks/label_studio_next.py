"""Our next unit on the campaign-sized world beside Label Studio's next task on a project of the same
size, under the same load, over HTTP, back to back.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/label_studio_next.py \\
        [--repeat 3] [--workers 4] [--venv /tmp/ls-venv] [--template crowdbench_bench_scale]

Ours: a copy of the world benchmarks/scale.py seeded (`--template`, left unchanged) with a study's
caption units on top, as `next_unit_http.py --world scale` makes it (`--database`). Label Studio
1.23.2, installed with pip into a throwaway virtual environment (`--venv`, made if missing; never
the project's), migrated into a PostgreSQL database of its own (`--ls-database`, dropped and made
again) and seeded by benchmarks/label_studio_world.py through its own models: 100,000 tasks (an
image URL and an instruction, captioned in a text area), 95,000 of them annotated already, 200
annotators with their API tokens. Both run under gunicorn with --workers sync workers and DEBUG
off, each with its own database settings as shipped (ours keeps connections for 60 s; Label
Studio sets no CONN_MAX_AGE, so Django's default, a connection per request). The loads are
next_unit_http.py's: 20 participants doing 10 units each, waiting a random time (uniform, mean 1 s)
before each request, and 200 doing 3 units each, waiting a mean 10 s; each load's threads are
released together. Ours arrive through the study link
and submit a caption; Label Studio's send their token and ask `GET /api/projects/<id>/next`, then
`POST /api/tasks/<id>/annotations/` a text-area result. The next-unit (next-task) request is timed
on the client. First one participant alone does 20 units without pausing on each (the request's
own time, no queueing); then, --repeat times, each load is run on the two in turn, which goes
first swapping each round; it prints p50 and p95 of each, min and median over the rounds, and the
load average after each. `--reuse-label-studio` keeps Label Studio's database as a run before
seeded it (seeding takes a quarter of an hour), less the tasks that run annotated.
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from urllib.request import Request, build_opener

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.next_unit_http import (  # noqa: E402
    GOAL,
    LOADS,
    SCALE_WORLD_COPY,
    load,
    load_average,
    prepare_world,
    queries_per_request,
    world_size,
)
from benchmarks.scale import DATABASE_NAME as SCALE_DATABASE_NAME  # noqa: E402
from benchmarks.support import fresh_database, server_environment, start_gunicorn  # noqa: E402

LABEL_STUDIO = "label-studio==1.23.2"
LABEL_STUDIO_DATABASE = "crowdbench_bench_label_studio"
PARTICIPANTS = max(participants for participants, _, _ in LOADS)  # annotators Label Studio needs
WARM_UP = 8  # requests that load each worker's code before anything is timed
ALONE = 20  # units one participant does with nobody else on the server and no pause: the request's own time
CAPTION_RESULT = [{"from_name": "caption", "to_name": "image", "type": "textarea",
                   "value": {"text": ["A white cup of espresso on a red saucer, a spoon resting on the saucer, on a "
                                      "wooden table, seen from above at an angle."]}}]


def label_studio_python(venv):
    """Label Studio's interpreter, installed into `venv` first if it is not there."""
    python = Path(venv) / "bin" / "python"
    if not python.exists():
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", LABEL_STUDIO, "gunicorn"], check=True)
    return str(python)


def label_studio_folder(python):
    """The installed package's folder: its modules import each other from there (`core`, `tasks`)."""
    return subprocess.run([python, "-c", "import label_studio, os; print(os.path.dirname(label_studio.__file__))"],
                          check=True, capture_output=True, text=True).stdout.strip()


def label_studio_environment(database_url, data_folder):
    parts = database_url.rsplit("/", 1)
    server = parts[0].split("@")[-1]
    host, _, port = server.partition(":")
    return {
        "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "core.settings.label_studio", "DJANGO_DB": "default",
        "POSTGRE_NAME": parts[1], "POSTGRE_HOST": host, "POSTGRE_PORT": port or "5432",
        "POSTGRE_USER": "postgres", "POSTGRE_PASSWORD": "", "DEBUG": "false",
        "LABEL_STUDIO_BASE_DATA_DIR": data_folder, "LOG_LEVEL": "WARNING",
        # Nothing leaves the machine: no error reports, no usage statistics, no look-up of a newer release.
        "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "", "COLLECT_ANALYTICS": "false", "LATEST_VERSION_CHECK": "false",
    }


def seed_label_studio(*, python, environment, tasks, labeled, annotators, reuse=False):
    """Label Studio's migrations, then its project: its id, the annotators' tokens and the queries of
    one next-task request, as label_studio_world.py prints them. `reuse`: the project a run before
    seeded, as it is."""
    folder = label_studio_folder(python)
    world = [python, str(ROOT / "benchmarks" / "label_studio_world.py"), "--annotators", str(annotators)]
    if reuse:
        world.append("--existing")
    else:
        subprocess.run([python, str(Path(folder) / "manage.py"), "migrate", "--verbosity", "0"], env=environment,
                       check=True)
        world += ["--tasks", str(tasks), "--labeled", str(labeled)]
    seeded = subprocess.run(world, env=environment, check=True, capture_output=True, text=True)
    return json.loads(seeded.stdout.strip().splitlines()[-1])


def label_studio_annotator(base, name, think, units, barrier, next_task_times, errors, index, *, project, tokens):
    """One annotator on Label Studio's API, paced as next_unit_http.py's participants are."""
    opener = build_opener()
    headers = {"Authorization": f"Token {tokens[index]}", "Content-Type": "application/json",
               "Accept": "application/json"}
    pace = random.Random(name)
    try:
        barrier.wait()
        for _ in range(units):
            time.sleep(pace.uniform(0, 2 * think))
            started = time.perf_counter()
            with opener.open(Request(f"{base}/api/projects/{project}/next", headers=headers), timeout=120) as answer:
                task = json.loads(answer.read())
            next_task_times.append(time.perf_counter() - started)
            time.sleep(pace.uniform(0, 2 * think))
            body = json.dumps({"result": CAPTION_RESULT, "lead_time": 30}).encode()
            with opener.open(Request(f"{base}/api/tasks/{task['id']}/annotations/", data=body, headers=headers),
                             timeout=120) as answer:
                answer.read()
    except Exception as error:  # noqa: BLE001 - reported after the run
        errors.append(error)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--venv", default="/tmp/ls-venv", help="Label Studio's own virtual environment")
    parser.add_argument("--template", default=SCALE_DATABASE_NAME, help="the seeded world to copy for ours")
    parser.add_argument("--database", default=SCALE_WORLD_COPY, help="our copy of it, (re)created")
    parser.add_argument("--wait", type=float, default=0,
                        help="minutes to wait for the template to be free (its seeding to end)")
    parser.add_argument("--ls-database", default=LABEL_STUDIO_DATABASE, help="Label Studio's database, (re)created")
    parser.add_argument("--reuse-label-studio", action="store_true",
                        help="keep --ls-database as a run before seeded it (less the tasks runs annotated)")
    parser.add_argument("--tasks", type=int, default=100_000, help="Label Studio's project size")
    parser.add_argument("--labeled", type=int, default=95_000, help="of them, tasks annotated already")
    parser.add_argument("--server", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL URL; only its server is used")
    args = parser.parse_args()

    python = label_studio_python(args.venv)
    ls_database = (args.server.rsplit("/", 1)[0] + "/" + args.ls_database if args.reuse_label_studio
                   else fresh_database(args.server, args.ls_database))
    ls_environment = label_studio_environment(ls_database, f"/tmp/{args.ls_database}-data")
    needed = sum(participants * units for participants, _, units in LOADS) * args.repeat + ALONE
    if args.tasks - args.labeled < needed + WARM_UP:
        parser.error(f"Label Studio needs at least {needed + WARM_UP} tasks not annotated yet")
    world = seed_label_studio(python=python, environment=ls_environment, tasks=args.tasks, labeled=args.labeled,
                              annotators=PARTICIPANTS + WARM_UP, reuse=args.reuse_label_studio)
    project, tokens = world["project"], world["tokens"]
    database_url = prepare_world(server=args.server, world="scale", units=needed + WARM_UP + 50,
                                 database=args.database, template=args.template, wait_minutes=args.wait)
    next_unit_queries, _ = queries_per_request()

    ours = start_gunicorn(server_environment(database_url), args.workers)
    theirs = start_gunicorn(ls_environment, args.workers, python=python, cwd=label_studio_folder(python),
                            application="core.wsgi:application", ready_path="/health/")
    runs = {
        "crowdbench (next unit)": partial(load, ours[1]),
        "Label Studio 1.23.2 (next task)": partial(load, theirs[1], behaviour=partial(
            label_studio_annotator, project=project, tokens=tokens)),
    }
    results = {(participants, name): [] for participants, _, _ in LOADS for name in runs}
    try:
        # Warm-up: the first request of each worker imports and compiles what the rest reuse.
        runs["crowdbench (next unit)"]("warm-up", WARM_UP, 0.0, 1)
        warm_up_tokens = tokens[PARTICIPANTS:] + tokens[:PARTICIPANTS]
        load(theirs[1], "warm-up", WARM_UP, 0.0, 1,
             behaviour=partial(label_studio_annotator, project=project, tokens=warm_up_tokens))
        alone = {name: run("alone", 1, 0.0, ALONE) for name, run in runs.items()}
        for repetition in range(args.repeat):
            order = list(runs) if repetition % 2 == 0 else list(reversed(runs))
            for participants, think, units in LOADS:
                for name in order:
                    rounds = results[participants, name]
                    rounds.append(runs[name](f"r{repetition}-{participants}", participants, think, units))
                    print(f"  round {repetition + 1}, {participants} participants, {name}: p50 "
                          f"{rounds[-1][0] * 1000:.1f} ms, p95 {rounds[-1][1] * 1000:.1f} ms, {load_average()}",
                          flush=True)
    finally:
        for server, _ in (ours, theirs):
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)

    print(f"ours: {world_size()}; {next_unit_queries} queries per next unit after a submit")
    print(f"Label Studio: {args.tasks:,} tasks, {args.labeled:,} annotated, {PARTICIPANTS} annotators with tokens; "
          f"{world['next_task_queries']} queries per next task")
    loads = "; ".join(f"{participants} participants thinking ~{think:g} s, {units} units each"
                      for participants, think, units in LOADS)
    print(f"gunicorn, {args.workers} sync workers each, DEBUG off, PostgreSQL on loopback, {os.cpu_count()} CPUs; "
          f"{loads}; {args.repeat} rounds, alternating")
    print(f"{'participants, server':<40}{'p50 ms min/median':>20}{'p95 ms min/median':>20}"
          f"{'load after each round':>26}")
    for (participants, name), rounds in results.items():
        p50s, p95s = [r[0] * 1000 for r in rounds], [r[1] * 1000 for r in rounds]
        print(f"{f'{participants:>3}, {name}':<40}{min(p50s):>9.1f} /{statistics.median(p50s):>7.1f}"
              f"{min(p95s):>11.1f} /{statistics.median(p95s):>7.1f}"
              f"{' '.join(f'{r[2]:.2f}' for r in rounds):>26}")
    for name, (p50, p95, load_after) in alone.items():
        print(f"{name}, one participant alone, {ALONE} units without pause: p50 {p50 * 1000:.1f} ms, "
              f"p95 {p95 * 1000:.1f} ms (load {load_after:.2f})")
    print(f"{GOAL} (ours); {load_average()} at the end")


if __name__ == "__main__":
    main()
