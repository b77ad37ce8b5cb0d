"""Why worker-aware stopping buys less on some real crowds than on others (issue 41): the
project's one-coin rule (annotation/crowdwork/stopping.py's `WorkerAware`, each answer weighed by
one accuracy, a wrong answer spread evenly over the other labels, an even prior over the labels)
beside an experiment that weighs each answer by its worker's confusion (how often they say each
label for each true one) and the labels' frequencies among the gold, on the real sets of
benchmarks/crowd_truth_sets.py.

    .venv/bin/python benchmarks/worker_aware_confusion.py /tmp/crowd_truth_infer/datasets
    .venv/bin/python benchmarks/worker_aware_confusion.py DATASETS --sets dog face --seeds 41 42 43 44 45
    .venv/bin/python benchmarks/worker_aware_confusion.py DATASETS --seeds 41 --source gold   # 5% gold
    .venv/bin/python benchmarks/worker_aware_confusion.py DATASETS --seeds 41 --source ds     # no truth

Both arms take each worker's evidence from one source (`--source`), pulled toward the stage's
prior as `annotation/workforce/accuracy.py` pulls it. `other`: the truth of their *other* items
(never the decided item's own); `gold`: the truth of a share of the items only (`--gold-share`,
5%, drawn as the replay draws its gold, `replay.gold_of`), as gold mixed into the work would give;
`ds`: Dawid-Skene fitted on every answer, with no truth (its confusion matrices and class priors).
The one-coin arm is the replay's own code (`replay.accuracies`, `replay.buy`, `replay.votes`) with
the same source; the confusion arm pulls each row of a worker's confusion toward their one-coin
row with the same weight of four answers (for Dawid-Skene, weighing its row by the worker's
answers times the class's prior), and takes the labels' frequencies among the gold (Dawid-Skene's
class priors) as the prior. A yes/no verification stage can now run a rule of this kind (its "by
verdict", `WorkerAware(by_truth=True)`: for two labels a worker's accuracy on each truth is their
whole confusion matrix), starting from Dawid-Skene's class priors whatever the source of the
accuracies, and never counting an answer against its own label; for more labels the replay's "by
truth" rows keep only the matrix's diagonal, a wrong answer spread evenly, where this keeps it
whole. Each arm is averaged over `--seeds` random orders of each item's answers, up to seven
answers.
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

    from annotation import replay_input

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(replay_rows(folder, seed=seed))
    return replay_input.read_answers(io.BytesIO(buffer.getvalue().encode()))


def one_coin(answers, threshold, gold_share=1.0):
    """(answers bought per item, accuracy) of the project's rule, as the replay runs it."""
    from annotation import replay
    from annotation.crowdwork.stopping import WorkerAware

    weights, _ = replay.accuracies(answers, gold_share=gold_share)
    labels = tuple(sorted(answers.frame["label"].unique()))
    rule = replay.Rule("weighed", WorkerAware(threshold, replay.PRIOR_ACCURACY, labels=labels, enough=replay.ENOUGH),
                       MOST)
    bought, _ = replay.buy(answers, rule, weights)
    decided = replay.votes(bought, rule, weights)
    return len(bought) / len(decided), float((decided == answers.truth[decided.index]).mean())


