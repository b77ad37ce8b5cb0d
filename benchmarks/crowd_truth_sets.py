"""Public real crowd sets with known truth, written as replay files (`manage.py replay_answers`,
annotation/replay.py), for issue 41's budget-against-accuracy curves.

    git clone https://github.com/zhydhkcws/crowd_truth_infer /tmp/crowd_truth_infer
    .venv/bin/python benchmarks/crowd_truth_sets.py /tmp/crowd_truth_infer/datasets /tmp/crowd_replay

The sets are those of Zheng, Li, Li, Shan and Cheng, "Truth Inference in Crowdsourcing: Is the
Problem Solved?", PVLDB 10(5), 2017 (https://zhydhkcws.github.io/crowd_truth_inference/), as their
repository publishes them: each a folder with `answer.csv` (question,worker,answer) and
`truth.csv` (question,truth). The repository states no licence for the data, so the project keeps
none of it: this reads the folder it is given and writes the replay files elsewhere.

Kept: the single-label sets with a truth for every item. Duck Identification (Welinder et al.
2010, yes/no, 108 items, 39 workers who each answered all of them), Product (jn-product, Wang et
al. 2012, yes/no "same product?", 8,315 items of three answers), Dog (Zhou et al. 2012, four
breeds, 807 items of ten answers) and Face Sentiment (Mozafari et al. 2014, four expressions, 584
items of up to nine). Emotion is numeric, which no stopping rule of the project reads.

None of the files records when an answer came: Duck's rows run worker by worker, so in file
order one worker would answer first on every item, and whether that worker is good would decide
every fixed overlap of one. Each item's answers are therefore put in a random order of their own
(the `order` column, `--seed`, default 41), as a queue handing items to whoever arrives gives
them; `--file-order` keeps the files' order instead.
"""

import argparse
import csv
from pathlib import Path

import numpy as np

# Name in the replay: (folder in the repository's datasets/, what it is).
SETS = {
    "duck": ("d_Duck Identification", "Duck Identification, yes/no"),
    "product": ("d_jn-product", "Product (jn-product), yes/no"),
    "dog": ("s4_Dog data", "Dog, four breeds"),
    "face": ("s4_Face Sentiment Identification", "Face Sentiment, four expressions"),
}
COLUMNS = ("item", "worker", "answer", "truth", "order")


def replay_rows(folder, *, seed=41, file_order=False):
    """The rows (dicts of COLUMNS) of one set's folder: every answer with its item's truth, each
    item's answers numbered in a random order of their own (or in file order)."""
    with open(folder / "truth.csv", newline="", encoding="utf-8") as stream:
        truth = {row["question"]: row["truth"] for row in csv.DictReader(stream)}
    with open(folder / "answer.csv", newline="", encoding="utf-8") as stream:
        answers = list(csv.DictReader(stream))
    by_item = {}
    for row in answers:
        by_item.setdefault(row["question"], []).append(row)
    rng = np.random.default_rng(seed)
    rows = []
    for item, given in by_item.items():
        order = range(len(given)) if file_order else rng.permutation(len(given))
        rows.extend({"item": item, "worker": row["worker"], "answer": row["answer"], "truth": truth.get(item, ""),
                     "order": position + 1} for position, row in zip(order, given, strict=True))
    return rows


def write_sets(datasets, out, *, names=tuple(SETS), seed=41, file_order=False):
    """Write `out/<name>.csv` for each set of `names` found under `datasets`; returns {name: path}."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in names:
        folder = Path(datasets) / SETS[name][0]
        if not (folder / "answer.csv").exists():
            raise SystemExit(f"{folder / 'answer.csv'} is missing: give the repository's datasets/ folder.")
        path = out / f"{name}.csv"
        with open(path, "w", newline="", encoding="utf-8") as stream:
            writer = csv.DictWriter(stream, fieldnames=list(COLUMNS), lineterminator="\n")
            writer.writeheader()
            writer.writerows(replay_rows(folder, seed=seed, file_order=file_order))
        written[name] = path
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", type=Path, help="the datasets/ folder of zhydhkcws/crowd_truth_infer")
    parser.add_argument("out", type=Path, help="where to write <set>.csv")
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument("--seed", type=int, default=41, help="the seed of each item's answer order")
    parser.add_argument("--file-order", action="store_true", help="keep the files' order of answers")
    args = parser.parse_args()
    for name, path in write_sets(args.datasets, args.out, names=args.sets, seed=args.seed,
                                 file_order=args.file_order).items():
        print(f"{SETS[name][1]}: {path}")


if __name__ == "__main__":
    main()
