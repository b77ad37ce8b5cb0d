"""Worker models against the majority vote: accuracy against a known truth, and wall time.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/quality_models.py [--references 300]

Part 1, through the real services on PostgreSQL (it creates, dropping first, the database
`crowdbench_bench_quality`): for 0%, 20% and 40% spammers, a family whose verification stage
decides by a strict majority gets `--references` candidate references (stored by the reference
service), each verified by three workers drawn at random who lease its unit from the queue and
submit through `submit_verification`. Good workers are right with an accuracy drawn from
U(0.65, 0.95); half the spammers say "correct" whatever they see, the other half flip a coin.
The majority is what the stage decided; Dawid-Skene, GLAD and MACE are crowd-kit's fits on the
same counted answers (`annotation.worker_models.verification_frame`, what the worker-model job
reads), each scored against the truth the simulation knows. It also prints how Dawid-Skene's
stored reliabilities rank the workers (Spearman's rho against their true accuracy, and the best
spammer against the worst good worker).

Part 2, on crowd-kit frames of 100,000 answers (33,334 references, three answers each, 300
workers, the same kinds of worker and share of spammers): the same accuracies, and the wall time
of each aggregation, the fits the worker-model job runs; and crowd-kit's Bradley-Terry and noisy
Bradley-Terry on 100,000 pairwise judgements of 15 models.

Part 4: part 1's size on frames over 20 seeds (0 to 19) at 20% and 40% spammers: the mean
accuracy and how often each model beats the majority, since at that size one draw can trap an EM
fit in a poor optimum (seed 2026's third level, 40%, does so for Dawid-Skene).

`--parts 2,4` runs only those parts. Every random draw comes from the seeds printed at the top;
the same seeds give the same figures.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import fresh_database, set_up_django  # noqa: E402

DATABASE_NAME = "crowdbench_bench_quality"
SPAMMER_SHARES = (0.0, 0.2, 0.4)
OVERLAP = 3
GOOD_ACCURACY = (0.65, 0.95)
MODELS = ("dawid_skene", "glad", "mace")
SERVICE_SEED, FRAME_SEED, PAIRWISE_SEED = 2026, 26, 15


# --- the simulated crowd --------------------------------------------------------------------------


def crowd(rng, workers, spammer_share):
    """Each worker's kind ("good", "always yes", "coin") and true accuracy on a balanced task."""
    spammers = round(workers * spammer_share)
    always_yes = (spammers + 1) // 2
    kinds = ["always yes"] * always_yes + ["coin"] * (spammers - always_yes) + ["good"] * (workers - spammers)
    accuracy = [0.5 if kind != "good" else rng.uniform(*GOOD_ACCURACY) for kind in kinds]
    return kinds, np.array(accuracy)


def says_correct(rng, kind, accuracy, truth):
    if kind == "always yes":
        return True
    if kind == "coin":
        return bool(rng.random() < 0.5)
    return truth if rng.random() < accuracy else not truth


def majority(frame):
    """The stage's rule "a strict majority must mark it correct", on a frame."""
    said = frame.assign(correct=frame["label"] == "correct").groupby("task")["correct"]
    return (said.sum() * 2 > said.count()).map({True: "correct", False: "incorrect"})


def accuracy_of(labels, truth):
    truth = truth.reindex(labels.index)
    return float((labels == truth).mean())


# --- part 1: through the services -----------------------------------------------------------------


