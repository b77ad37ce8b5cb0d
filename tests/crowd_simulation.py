"""A seeded simulated crowd with known truth, written as a replay file (annotation/replay.py): good
workers right with an accuracy of their own, spammers answering "correct" whatever they see; each
item answered by distinct workers in an order the `order` column gives, the rows shuffled so that
file order is not it."""

import csv

import numpy as np

COLUMNS = ("item", "worker", "answer", "truth", "order")


def simulated_crowd(*, items=300, workers=20, per_item=5, spammer_share=0.25, seed=41,
                    accuracy=(0.6, 0.95)):
    """Rows (dicts of COLUMNS) of `items` items, each answered by `per_item` distinct workers."""
    rng = np.random.default_rng(seed)
    skill = rng.uniform(*accuracy, workers)
    spammer = np.arange(workers) < round(workers * spammer_share)
    truth = rng.random(items) < 0.5
    rows = []
    for item in range(items):
        for position, worker in enumerate(rng.choice(workers, per_item, replace=False)):
            right = rng.random() < skill[worker]
            said = True if spammer[worker] else (truth[item] if right else not truth[item])
            rows.append({"item": f"item-{item}", "worker": f"worker-{worker}", "answer": _word(said),
                         "truth": _word(truth[item]), "order": position + 1})
    return [rows[index] for index in rng.permutation(len(rows))]


def _word(correct):
    return "correct" if correct else "incorrect"


def write_csv(path, rows, columns=COLUMNS):
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def in_order(rows):
    """Each item's answers as the `order` column orders them."""
    answers = {}
    for row in sorted(rows, key=lambda row: row["order"]):
        answers.setdefault(row["item"], []).append(row["answer"])
    return answers
