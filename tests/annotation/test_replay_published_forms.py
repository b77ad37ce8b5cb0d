"""A replay reads crowd data in the forms it is published in: the columns under the names public sets
give them (Zheng et al.'s question,worker,answer; crowd-kit's worker,task,label), the truth from a
file of its own (`--truth`), and, for a file that records no order, each item's answers in a seeded
random order of their own (`--shuffle`); each read exactly as the replay's own form reads."""

import csv
import io

import pytest
from django.core.management import CommandError, call_command

from annotation import replay_input
from tests.crowd_simulation import simulated_crowd

ITEMS = 60


@pytest.fixture(scope="module")
def crowd():
    return simulated_crowd(items=ITEMS, per_item=5)


def write(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def replayed(*args, **options):
    out = io.StringIO()
    call_command("replay_answers", *args, stdout=out, **options)
    return out.getvalue()


def in_file_order(crowd):
    """The crowd's answers as a file lists them without an order column: item by item, each item's
    answers in the order they came."""
    return sorted(crowd, key=lambda row: (int(row["item"].split("-")[1]), row["order"]))


def test_a_set_published_as_answers_and_truth_apart_replays_as_the_replays_own_form(crowd, tmp_path):
    rows = in_file_order(crowd)
    own = write(tmp_path / "own.csv", ["item", "worker", "answer", "truth"],
                [(row["item"], row["worker"], row["answer"], row["truth"]) for row in rows])
    # Zheng et al.'s layout: answer.csv and truth.csv, each item's truth once.
    answers = write(tmp_path / "answer.csv", ["question", "worker", "answer"],
                    [(row["item"], row["worker"], row["answer"]) for row in rows])
    truth = write(tmp_path / "truth.csv", ["question", "truth"],
                  sorted({(row["item"], row["truth"]) for row in rows}))
    rules = ["--fixed", "1", "3", "5", "--weighed", "0.9", "--by-truth", "--matching", "0"]
    expected = replayed(own, *rules)

    published = replayed(answers, "--truth", truth, *rules)
    assert published.splitlines()[0] == "Read column “question” as item."
    assert published.splitlines()[1:] == expected.splitlines()
    assert f"truth given for {ITEMS} items." in published


def test_crowd_kits_names_and_a_truth_file_calling_its_truth_label_are_read_too(crowd, tmp_path):
    rows = in_file_order(crowd)
    own = write(tmp_path / "own.csv", ["item", "worker", "answer", "truth"],
                [(row["item"], row["worker"], row["answer"], row["truth"]) for row in rows])
    labels = write(tmp_path / "crowd_labels.csv", ["Worker ID", "task", "label"],
                   [(row["worker"], row["item"], row["answer"]) for row in rows])
    gt = write(tmp_path / "gt.csv", ["task", "label"], sorted({(row["item"], row["truth"]) for row in rows}))

    published = replayed(labels, "--truth", gt, "--fixed", "1", "3", "--weighed", "--by-truth")
    assert published.splitlines()[0] == "Read column “task” as item, column “Worker ID” as worker, column " \
                                         "“label” as answer."
    assert published.splitlines()[1:] == replayed(own, "--fixed", "1", "3", "--weighed", "--by-truth").splitlines()


def test_shuffled_each_items_answers_come_in_a_seeded_order_of_their_own(crowd, tmp_path):
    # Listed worker by worker, as Duck Identification is: in file order one worker comes first on
    # every item they answered.
    rows = sorted(crowd, key=lambda row: (row["worker"], row["item"]))
    path = write(tmp_path / "by_worker.csv", ["item", "worker", "answer"],
                 [(row["item"], row["worker"], row["answer"]) for row in rows])
    with open(path, "rb") as stream:
        answers = replay_input.read_answers(stream)
    once, again = (replay_input.in_random_order(answers, 41) for _ in range(2))
    other = replay_input.in_random_order(answers, 42)

    assert once.frame.equals(again.frame)
    assert not once.frame.equals(other.frame)
    assert once.ordered_by == "a random order of their own (seed 41)"
    key = ["task", "worker", "label"]
    assert sorted(map(tuple, once.frame[key].to_numpy())) == sorted(map(tuple, answers.frame[key].to_numpy()))
    # Items keep the order they first appear in; only each one's answers move.
    assert list(once.frame["task"].drop_duplicates()) == list(answers.frame["task"].drop_duplicates())
    firsts = once.frame.groupby("task", sort=False)["worker"].first()
    file_firsts = answers.frame.groupby("task", sort=False)["worker"].first()
    assert (firsts != file_firsts).any()
    assert "each item's answers in a random order of their own (seed 41)" in replayed(
        path, "--shuffle", "41", "--fixed", "1", "--until-decided", "--weighed", "--by-truth", "--matching", "0")


BAD_PAIRS = [
    (b"question,worker,answer\nq1,w1,yes\n", b"question,truth\nq1,yes\nq1,no\n",
     "truth.csv: Row 3, column “truth”: “no”, where row 2 gives item “q1” the truth “yes”"),
    (b"item,worker,answer,truth\nq1,w1,yes,yes\n", b"item,truth\nq1,no\n",
     "truth.csv: Row 2, column “truth”: “no”, where the answers file gives item “q1” the truth “yes”"),
    (b"item,worker,answer\nq1,w1,yes\n", b"id,truth\n7,yes\n", "truth.csv: Row 1 (the header) has no column “item”"),
    (b"item,worker,answer\nq1,w1,yes\n", b"item,truth\nQ1,yes\n",
     "truth.csv: The truth file names none of the answers' 1 items (its first: “Q1”; the answers' first: “q1”)"),
    (b"item,worker,answer\nq1,w1,yes\n", b"item,truth\n,yes\n",
     "truth.csv: Row 2, column “item”: empty; every truth needs its item."),
    (b"item,worker,answer\nq1,w1,yes\n", b"item,truth,label\nq1,yes,yes\n",
     "truth.csv: Row 1 (the header) names the truth twice: “truth” and “label”"),
    (b"task,question,worker,answer\nq1,q1,w1,yes\n", b"item,truth\nq1,yes\n",
     "answer.csv: Row 1 (the header) names the item twice: “task” and “question”"),
    (b"item,worker,answer,order\nq1,w1,yes,1\n", None,
     "answer.csv: The file gives the order of its answers (its order column); a random order would replace it"),
]


@pytest.mark.parametrize(("answers", "truth", "message"), BAD_PAIRS, ids=[message[:40] for *_, message in BAD_PAIRS])
def test_a_truth_file_or_a_header_the_replay_cannot_read_is_refused_naming_the_file_row_and_column(
        tmp_path, answers, truth, message):
    (tmp_path / "answer.csv").write_bytes(answers)
    options = ["--shuffle", "1"] if truth is None else ["--truth", str(tmp_path / "truth.csv")]
    if truth is not None:
        (tmp_path / "truth.csv").write_bytes(truth)
    with pytest.raises(CommandError) as refused:
        call_command("replay_answers", str(tmp_path / "answer.csv"), *options)
    assert message in str(refused.value)


def test_a_familys_campaign_takes_no_truth_file_nor_shuffle():
    with pytest.raises(CommandError, match="--truth and --shuffle read a file's answers"):
        call_command("replay_answers", "--family", "Anything", "--shuffle", "3")
