"""Server time and page weight of the annotator pages, on PostgreSQL, under concurrent annotators.

    .venv/bin/python benchmarks/annotator_pages.py [--annotators 20] [--units 10]

Creates (drops first) the database `crowdbench_bench_annotator` on the PostgreSQL server of
DATABASE_URL (default postgres://postgres@127.0.0.1:5432/), migrates it, and fills it with
instruction-conditioned caption units behind a Prolific study. Then N threads, each a participant
with its own Django test Client and database connection, released together, each do: get the next
unit and render its page (GET /work/caption/?PROLIFIC_PID=...), then submit a caption
(POST /work/submit/). Times are measured around each request in-process, so they are server time
(routing, queue, ORM, template, JSON) without network. It prints p50 / p95 / max per operation and
the weight of each page without its images: HTML + CSS + JS, raw and gzip.

Two runs: "paced", where each annotator reads and types for --think seconds (random, mean given)
between loading a unit and submitting it and between units: a real caption takes minutes, so even
a 1 s think time is 30 times the real pace; and "flat out", no think time at all, which measures
capacity: the threads share one Python process (one GIL), so there the times are mostly waiting
for a turn, and grow with annotators / cores.
"""

import argparse
import gzip
import os
import random
import re
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import analyse_as_autovacuum_would, fresh_database  # noqa: E402

DATABASE_NAME = "crowdbench_bench_annotator"
CAPTION = ("A white cup of espresso on a red saucer, a spoon resting on the saucer, on a wooden "
           "table, seen from above at an angle.")


