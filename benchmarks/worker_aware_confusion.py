"""Why worker-aware stopping buys less on some real crowds than on others (issue 41): the
project's one-coin rule (annotation/crowdwork/stopping.py's `WorkerAware`, each answer weighed by
one accuracy, a wrong answer spread evenly over the other labels, an even prior over the labels)
beside an experiment that weighs each answer by its worker's confusion (how often they say each
label for each true one) and the labels' frequencies among the gold, on the real sets of
benchmarks/crowd_truth_sets.py.

    .venv/bin/python benchmarks/worker_aware_confusion.py /tmp/crowd_truth_infer/datasets
    .venv/bin/python benchmarks/worker_aware_confusion.py DATASETS --sets dog face --seeds 41 42 43 44 45

Both arms take each worker's evidence from the truth of their *other* items (never the decided
item's own), pulled toward the stage's prior as `annotation/workforce/accuracy.py` pulls it: the
one-coin arm is the replay's own code (`replay.accuracies`, `replay.buy`, `replay.votes`); the
confusion arm pulls each row of a worker's confusion toward their one-coin row with the same
weight of four answers, and takes the labels' frequencies among the other items' truth as the
prior. It is an experiment, not a rule a stage can run (a stage keeps one accuracy a worker):
each arm is averaged over `--seeds` random orders of each item's answers, up to seven answers.
"""

import argparse
import io
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.crowd_truth_sets import COLUMNS, SETS, replay_rows  # noqa: E402

THRESHOLDS = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)
MOST = 7


def answers_of(folder, seed):
    import csv

    from annotation import replay

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(replay_rows(folder, seed=seed))
    return replay.read_answers(io.BytesIO(buffer.getvalue().encode()))


def one_coin(answers, threshold):
    """(answers bought per item, accuracy) of the project's rule, as the replay runs it."""
    from annotation import replay
    from annotation.crowdwork.stopping import WorkerAware

    weights, _ = replay.accuracies(answers)
    labels = tuple(sorted(answers.frame["label"].unique()))
    rule = replay.Rule("weighed", WorkerAware(threshold, replay.PRIOR_ACCURACY, labels=labels, enough=replay.ENOUGH),
                       MOST)
    bought, _ = replay.buy(answers, rule, weights)
    decided = replay.votes(bought, rule, weights)
    return len(bought) / len(decided), float((decided == answers.truth[decided.index]).mean())


def confusion(answers, threshold):
    """(answers bought per item, accuracy) weighing each answer by its worker's confusion row for
    each true label, from the truth of their other items, and the other items' label frequencies."""
    from annotation.crowdwork.stopping import MOST_TRUSTED
    from annotation.replay import ENOUGH, PRIOR_ACCURACY
    from annotation.workforce.accuracy import PRIOR_ANSWERS

    frame = answers.frame
    labels = sorted(set(frame["label"]) | set(answers.truth))
    index = {label: position for position, label in enumerate(labels)}
    k = len(labels)
    said = frame["label"].map(index).to_numpy()
    true = frame["task"].map(answers.truth).map(index).to_numpy()
    worker = frame["worker"].astype("category").cat.codes.to_numpy()
    counts = np.zeros((worker.max() + 1, k, k))
    np.add.at(counts, (worker, true, said), 1)
    frequency = np.bincount(answers.truth.map(index).to_numpy(), minlength=k).astype(float)
    bought = right = 0
    for _, rows in frame.groupby("task", sort=False).indices.items():
        truth = true[rows[0]]
        others = frequency.copy()
        others[truth] -= 1
        score = np.log((others + 1) / (others.sum() + k))
        for row in rows[:MOST]:
            bought += 1
            own = counts[worker[row]].copy()
            own[truth, said[row]] -= 1
            if own.sum() < ENOUGH:
                # Too little gold: the prior alone, as `accuracy_from` gives it.
                own[:] = 0
            accuracy = (np.trace(own) + PRIOR_ANSWERS * PRIOR_ACCURACY) / (own.sum() + PRIOR_ANSWERS)
            accuracy = min(max(accuracy, 1 / k), MOST_TRUSTED)
            coin = np.full((k, k), (1 - accuracy) / (k - 1))
            np.fill_diagonal(coin, accuracy)
            rates = (own + PRIOR_ANSWERS * coin) / (own.sum(axis=1, keepdims=True) + PRIOR_ANSWERS)
            score = score + np.log(rates[:, said[row]])
            posterior = np.exp(score - score.max())
            posterior /= posterior.sum()
            if posterior.max() >= threshold:
                break
        right += int(posterior.argmax() == truth)
    items = frame["task"].nunique()
    return bought / items, right / items


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", type=Path, help="the datasets/ folder of zhydhkcws/crowd_truth_infer")
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=["duck", "dog", "face"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[41, 42, 43, 44, 45])
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    import django

    django.setup()
    for name in args.sets:
        started = time.perf_counter()
        folder = args.datasets / SETS[name][0]
        runs = {arm: {threshold: [] for threshold in THRESHOLDS} for arm in ("one-coin", "confusion")}
        for seed in args.seeds:
            answers = answers_of(folder, seed)
            for threshold in THRESHOLDS:
                runs["one-coin"][threshold].append(one_coin(answers, threshold))
                runs["confusion"][threshold].append(confusion(answers, threshold))
        print(f"=== {SETS[name][1]}: answers bought per item → accuracy, mean of {len(args.seeds)} orders ===")
        for arm, points in runs.items():
            curve = "  ".join(f"{threshold:g}: {np.mean([c for c, _ in got]):.2f} → {np.mean([a for _, a in got]):.3f}"
                              for threshold, got in points.items())
            print(f"  {arm + ':':<11}{curve}")
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        print(f"({time.perf_counter() - started:.1f} s; load average {load})\n", flush=True)


if __name__ == "__main__":
    main()