def through_services(*, references, workers, spammer_share, rng):
    from annotation import worker_models
    from annotation.collection import references as reference_service
    from annotation.collection.verification import submit_verification
    from annotation.crowdwork import queue
    from annotation.models import Instance, Reference, Stage, WorkerReliability, WorkUnit
    from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, WorkerFactory, launch

    family = FamilyFactory(name=f"Spammers {spammer_share:.0%}")
    launch(family, Stage.VERIFICATION, overlap=OVERLAP, verification_rule="majority")
    kinds, accuracy = crowd(rng, workers, spammer_share)
    people = WorkerFactory.create_batch(workers)
    truth = {}
    started = time.perf_counter()
    for _ in range(references):
        instance = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE, image_count=1)
        instance.current_caption = CaptionFactory(instance=instance)
        instance.save()
        reference = reference_service.store_reference(instance=instance, text="An answer.",
                                                      source=Reference.Source.MANUAL)
        unit = WorkUnit.objects.get(reference=reference, stage=Stage.VERIFICATION)
        truth[reference.pk] = bool(rng.random() < 0.5)
        for index in rng.choice(workers, OVERLAP, replace=False):
            said = says_correct(rng, kinds[index], accuracy[index], truth[reference.pk])
            lease = queue.lease_unit(worker=people[index], unit=unit)
            submit_verification(assignment_id=lease.pk, worker=people[index], is_correct=said,
                                problem_in_response=not said)
    submitting = time.perf_counter() - started
    truth = pd.Series(truth).map({True: "correct", False: "incorrect"})
    decided = dict(Reference.objects.filter(pk__in=truth.index).values_list("pk", "verdict"))
    frame = worker_models.verification_frame()
    frame = frame[frame["task"].isin(truth.index)]
    row = {"spammers": spammer_share, "answers": len(frame), "submit_s": submitting,
           "majority": accuracy_of(pd.Series(decided), truth)}
    for model in MODELS:
        fit = worker_models.fit_labels(frame, model)
        row[model] = accuracy_of(fit.labels, truth)
        if model == "dawid_skene":
            worker_models.store_reliabilities(stage=Stage.VERIFICATION, model=model, reliability=fit.reliability,
                                              answers=fit.answers, family=family, by_truth=fit.by_truth,
                                              shares=fit.shares)
    stored = dict(WorkerReliability.objects.filter(family=family, model="dawid_skene")
                  .values_list("worker_id", "reliability"))
    estimated = np.array([stored[person.pk] for person in people])
    good = np.array([kind == "good" for kind in kinds])
    row["rho"] = stats.spearmanr(estimated, accuracy).statistic if len(set(accuracy)) > 1 else float("nan")
    row["best_spammer"] = float(estimated[~good].max()) if (~good).any() else float("nan")
    row["worst_good"] = float(estimated[good].min())
    return row


# --- part 2: frames -------------------------------------------------------------------------------


def label_frame(rng, *, answers, workers, spammer_share):
    tasks = answers // OVERLAP + (answers % OVERLAP > 0)
    kinds, accuracy = crowd(rng, workers, spammer_share)
    kinds = np.array(kinds)
    truth = rng.random(tasks) < 0.5
    task = np.repeat(np.arange(tasks), OVERLAP)[:answers]
    # Three distinct workers per task: a random permutation's first three, per task.
    worker = np.argsort(rng.random((tasks, workers)), axis=1)[:, :OVERLAP].ravel()[:answers]
    right = rng.random(answers) < accuracy[worker]
    said = np.where(right, truth[task], ~truth[task])
    said = np.where(kinds[worker] == "always yes", True, said)
    said = np.where(kinds[worker] == "coin", rng.random(answers) < 0.5, said)
    frame = pd.DataFrame({"task": task, "worker": worker, "label": np.where(said, "correct", "incorrect")})
    return frame, pd.Series(np.where(truth, "correct", "incorrect"))


def on_frames(*, answers, workers, rng):
    from annotation import worker_models

    rows = []
    for share in SPAMMER_SHARES:
        frame, truth = label_frame(rng, answers=answers, workers=workers, spammer_share=share)
        started = time.perf_counter()
        voted = majority(frame)
        row = {"spammers": share, "answers": len(frame), "majority": accuracy_of(voted, truth),
               "majority_s": time.perf_counter() - started}
        for model in MODELS:
            started = time.perf_counter()
            fit = worker_models.fit_labels(frame, model)
            row[f"{model}_s"] = time.perf_counter() - started
            row[model] = accuracy_of(fit.labels, truth)
        rows.append(row)
        print_row(row, timed=True)
    return rows


def seed_sweep(*, answers, workers, seeds):
    """Part 1's size on frames, over many seeds: how often each model beats the majority, since
    one seed's draw at this size can trap an EM fit in a poor optimum."""
    from annotation import worker_models

    for share in SPAMMER_SHARES[1:]:
        found = {name: [] for name in ("majority", *MODELS)}
        for seed in seeds:
            frame, truth = label_frame(np.random.default_rng(seed), answers=answers, workers=workers,
                                       spammer_share=share)
            found["majority"].append(accuracy_of(majority(frame), truth))
            for model in MODELS:
                found[model].append(accuracy_of(worker_models.fit_labels(frame, model).labels, truth))
        wins = {model: sum(a > b for a, b in zip(found[model], found["majority"], strict=True)) for model in MODELS}
        print(f"{share:>8.0%} {answers:>8,} {np.mean(found['majority']):>9.3f} "
              + " ".join(f"{np.mean(found[model]):>8.3f} ({wins[model]:>2}/{len(seeds)} wins)" for model in MODELS),
              flush=True)


