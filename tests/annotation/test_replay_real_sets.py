"""The public real crowd sets of Zheng et al. 2017 as replay files (benchmarks/crowd_truth_sets.py):
the project keeps none of their data (it carries no licence), so these run on a generated set laid
out as their repository lays one out, with four labels, whose answers run worker by worker as
Duck Identification's do."""

import csv

import numpy as np
import pytest

from annotation import replay, replay_input
from annotation.crowdwork.stopping import WorkerAware
from benchmarks.crowd_truth_sets import SETS, replay_rows, write_sets

ITEMS, WORKERS, PER_ITEM, LABELS = 60, 12, 6, ("0", "1", "2", "3")


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """A `datasets/` folder holding a generated four-label set under Dog's folder name: workers
    right with accuracies from 0.35 to 0.95, wrong answers spread over the other labels, the
    answers written worker by worker."""
    root = tmp_path_factory.mktemp("datasets")
    folder = root / SETS["dog"][0]
    folder.mkdir()
    rng = np.random.default_rng(7)
    truth = {f"q{item}": str(rng.integers(4)) for item in range(ITEMS)}
    skill = np.linspace(0.35, 0.95, WORKERS)
    answered = {item: rng.choice(WORKERS, PER_ITEM, replace=False) for item in truth}
    with open(folder / "answer.csv", "w", newline="") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(["question", "worker", "answer"])
        for worker in range(WORKERS):
            for item, said in truth.items():
                if worker in answered[item]:
                    wrong = [label for label in LABELS if label != said]
                    writer.writerow([item, f"w{worker}", said if rng.random() < skill[worker] else rng.choice(wrong)])
    with open(folder / "truth.csv", "w", newline="") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(["question", "truth"])
        writer.writerows(truth.items())
    return root


def test_every_answer_keeps_its_items_truth_and_each_item_gets_an_order_of_its_own(datasets):
    rows = replay_rows(datasets / SETS["dog"][0])
    assert len(rows) == ITEMS * PER_ITEM
    orders, firsts = {}, set()
    for row in rows:
        orders.setdefault(row["item"], []).append(row["order"])
        if row["order"] == 1:
            firsts.add(row["worker"])
    assert all(sorted(order) == list(range(1, PER_ITEM + 1)) for order in orders.values())
    # In file order the lowest-numbered worker of each item comes first; drawn, many workers do.
    in_file_order = {row["worker"] for row in replay_rows(datasets / SETS["dog"][0], file_order=True)
                     if row["order"] == 1}
    assert len(firsts) > len(in_file_order)
    assert replay_rows(datasets / SETS["dog"][0]) == rows
    assert replay_rows(datasets / SETS["dog"][0], seed=42) != rows


def test_a_four_label_set_replays_weighed_over_its_four_labels_with_the_truth_of_other_items(datasets, tmp_path):
    path = write_sets(datasets, tmp_path, names=("dog",))["dog"]
    with open(path, "rb") as stream:
        answers = replay_input.read_answers(stream)
    assert len(answers.truth) == ITEMS and answers.ordered_by == "the order column"

    result = replay.replay(answers, chosen=replay.rules(fixed=(), until_decided=(), worker_aware=(0.7, 0.95)))
    cheap, dear = (next(row for row in result.rows if row.rule == f"weighed {p}, up to 5") for p in ("0.7", "0.95"))
    assert cheap.answers < dear.answers <= ITEMS * 5
    # One-coin over four labels: one answer of a worker right a of the time is worth a posterior
    # of a, so at 0.7 an item stops at its first answer exactly when that worker is weighed 0.7 or
    # more.
    weights, _ = replay.accuracies(answers)
    weights = weights.map(lambda accuracy: accuracy.value)
    first = answers.frame.groupby("task", sort=False).head(1).index
    rule = replay.Rule("weighed 0.7", WorkerAware(0.7, replay.PRIOR_ACCURACY, labels=LABELS), 5)
    bought, _ = replay.buy(answers, rule, weights)
    assert len(bought) == cheap.answers
    per_item = bought.groupby("task", sort=False).size()
    assert ((per_item[answers.frame.loc[first, "task"]] == 1).to_numpy() == (weights[first] >= 0.7).to_numpy()).all()
    assert 0 < (weights[first] >= 0.7).sum() < ITEMS