def set_up_django(database_url, conn_max_age):
    os.environ["DATABASE_URL"] = database_url
    os.environ["DATABASE_CONN_MAX_AGE"] = str(conn_max_age)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    os.environ["DJANGO_DEBUG"] = "false"
    os.environ["DJANGO_CROSS_SITE_COOKIES"] = "false"
    # Plain HTTP: the test client asks without TLS, and DEBUG off would redirect it to https.
    os.environ["DJANGO_SECURE_SSL_REDIRECT"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from crowdbench import scoping

    scoping.enter(scoping.EveryGroup("a benchmark builds and reads every group's rows"))
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("migrate", verbosity=0)


def seed(units):
    """Caption units behind a Prolific study, and one unit of each other stage for page weight."""
    from django.utils import timezone

    from annotation.collection.captions import add_caption
    from annotation.collection.instructions import add_instance
    from annotation.collection.references import store_reference
    from annotation.crowdwork.stages import create_work_units
    from annotation.models import (
        ImageAsset,
        InstructionFamily,
        SeedImage,
        Stage,
        StageConfig,
        WorkUnit,
    )
    from mturk.models import CrowdStudy

    def launch(family, stage):
        # As launch_stage does, without queueing its background job: the units are made here.
        StageConfig.objects.create(family=family, stage=stage, launched_at=timezone.now())

    def image(n):
        return ImageAsset.objects.create(url=f"https://upload.wikimedia.org/bench/{n}.jpg",
                                         licence="CC0 1.0", author="Bench")

    caption_family = InstructionFamily.objects.create(name="Bench captions")
    for n in range(units):
        add_instance(family=caption_family, instruction=f"Is this drink hot or cold? ({n})",
                     images=[image(n)])
    launch(caption_family, Stage.CAPTION)
    create_work_units(family=caption_family, stage=Stage.CAPTION)

    generation = InstructionFamily.objects.create(
        name="Bench generation", seed_instruction="Why is the cat sitting so still?",
        seed_response="It is watching a bird.", target_instances=1)
    SeedImage.objects.create(family=generation, image=image("seed"), position=0)
    launch(generation, Stage.INSTRUCTION_GENERATION)
    create_work_units(family=generation, stage=Stage.INSTRUCTION_GENERATION)

    checked = InstructionFamily.objects.create(name="Bench verification")
    instance = add_instance(family=checked, instruction="What is this person's job?",
                            images=[image("v")])
    launch(checked, Stage.VERIFICATION)
    caption = add_caption(instance=instance, texts=[CAPTION])
    store_reference(instance=instance, caption=caption, source="manual",
                    text="She is an astronaut: the flight suit and helmet show it.")

    for stage, family, study_id in (
        (Stage.CAPTION, caption_family, "BENCH-CAPTION"),
        (Stage.INSTRUCTION_GENERATION, generation, "BENCH-GENERATION"),
        (Stage.VERIFICATION, checked, "BENCH-VERIFICATION"),
    ):
        CrowdStudy.objects.create(platform="prolific", stage=stage, family=family,
                                  name=study_id, external_id=study_id, completion_code="BENCH")
    analyse_as_autovacuum_would()
    return WorkUnit.objects.filter(stage=Stage.CAPTION).count()


TOKEN = re.compile(r'name="token" value="([^"]+)"')


def study_url(stage, study_id, participant):
    query = urlencode({"PROLIFIC_PID": participant, "STUDY_ID": study_id, "SESSION_ID": "S"})
    return f"/work/{stage}/?{query}"


def annotate(index, units, think, barrier, timings, errors):
    from django.db import connection
    from django.test import Client

    client = Client()
    pace = random.Random(index)
    url = study_url("caption", "BENCH-CAPTION", f"P{index:03d}-{think}")
    try:
        barrier.wait()
        for _ in range(units):
            time.sleep(pace.uniform(0, 2 * think))
            started = time.perf_counter()
            page = client.get(url, follow=True)  # a new participant is sent on with an arrival token
            timings["next unit + render"].append(time.perf_counter() - started)
            match = TOKEN.search(page.content.decode())
            if page.status_code != 200 or match is None:
                raise RuntimeError(f"GET {url}: {page.status_code}")
            time.sleep(pace.uniform(0, 2 * think))
            started = time.perf_counter()
            answer = client.post("/work/submit/", {"token": match.group(1), "caption-0": CAPTION,
                                                   "active_seconds": "30"},
                                 headers={"Accept": "application/json"})
            timings["submit"].append(time.perf_counter() - started)
            if answer.status_code != 200:
                raise RuntimeError(f"submit: {answer.status_code} {answer.content[:200]!r}")
    except Exception as error:  # noqa: BLE001 - reported after the run
        errors.append(error)
    finally:
        connection.close()


def run(annotators, units, think):
    timings = {"next unit + render": [], "submit": []}
    errors = []
    barrier = threading.Barrier(annotators)
    threads = [threading.Thread(target=annotate, args=(i, units, think, barrier, timings, errors))
               for i in range(annotators)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        sys.exit(f"{len(errors)} annotators failed, first: {errors[0]}")
    return timings, time.perf_counter() - started


def page_weights():
    from django.contrib.staticfiles import finders
    from django.test import Client

    assets = b"".join(
        Path(finders.find(name)).read_bytes()
        for name in ("frontend/annotator.css", "frontend/annotator.js")
    )
    rows = []
    for stage, study_id in (("instruction_generation", "BENCH-GENERATION"),
                            ("caption", "BENCH-CAPTION"),
                            ("verification", "BENCH-VERIFICATION")):
        # A participant per page: one id from a second browser would be refused, rightly.
        html = Client().get(study_url(stage, study_id, f"WEIGHT-{stage}")).content
        rows.append((stage, len(html), len(assets), len(html) + len(assets),
                     len(gzip.compress(html)) + len(gzip.compress(assets))))
    return rows


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--units", type=int, default=10, help="units each annotator does")
    parser.add_argument("--think", type=float, default=1.0,
                        help="mean seconds an annotator spends before each request, paced run")
    parser.add_argument("--conn-max-age", type=int, default=60,
                        help="DATABASE_CONN_MAX_AGE for the run (0: a connection per request)")
    parser.add_argument("--server", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL URL; only its server is used")
    args = parser.parse_args()

    set_up_django(fresh_database(args.server, DATABASE_NAME), args.conn_max_age)
    total = seed(2 * args.annotators * args.units + 10)

    from django.test import Client

    Client().get(study_url("caption", "BENCH-CAPTION", "WARMUP"))  # templates, URL resolver
    print(f"PostgreSQL database {DATABASE_NAME}, {total} caption units, CONN_MAX_AGE="
          f"{args.conn_max_age}, {args.annotators} concurrent annotators x {args.units} units, "
          f"{os.cpu_count()} CPUs")
    print(f"{'run':<26}{'operation':<20}{'n':>5}{'p50 ms':>8}{'p95 ms':>8}{'max ms':>8}"
          f"{'req/s':>7}")
    for label, think in ((f"paced (think ~{args.think:g} s)", args.think), ("flat out", 0.0)):
        timings, elapsed = run(args.annotators, args.units, think)
        requests = sum(len(values) for values in timings.values())
        for name, values in timings.items():
            print(f"{label:<26}{name:<20}{len(values):>5}{percentile(values, .5) * 1000:>8.1f}"
                  f"{percentile(values, .95) * 1000:>8.1f}{max(values) * 1000:>8.1f}"
                  f"{requests / elapsed:>7.0f}")
    print()
    print("page weight without images (bytes)")
    print(f"{'page':<24}{'HTML':>8}{'CSS+JS':>8}{'total':>8}{'gzip':>8}")
    for stage, html, assets, both, zipped in page_weights():
        print(f"{stage:<24}{html:>8}{assets:>8}{both:>8}{zipped:>8}")


if __name__ == "__main__":
    main()
