"""Table 2 on the collection part of the campaign-sized world (issue 42).

    .venv/bin/python benchmarks/table2.py --seed-world     # once: about 5 minutes
    .venv/bin/python benchmarks/table2.py [--repeat 20]

`--seed-world` (re)creates the database `crowdbench_bench_table2` with what benchmarks/scale.py
seeds for collection, at full size: 50 families of 2,000 instances, each with its image, caption,
generated reference and verifications (no tournaments: Table 2 does not read them). Then, as
benchmarks/researcher_pages.py measures a page (a superuser's Django test client, server time), it
asks Table 2's admin page for every family and for one, once unmeasured and `--repeat` times; then
reads Table 2 after 1, 10 and 100 decisions (each in a transaction rolled back), and times a bulk
update of 18,000 references' decider with the triggers that keep Table 2's counts and without them.
"""

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.scale import FAMILIES, INSTANCES_PER_FAMILY, WORKERS, seed_collection, seed_workers  # noqa: E402
from benchmarks.support import analyse_as_autovacuum_would, fresh_database, set_up_django  # noqa: E402

DATABASE_NAME = "crowdbench_bench_table2"


def _p95(times):
    times = sorted(times)
    return times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


def measure_page(repeat):
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from annotation.models import InstructionFamily

    user = get_user_model().objects.filter(username="benchmark").first() or get_user_model().objects.create_superuser(
        "benchmark", "benchmark@example.org", "benchmark-password")
    client = Client()
    client.force_login(user)
    url = reverse("admin:annotation_instructionfamily_table2")
    family = InstructionFamily.objects.order_by("pk").first()
    for label, query in (("every family", {}), ("one family", {"family": family.pk})):
        started = time.perf_counter()
        client.get(url, query)
        first = (time.perf_counter() - started) * 1000
        times = []
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as captured:
                started = time.perf_counter()
                response = client.get(url, query)
                times.append((time.perf_counter() - started) * 1000)
        print(f"Table 2 page, {label}: first {first:.0f} ms; then p95 {_p95(times):.1f} ms, median "
              f"{statistics.median(times):.1f} ms over {repeat}, {len(captured)} queries, "
              f"status {response.status_code}")


def measure_after_decisions():
    from django.db import connection, transaction

    from annotation.collection import progress
    from annotation.models import InstructionFamily, Reference

    correct = list(Reference.objects.filter(verdict=Reference.Verdict.CORRECT).order_by("pk")
                   .values_list("pk", flat=True))
    for decisions in (1, 10, 100):
        times = []
        for round_ in range(10):
            with transaction.atomic():
                chosen = correct[round_ * 1000:(round_ + 1) * 1000:1000 // decisions]
                Reference.objects.filter(pk__in=chosen).update(decided_by=Reference.DecidedBy.REVIEWER)
                started = time.perf_counter()
                progress.table2()
                times.append((time.perf_counter() - started) * 1000)
                transaction.set_rollback(True)
        print(f"Table 2 read after {decisions} decision(s): median {statistics.median(times):.1f} ms, "
              f"most {max(times):.1f} ms over {len(times)}")
    families = list(InstructionFamily.objects.order_by("pk").values_list("pk", flat=True)[:10])
    for triggers in (False, True) * 2:
        with transaction.atomic():
            if not triggers:
                with connection.cursor() as cursor:
                    cursor.execute("ALTER TABLE annotation_reference DISABLE TRIGGER USER")
            started = time.perf_counter()
            updated = Reference.objects.filter(instance__family_id__in=families,
                                               verdict=Reference.Verdict.CORRECT).update(
                decided_by=Reference.DecidedBy.DAWID_SKENE)
            took = (time.perf_counter() - started) * 1000
            transaction.set_rollback(True)
        print(f"bulk update of {updated:,} references' decider, triggers {'on' if triggers else 'off'}: {took:.0f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed-world", action="store_true", help="(re)create and fill the database first")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    args = parser.parse_args()
    if args.seed_world:
        started = time.perf_counter()
        set_up_django(fresh_database(args.server, DATABASE_NAME))
        seed_collection(families=FAMILIES, per_family=INSTANCES_PER_FAMILY, workers=seed_workers(WORKERS),
                        rng=random.Random(2026))
        analyse_as_autovacuum_would()
        print(f"seeded in {time.perf_counter() - started:.0f} s")
    else:
        from benchmarks.researcher_pages import set_up_django as set_up_reader

        set_up_reader(args.server, DATABASE_NAME)
    load = os.getloadavg()[0]
    measure_page(args.repeat)
    measure_after_decisions()
    print(f"{os.cpu_count()} CPUs, load average (1 min) {load:.1f} to {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
