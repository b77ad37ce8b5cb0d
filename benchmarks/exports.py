"""Time the human preference CSV export at 1,000,000 judgements on PostgreSQL.

Run from the project root, with DATABASE_URL naming a PostgreSQL server:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/crowdbench \
        .venv/bin/python benchmarks/exports.py [--judgements N] [--keep]

The script creates its own database (the server's test database of DATABASE_URL with the suffix
"_bench_exports", migrated from scratch) and drops it at the end unless --keep. Rows are loaded with
COPY: 5,000 single-image instances, four model responses each, the six pairs of every instance
as battles, and enough workers' judgements to reach N (one work unit per battle and one
assignment per judgement, as the pipeline stores them). It then times

- annotation.datasets.exports writing the published human preference CSV (server-side cursor, rows written
  in blocks of 2,048), and its Parquet twin;
- PostgreSQL's own ``COPY (SELECT ...) TO STDOUT WITH CSV`` of the same columns, the ceiling for
  anything that has to leave the database;

and reports rows per second and the export's peak Python memory (tracemalloc, in a second run)
and the process's peak resident size.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")

import django  # noqa: E402

INSTANCES = 5_000
MODELS = ("llava-13b", "otter-9b", "instructblip-13b", "mplug-owl-7b")
PAIRS = [(a, b) for i, a in enumerate(range(len(MODELS))) for b in range(i + 1, len(MODELS))]
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def _copy(cursor, table, columns, rows):
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def load(n_judgements):
    from django.db import connection

    from annotation.models import (
        Assignment,
        Battle,
        HumanJudgement,
        ImageAsset,
        Instance,
        InstanceImage,
        InstructionFamily,
        ModelResponse,
        Tournament,
        Worker,
        WorkUnit,
    )

    family = InstructionFamily.objects.create(name="Contextual knowledge of events")
    tournament = Tournament.objects.create(name="Benchmark tournament", judgements_per_pair=5)
    n_battles = INSTANCES * len(PAIRS)
    n_workers = -(-n_judgements // n_battles)
    instruction = "Why is he waving? What happened in this event? Explain briefly, with the clues. "
    answer = ("The man is waving to greet the crowd gathered for the parade; the banners and the "
              "confetti suggest a celebration after a local team's victory. ") * 3
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        _copy(cursor, Worker._meta.db_table, ["id", "platform", "external_id", "created_at"],
              ((w + 1, "mturk", f"A{w:013d}", NOW) for w in range(n_workers)))
        _copy(cursor, ImageAsset._meta.db_table,
              ["id", "file", "url", "sha256", "licence", "licence_url", "author", "source_url",
               "original_name", "created_at"],
              ((i + 1, "", f"https://images.example.org/visit/{i:06d}.jpg", "", "CC BY 2.0", "",
                "", "", "", NOW) for i in range(INSTANCES)))
        _copy(cursor, Instance._meta.db_table,
              ["id", "family_id", "instruction", "status", "reference_output",
               "public_images_metadata", "imported_from", "created_at", "updated_at"],
              ((i + 1, family.pk, f"{instruction}({i})", "verified", answer, "{}", "", NOW, NOW)
               for i in range(INSTANCES)))
        _copy(cursor, InstanceImage._meta.db_table,
              ["id", "instance_id", "image_id", "position", "blip2_caption"],
              ((i + 1, i + 1, i + 1, 0, "") for i in range(INSTANCES)))
        _copy(cursor, ModelResponse._meta.db_table,
              ["id", "instance_id", "model_name", "text", "imported_from", "created_at"],
              ((i * len(MODELS) + m + 1, i + 1, name, f"{name}: {answer}", "", NOW)
               for i in range(INSTANCES) for m, name in enumerate(MODELS)))
        _copy(cursor, Battle._meta.db_table,
              ["id", "tournament_id", "instance_id", "response_a_id", "response_b_id", "created_at"],
              ((i * len(PAIRS) + p + 1, tournament.pk, i + 1, i * len(MODELS) + a + 1,
                i * len(MODELS) + b + 1, NOW)
               for i in range(INSTANCES) for p, (a, b) in enumerate(PAIRS)))
        _copy(cursor, WorkUnit._meta.db_table,
              ["id", "stage", "key", "family_id", "battle_id", "overlap", "status", "created_at"],
              ((b + 1, "pairwise", f"battle-{b + 1}", family.pk, b + 1, n_workers, "done", NOW)
               for b in range(n_battles)))
        lease_end = NOW + timedelta(minutes=30)
        _copy(cursor, Assignment._meta.db_table,
              ["id", "unit_id", "worker_id", "status", "leased_at", "lease_expires_at",
               "submitted_at", "active_seconds", "platform_assignment_id", "platform_listing_id"],
              ((j + 1, j % n_battles + 1, j // n_battles + 1, "submitted", NOW, lease_end, NOW,
                20.0 + j % 40, "", "") for j in range(n_judgements)))
        _copy(cursor, HumanJudgement._meta.db_table,
              ["id", "battle_id", "worker_id", "assignment_id", "shown_left", "choice",
               "criteria", "rubric_scores", "active_seconds", "created_at"],
              ((j + 1, j % n_battles + 1, j // n_battles + 1, j + 1, "ab"[j % 2],
                ("left", "right")[(j // 3) % 2], "{}", "{}", 20.0 + j % 40, NOW)
               for j in range(n_judgements)))
        cursor.execute("ANALYZE")
    return tournament


def time_export(tournament, path, *, parquet=False):
    from annotation.datasets import exports, formats, streams

    start = time.perf_counter()
    rows = streams.human_preference_rows(tournaments=[tournament])
    if parquet:
        count = exports.write_table(formats.HUMAN_PREFERENCES, rows, parquet_file=path)
    else:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            count = exports.write_table(formats.HUMAN_PREFERENCES, rows, csv_file=handle)
    return count, time.perf_counter() - start


COPY_SQL = """
COPY (
  SELECT img.url, inst.instruction, ra.text, rb.text, ra.model_name, rb.model_name,
         (hj.choice = 'left') = (hj.shown_left = 'a'), (hj.choice = 'left') <> (hj.shown_left = 'a')
  FROM annotation_humanjudgement hj
  JOIN annotation_battle b ON b.id = hj.battle_id
  JOIN annotation_instance inst ON inst.id = b.instance_id
  JOIN annotation_modelresponse ra ON ra.id = b.response_a_id
  JOIN annotation_modelresponse rb ON rb.id = b.response_b_id
  JOIN annotation_instanceimage ii ON ii.instance_id = inst.id AND ii.position = 0
  JOIN annotation_imageasset img ON img.id = ii.image_id
  WHERE b.tournament_id = %s
  ORDER BY hj.battle_id, hj.id
) TO STDOUT WITH (FORMAT csv, HEADER true)
"""


def time_copy(tournament, path):
    from django.db import connection

    start = time.perf_counter()
    size = 0
    with connection.cursor() as django_cursor, open(path, "wb") as handle:
        with django_cursor.cursor.copy(COPY_SQL.replace("%s", str(int(tournament.pk)))) as copy:
            for block in copy:
                size += handle.write(block)
    return time.perf_counter() - start, size


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgements", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark database.")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    django.setup()
    from crowdbench import scoping

    scoping.enter(scoping.EveryGroup("a benchmark builds and reads every group's rows"))
    from django.conf import settings
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("Set DATABASE_URL to a PostgreSQL server: this benchmark uses COPY.")
    database = settings.DATABASES["default"]
    original_name = database["NAME"]
    database.setdefault("TEST", {})["NAME"] = f"test_{database['NAME']}_bench_exports"
    name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    report = io.StringIO()
    try:
        start = time.perf_counter()
        tournament = load(args.judgements)
        print(f"Loaded {args.judgements:,} judgements into {name} with COPY in "
              f"{time.perf_counter() - start:.1f} s.", file=report)
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            ours, copies = [], []
            for _ in range(args.repeat):  # interleaved, so both see the same machine
                count, seconds = time_export(tournament, folder / "ours.csv")
                ours.append(seconds)
                copy_seconds, copy_bytes = time_copy(tournament, folder / "copy.csv")
                copies.append(copy_seconds)
            rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            ours_bytes = (folder / "ours.csv").stat().st_size
            pq_count, pq_seconds = time_export(tournament, folder / "ours.parquet", parquet=True)
            tracemalloc.start()
            time_export(tournament, folder / "traced.csv")
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            pq_bytes = (folder / "ours.parquet").stat().st_size
        assert count == pq_count == args.judgements, (count, pq_count)
        rows = [
            ("crowdbench human_preferences.csv", ours, ours_bytes),
            ("PostgreSQL COPY ... TO STDOUT (CSV)", copies, copy_bytes),
            ("crowdbench human_preferences.parquet", [pq_seconds], pq_bytes),
        ]
        print(f"\n{args.repeat} repetitions, interleaved (Parquet once)", file=report)
        print(f"{'export':40} {'min s':>8} {'median s':>9} {'rows/s':>10} {'MB':>8}", file=report)
        for label, times, size in rows:
            median = statistics.median(times)
            print(f"{label:40} {min(times):8.1f} {median:9.1f} {count / median:10,.0f} {size / 1e6:8.1f}",
                  file=report)
        print(f"\nOur CSV export runs at {statistics.median(copies) / statistics.median(ours):.0%} of "
              f"COPY's speed (medians; best {min(copies) / min(ours):.0%}).", file=report)
        print(f"Peak Python memory of the CSV export (tracemalloc): {peak / 1e6:.1f} MB", file=report)
        print(f"Process peak RSS: {rss_before / 1024:.0f} MB before the exports, "
              f"{rss_after / 1024:.0f} MB after them", file=report)
    finally:
        if not args.keep:
            connection.creation.destroy_test_db(original_name, verbosity=0)
    print(report.getvalue())


if __name__ == "__main__":
    main()
