"""The worker-model job at 100,000 verification answers: its fit, and the whole job (issue 41).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/worker_model_job.py
    .venv/bin/python benchmarks/worker_model_job.py --answers 30000

It creates (dropping first) `crowdbench_bench_worker_model_job` and fills it with bulk inserts:
one family whose verification stage decides by Dawid-Skene (three verifiers a reference, the
majority rule below the model's evidence), `--answers` / 3 references each waiting with its
instance, its unit, and three submitted answers by distinct workers among one per 333 answers
(`quality_models.label_frame`, 20% spammers, seed 26). Then it times the fit alone (reading the
frame and Dawid-Skene's fit, what the job starts with), `--one-by-one` references decided one at
a time as the job did before issue 41 (`decide_one`), the job (`decide_by_worker_models`: the fit,
storing the reliabilities, deciding the other waiting references in bulk and revising), and the
job again with nothing waiting (it reads every decision the model made and revises none).
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.quality_models import label_frame  # noqa: E402
from benchmarks.support import analyse_as_autovacuum_would, fresh_database, set_up_django  # noqa: E402

DATABASE_NAME = "crowdbench_bench_worker_model_job"
SEED = 26
ANSWERS_PER_WORKER = 333


def seed(answers):
    from django.utils import timezone

    from annotation.models import (
        Aggregation,
        Assignment,
        Instance,
        Reference,
        Stage,
        Verification,
        Worker,
        WorkUnit,
    )
    from tests.factories import FamilyFactory, launch

    frame, _ = label_frame(np.random.default_rng(SEED), answers=answers,
                           workers=max(answers // ANSWERS_PER_WORKER, 10), spammer_share=0.2)
    family = FamilyFactory(name="Worker-model job", target_instances=frame["task"].nunique())
    launch(family, Stage.VERIFICATION, overlap=3, aggregation=Aggregation.DAWID_SKENE, verification_rule="majority")
    workers = Worker.objects.bulk_create(Worker(external_id=f"BENCH{index:05d}")
                                         for index in range(frame["worker"].max() + 1))
    tasks = sorted(frame["task"].unique())
    instances = Instance.objects.bulk_create(
        Instance(family=family, instruction=f"Question {task}", status=Instance.Status.AWAITING_VERIFICATION)
        for task in tasks)
    references = Reference.objects.bulk_create(
        Reference(instance=instance, text=f"An answer to question {task}.", source=Reference.Source.MANUAL)
        for task, instance in zip(tasks, instances, strict=True))
    units = WorkUnit.objects.bulk_create(
        WorkUnit(stage=Stage.VERIFICATION, key=f"reference:{reference.pk}", family=family, instance=instance,
                 reference=reference, overlap=3, status=WorkUnit.Status.DONE)
        for instance, reference in zip(instances, references, strict=True))
    by_task = dict(zip(tasks, zip(references, units, strict=True), strict=True))
    now = timezone.now()
    rows = list(frame.itertuples(index=False))
    assignments = Assignment.objects.bulk_create(
        (Assignment(unit=by_task[row.task][1], worker=workers[row.worker], status=Assignment.Status.SUBMITTED,
                    lease_expires_at=now, submitted_at=now) for row in rows), batch_size=5000)
    Verification.objects.bulk_create(
        (Verification(reference=by_task[row.task][0], worker=workers[row.worker], assignment=assignment,
                      is_correct=row.label == "correct", problem_in_response=row.label != "correct")
         for row, assignment in zip(rows, assignments, strict=True)), batch_size=5000)
    return len(references)


def timed(what, call):
    started = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - started
    print(f"{what:<58} {seconds:>8.1f} s", flush=True)
    return result, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--one-by-one", type=int, default=500, metavar="N",
                        help="first decide N references one at a time, as the job did before issue 41")
    args = parser.parse_args()
    set_up_django(fresh_database(args.server, DATABASE_NAME))
    from collections import Counter

    from annotation import worker_models
    from annotation.collection import worker_model_job
    from annotation.models import Aggregation, Reference

    waiting, _ = timed(f"seeding {args.answers:,} answers (bulk inserts)", lambda: seed(args.answers))
    analyse_as_autovacuum_would()
    worker_models.fit_labels(worker_models.verification_frame().head(30), Aggregation.DAWID_SKENE)  # imports
    fit, fit_seconds = timed("the fit alone (read the frame, Dawid-Skene)",
                             lambda: worker_models.fit_labels(worker_models.verification_frame(),
                                                              Aggregation.DAWID_SKENE))
    if args.one_by_one:
        fits, known = {Aggregation.DAWID_SKENE: fit}, worker_model_job.workers_of_known_accuracy()
        first = worker_model_job.awaiting_worker_model()[:args.one_by_one]
        _, seconds = timed(f"{len(first):,} of them decided one by one (decide_one)",
                           lambda: [worker_model_job.decide_one(reference, fits, known) for reference in first])
        print(f"{'  one by one, per reference':<58} {seconds / len(first) * 1000:>8.1f} ms")
    decided, job_seconds = timed("the job: fit, store, decide the others, revise",
                                 worker_model_job.decide_by_worker_models)
    print(f"{'  the job less the fit alone (deciding, storing, revising)':<58} {job_seconds - fit_seconds:>8.1f} s")
    timed("the job again, nothing waiting", worker_model_job.decide_by_worker_models)
    by = Counter(Reference.objects.values_list("decided_by", flat=True))
    print(f"the job decided {decided:,} of {waiting:,}; decided by: {dict(sorted(by.items()))}")


if __name__ == "__main__":
    main()