def pairwise_times(*, answers, workers, rng, models=15):
    from annotation import worker_models

    strength = rng.normal(0, 1, models)
    left, right = rng.integers(0, models, answers), rng.integers(0, models - 1, answers)
    right = np.where(right >= left, right + 1, right)
    p_left = 1 / (1 + np.exp(strength[right] - strength[left]))
    label = np.where(rng.random(answers) < p_left, left, right)
    names = np.array([f"model-{index:02d}" for index in range(models)])
    frame = pd.DataFrame({"worker": rng.integers(0, workers, answers), "left": names[left],
                          "right": names[right], "label": names[label]})
    truth = pd.Series(strength, index=names)
    for model in ("bradley_terry", "noisy_bt"):
        started = time.perf_counter()
        fit = worker_models.fit_pairwise(frame, model)
        seconds = time.perf_counter() - started
        rho = stats.spearmanr(fit.scores.reindex(names), truth).statistic
        print(f"  {model:<14} {len(frame):>8,} judgements  {seconds:7.1f} s   Spearman with the true strengths "
              f"{rho:.3f}")


# --- printing -------------------------------------------------------------------------------------


def header(timed):
    columns = "spammers  answers  majority  Dawid-Skene     GLAD     MACE"
    if timed:
        columns += "    time: majority  Dawid-Skene     GLAD     MACE"
    print(columns)


def print_row(row, *, timed=False, extra=""):
    line = (f"{row['spammers']:>8.0%} {row['answers']:>8,} {row['majority']:>9.3f} {row['dawid_skene']:>12.3f} "
            f"{row['glad']:>8.3f} {row['mace']:>8.3f}")
    if timed:
        line += (f"  {row['majority_s']:>14.2f} s {row['dawid_skene_s']:>10.1f} s {row['glad_s']:>6.1f} s "
                 f"{row['mace_s']:>6.1f} s")
    print(line + extra, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
                        help="a PostgreSQL server URL; the benchmark makes its own database there")
    parser.add_argument("--references", type=int, default=300, help="references per level, through the services")
    parser.add_argument("--workers", type=int, default=15, help="workers per level, through the services")
    parser.add_argument("--answers", type=int, default=100_000, help="answers per frame in part 2")
    parser.add_argument("--frame-workers", type=int, default=300)
    parser.add_argument("--parts", default="1,2,3,4", help="which parts to run, e.g. 2,4")
    parser.add_argument("--sweep-seeds", type=int, default=20)
    args = parser.parse_args()
    parts = {int(part) for part in args.parts.split(",")}
    print(f"seeds: services {SERVICE_SEED}, sweep 0 to {args.sweep_seeds - 1}, frames {FRAME_SEED}, "
          f"pairwise {PAIRWISE_SEED}; "
          f"good workers' accuracy U{GOOD_ACCURACY}; overlap {OVERLAP}; spammers half always \"correct\", "
          "half coin flips")
    set_up_django(fresh_database(args.server, DATABASE_NAME))
    if 1 in parts:
        print(f"\n1. Through the services on PostgreSQL: {args.references} references x {OVERLAP} answers, "
              f"{args.workers} workers per level; accuracy against the truth")
        header(timed=False)
        rng = np.random.default_rng(SERVICE_SEED)
        for share in SPAMMER_SHARES:
            row = through_services(references=args.references, workers=args.workers, spammer_share=share, rng=rng)
            print_row(row, extra=(f"   DS reliability vs true accuracy: rho {row['rho']:.2f}, best spammer "
                                  f"{row['best_spammer']:.2f}, worst good {row['worst_good']:.2f}; submitting "
                                  f"{row['submit_s']:.0f} s"))
    if 2 in parts:
        print(f"\n2. crowd-kit frames of {args.answers:,} answers, {args.frame_workers} workers: "
              "accuracy and wall time")
        header(timed=True)
        on_frames(answers=args.answers, workers=args.frame_workers, rng=np.random.default_rng(FRAME_SEED))
    if 3 in parts:
        print(f"\n3. Pairwise, {args.answers:,} judgements of 15 models by {args.frame_workers} workers")
        pairwise_times(answers=args.answers, workers=args.frame_workers, rng=np.random.default_rng(PAIRWISE_SEED))
    if 4 in parts:
        answers = args.references * OVERLAP
        print(f"\n4. Part 1's size ({answers:,} answers, {args.workers} workers) on frames, seeds 0 to "
              f"{args.sweep_seeds - 1}: mean accuracy, and in how many seeds each model beats the majority")
        header(timed=False)
        seed_sweep(answers=answers, workers=args.workers, seeds=range(args.sweep_seeds))


if __name__ == "__main__":
    main()