def evidence(answers, source, gold_share=1.0):
    """Per answer row, the likelihood of what it said under each true label (its worker's confusion
    row, pulled toward their one-coin row by four answers), and per item the log prior of the
    labels; from the gold's truth on the worker's other items, or from Dawid-Skene on every answer."""
    from annotation.crowdwork.stopping import MOST_TRUSTED
    from annotation.replay import ENOUGH, PRIOR_ACCURACY
    from annotation.workforce.accuracy import PRIOR_ANSWERS

    frame = answers.frame
    labels = sorted(set(frame["label"]) | set(answers.truth))
    index = {label: position for position, label in enumerate(labels)}
    k = len(labels)
    said = frame["label"].map(index).to_numpy()
    worker = frame["worker"].astype("category").cat.codes.to_numpy()
    names = frame["worker"].astype("category").cat.categories

    def coin_of(accuracy):
        accuracy = min(max(accuracy, 1 / k), MOST_TRUSTED)
        coin = np.full((k, k), (1 - accuracy) / (k - 1))
        np.fill_diagonal(coin, accuracy)
        return coin

    likelihood = np.zeros((len(frame), k))
    log_prior = {}
    if source == "ds":
        from crowdkit.aggregation import DawidSkene

        from annotation import worker_models

        fitted = DawidSkene(n_iter=worker_models.N_ITER).fit(worker_models.canonical_order(frame))
        priors = np.array([fitted.priors_.get(label, 0.0) for label in labels])
        errors = fitted.errors_
        answered = frame.groupby("worker").size()
        accuracy = (worker_models._dawid_skene_by_truth(fitted) * fitted.priors_).sum(axis="columns")
        rates_of = {}
        for code, name in enumerate(names):
            n = answered[name]
            matrix = np.zeros((k, k))  # [true, said]
            for s_label in labels:
                if (name, s_label) in errors.index:
                    row = errors.loc[(name, s_label)]
                    matrix[:, index[s_label]] = [row.get(t, 0.0) for t in labels]
            if n < ENOUGH:
                rates_of[code] = coin_of(PRIOR_ACCURACY)
                continue
            one = (accuracy[name] * n + PRIOR_ANSWERS * PRIOR_ACCURACY) / (n + PRIOR_ANSWERS)
            weight = n * priors[:, None]
            rates_of[code] = (weight * matrix + PRIOR_ANSWERS * coin_of(one)) / (weight + PRIOR_ANSWERS)
        for row in range(len(frame)):
            likelihood[row] = rates_of[worker[row]][:, said[row]]
        score = np.log(np.maximum(priors, 1e-6))
        for item in frame["task"].unique():
            log_prior[item] = score
        return likelihood, log_prior, labels
    from annotation.replay import gold_of

    gold = gold_of(answers, gold_share)
    truth = frame["task"].map(gold)
    known = truth.notna().to_numpy()
    true = truth.map(index).fillna(-1).astype(int).to_numpy()
    counts = np.zeros((worker.max() + 1, k, k))
    np.add.at(counts, (worker[known], true[known], said[known]), 1)
    frequency = np.bincount(gold.map(index).to_numpy(), minlength=k).astype(float)
    for item, rows in frame.groupby("task", sort=False).indices.items():
        others = frequency.copy()
        if item in gold.index:
            others[index[gold[item]]] -= 1
        log_prior[item] = np.log((others + 1) / (others.sum() + k))
        for row in rows:
            own = counts[worker[row]].copy()
            if known[row]:
                own[true[row], said[row]] -= 1
            if own.sum() < ENOUGH:
                # Too little gold: the prior alone. The stage (`accuracy_from`) and the one-coin arm
                # fall back to the worker model instead; this arm measures gold on its own.
                own[:] = 0
            one = (np.trace(own) + PRIOR_ANSWERS * PRIOR_ACCURACY) / (own.sum() + PRIOR_ANSWERS)
            rates = (own + PRIOR_ANSWERS * coin_of(one)) / (own.sum(axis=1, keepdims=True) + PRIOR_ANSWERS)
            likelihood[row] = rates[:, said[row]]
    return likelihood, log_prior, labels


def confusion(answers, threshold, weighed):
    """(answers bought per item, accuracy) weighing each answer by `weighed` (`evidence`'s)."""
    likelihood, log_prior, labels = weighed
    frame = answers.frame
    index = {label: position for position, label in enumerate(labels)}
    bought = right = 0
    for item, rows in frame.groupby("task", sort=False).indices.items():
        truth = index[answers.truth[item]]
        score = log_prior[item].copy()
        for row in rows[:MOST]:
            bought += 1
            score = score + np.log(likelihood[row])
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
    parser.add_argument("--source", choices=("other", "gold", "ds"), default="other",
                        help="each worker's evidence: the truth of their other items, of a share of the items "
                             "taken as gold (--gold-share), or Dawid-Skene on every answer")
    parser.add_argument("--gold-share", type=float, default=0.05)
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
            share = {"other": 1.0, "gold": args.gold_share, "ds": 0.0}[args.source]
            weighed = evidence(answers, args.source, share)
            for threshold in THRESHOLDS:
                runs["one-coin"][threshold].append(one_coin(answers, threshold, share))
                runs["confusion"][threshold].append(confusion(answers, threshold, weighed))
        print(f"=== {SETS[name][1]}: answers bought per item → accuracy, mean of {len(args.seeds)} orders ===")
        for arm, points in runs.items():
            curve = "  ".join(f"{threshold:g}: {np.mean([c for c, _ in got]):.2f} → {np.mean([a for _, a in got]):.3f}"
                              for threshold, got in points.items())
            print(f"  {arm + ':':<11}{curve}")
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        print(f"({time.perf_counter() - started:.1f} s; load average {load})\n", flush=True)


if __name__ == "__main__":
    main()
