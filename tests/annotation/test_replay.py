"""Replaying a past campaign (annotation/replay.py, `manage.py replay_answers`): each rule buys what
the project's stopping code would buy, taken in the file's order, and is scored against the truth
and against the worker model fitted on every answer; on a seeded simulated crowd and on a real
published annotation set (tests/crowd_data/README.md)."""

import csv
import io
import subprocess
import sys
from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from annotation import replay, replay_input, worker_models
from annotation.crowdwork import review
from annotation.crowdwork.stopping import WorkerAware
from annotation.models import Stage
from annotation.workforce.accuracy import shrunk
from tests.annotation.collection.test_worker_models import answer, candidates
from tests.crowd_simulation import in_order, simulated_crowd, write_csv
from tests.factories import FamilyFactory, WorkerFactory, launch
from tests.paths import PROJECT

REAL_SET = PROJECT / "tests" / "crowd_data" / "rzhetsky2009_e2_sample.csv"
pytestmark = pytest.mark.slow  # minutes of replays in all: handed out first


ITEMS = 150


@pytest.fixture(scope="module")
def crowd():
    return simulated_crowd(items=ITEMS)


def as_csv(rows):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return io.BytesIO(buffer.getvalue().encode())


def replayed(rows, **options):
    return replay.replay(replay_input.read_answers(as_csv(rows)), **options)


def row_named(result, name):
    return next(row for row in result.rows if row.rule == name)


def until(agree, most, answers):
    """How many answers ask until decided buys, counted directly: until one answer has `agree`
    votes, or `most` are in."""
    for count in range(1, len(answers) + 1):
        if Counter(answers[:count]).most_common(1)[0][1] >= agree or count == most:
            return count
    return len(answers)


def test_each_fixed_overlap_buys_its_overlap_of_every_item_and_runs_out_past_what_the_file_holds(crowd):
    result = replayed(crowd, chosen=replay.rules(fixed=(1, 3, 5, 7), until_decided=()))
    for overlap in (1, 3, 5):
        row = row_named(result, f"fixed overlap {overlap}")
        assert (row.answers, row.ran_out) == (ITEMS * overlap, 0)
    seven = row_named(result, "fixed overlap 7")
    assert (seven.answers, seven.ran_out) == (ITEMS * 5, ITEMS)


def test_ask_until_decided_stops_where_the_queue_would_in_the_order_column(crowd):
    result = replayed(crowd)
    answers = in_order(crowd)
    for agree, most in ((2, 3), (3, 5)):
        row = row_named(result, f"{agree} agreeing of up to {most}")
        assert row.answers == sum(until(agree, most, said) for said in answers.values())
        assert row.ran_out == 0
    assert row_named(result, "2 agreeing of up to 3").answers < ITEMS * 3


def test_accuracy_is_of_the_answers_bought_in_order_against_the_truth(crowd):
    first = {item: said[0] for item, said in in_order(crowd).items()}
    truth = {row["item"]: row["truth"] for row in crowd}
    expected = sum(first[item] == truth[item] for item in first) / len(first)

    votes = row_named(replayed(crowd, chosen=replay.rules(fixed=(1,), until_decided=())),
                      "fixed overlap 1").decided["votes"]

    assert votes.accuracy == pytest.approx(expected)


def test_the_file_order_does_not_matter_when_an_order_column_is_given(crowd):
    again = replayed(list(reversed(crowd)))
    assert again.rows == replayed(crowd).rows


def test_agreement_is_with_the_worker_model_fitted_on_every_answer(crowd):
    result = replayed(crowd, model="mace", chosen=[])
    everything = result.rows[0]
    assert everything.rule == "all answers" and everything.decided["mace"].agreement == 1.0
    frame = replay_input.read_answers(as_csv(crowd)).frame
    fitted = worker_models.fit_labels(frame, "mace").labels
    truth = {row["item"]: row["truth"] for row in crowd}
    assert everything.decided["mace"].accuracy == pytest.approx(
        sum(fitted[item] == said for item, said in truth.items()) / len(truth))


def test_with_a_quarter_of_spammers_the_worker_model_on_all_answers_beats_their_votes(crowd):
    everything = replayed(crowd, chosen=[]).rows[0].decided
    assert everything["dawid_skene"].accuracy > everything["votes"].accuracy


def test_the_command_prints_each_rule_with_answers_bought_accuracy_and_agreement(crowd, tmp_path):
    out = io.StringIO()
    call_command("replay_answers", str(write_csv(tmp_path / "campaign.csv", crowd)), "--fixed", "1", "3",
                 "--until-decided", "2:3", stdout=out)
    text = out.getvalue()
    assert f"Replayed {ITEMS * 5:,} answers by 20 workers on {ITEMS} items, each item's answers in the order " \
           f"column; truth given for {ITEMS} items." in text
    lines = {line.split("  ")[0]: line for line in text.splitlines()}
    assert set(lines) >= {"all answers", "fixed overlap 1", "fixed overlap 3", "2 agreeing of up to 3"}
    bought = sum(until(2, 3, said) for said in in_order(crowd).values())
    assert f"{bought:,}" in lines["2 agreeing of up to 3"]
    assert "votes: accuracy" in text and "Dawid-Skene: accuracy" in text


def test_the_command_replays_without_any_weighed_rule(crowd, tmp_path):
    # `--weighed` and `--by-truth` with no threshold: no rule needs a worker's accuracy.
    out = io.StringIO()
    call_command("replay_answers", str(write_csv(tmp_path / "campaign.csv", crowd)), "--fixed", "1", "3",
                 "--until-decided", "--weighed", "--by-truth", stdout=out)
    rules = [line.split("  ")[0] for line in out.getvalue().splitlines()]
    assert "fixed overlap 3" in rules and not [rule for rule in rules if rule.startswith(("weighed", "by truth"))]
    assert "Weighed rules weigh" not in out.getvalue()


def cells(text, rule):
    """The figures the command printed on `rule`'s line."""
    line = next(line for line in text.splitlines() if line.startswith(rule + "  "))
    return line[len(rule):].split()


def test_a_real_published_annotation_set_replays_without_truth():
    out = io.StringIO()
    call_command("replay_answers", str(REAL_SET), stdout=out)
    text = out.getvalue()
    with open(REAL_SET, newline="") as source:
        rows = list(csv.DictReader(source))
    items = {}
    for row in rows:
        items.setdefault(row["item"], []).append(row["answer"])

    assert f"Replayed {len(rows):,} answers by 8 workers on {len(items):,} items, each item's answers in file " \
           "order; no truth given, so no accuracy." in text
    bought = sum(until(2, 3, said) for said in items.values())
    assert cells(text, "2 agreeing of up to 3")[0] == f"{bought:,}"
    # Three answers an item: a fixed overlap of 3 is every answer, and one of 5 runs out on every item.
    assert cells(text, "fixed overlap 3")[4:] == cells(text, "all answers")[4:]
    assert cells(text, "fixed overlap 5")[3] == f"{len(items):,}"


BAD_FILES = [
    (b"", "The file is empty"),
    (b"item,worker\nq1,w1\n", "Row 1 (the header) has no column “answer”"),
    (b"item,worker,answer,worker\nq1,w1,yes,w2\n", "Row 1 (the header) names the column “worker” twice"),
    (b"item,worker,answer\n", "The file has a header but no answers"),
    (b"item,worker,answer\nq1,w1,yes\nq1,,no\n", "Row 3, column “worker”: empty"),
    (b"item,worker,answer\nq1,w1,yes\nq2,w1\n", "Row 3 has 2 cells where the header names 3 columns"),
    (b"item,worker,answer,order\nq1,w1,yes,1\nq1,w2,no,second\n",
     "Row 3, column “order”: “second” is not a number"),
    (b"item,worker,answer,truth\nq1,w1,yes,yes\nq2,w1,no,no\nq1,w2,no,no\n",
     "Row 4, column “truth”: “no”, where row 2 gives item “q1” the truth “yes”"),
    (b"item,worker,answer\nq1,w1,yes\nq1,w1,no\n",
     "Row 3, columns “item” and “worker”: worker “w1” already answered item “q1” in row 2"),
    (b"item,worker,answer\nq1,w1,yes\nq1,w2,\xff\xfe\n", "Row 3: the file is not UTF-8 text"),
    (b"item,worker,answer\nq1,w1,yes\nq1,w2,n\x00o\n", "Row 3, column “answer”: a control character"),
    # Rows are records, as a spreadsheet numbers them, whatever line breaks quoted cells hold.
    (b'item,worker,answer,note\na,w1,yes,"line1\nline2\nline3"\nb,w1,no,x\na,w1,no,y\n',
     "Row 4, columns “item” and “worker”: worker “w1” already answered item “a” in row 2"),
    (b'item,worker,answer\r"a\rb",w1,yes\rc,w2,yes\rc,w2,no\r', "Row 2, column “item”: a line break is in the cell"),
    (b"item,worker,answer\rc,w1,yes\rc,w2,caf\xe9\r", "Row 3: the file is not UTF-8 text"),
    (b"item,worker,answer\ni1,w1,yes\n\xe9i2,w2,no\n", "Row 3: the file is not UTF-8 text"),
    (b'item,worker,answer,note\ni1,w1,yes,"a\nb"\ni2,w2,n\xe9\n', "Row 3: the file is not UTF-8 text"),
    # A quote left open swallows the rows after it: the row it opened in is the one to look at.
    (b"item,worker,answer,truth\n" + b"".join(b"i%d,w%d,yes,yes\n" % (n, n % 7) for n in range(4))
     + b'i9,w3,"yes,yes\n' + b"".join(b"i%d,w%d,no,no\n" % (n, n % 7) for n in range(10, 200)),
     "Row 6 has 3 cells where the header names 4 columns; a quote opened in this row may not be closed"),
    (b"item,worker,answer\nq1,w1,yes\nq2,w2,\"" + b"no\n" * 50_000,
     "Row 3: a cell is longer than 131,072 characters; a quote opened in this row may not be closed"),
]


@pytest.mark.parametrize(("content", "message"), BAD_FILES, ids=[message[:30] for _, message in BAD_FILES])
def test_a_bad_file_is_refused_naming_the_row_and_the_column(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(CommandError) as refused:
        call_command("replay_answers", str(path))
    assert message in str(refused.value)


def test_a_malformed_option_is_a_usage_error_without_a_traceback(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"item,worker,answer\nq1,w1,yes\n")
    done = subprocess.run([sys.executable, "manage.py", "replay_answers", str(path), "--until-decided", "a:b"],
                          cwd=PROJECT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--until-decided takes AGREE:MOST, e.g. 2:3; “a:b” is not that." in done.stderr


def test_manage_py_says_what_is_wrong_with_a_file_without_a_traceback(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"item,worker,answer\nq1,w1,yes\nq1,,no\n")
    done = subprocess.run([sys.executable, "manage.py", "replay_answers", str(path)], cwd=PROJECT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "Row 3, column “worker”: empty" in done.stderr


@pytest.mark.django_db
def test_a_familys_last_campaign_replays_from_its_counted_verification_answers():
    family = FamilyFactory(name="Last campaign")
    launch(family, Stage.VERIFICATION, overlap=3, verification_rule="majority")
    workers = WorkerFactory.create_batch(4)
    said = {0: (True, True, False), 1: (False, True, True), 2: (True, True, True)}
    units = candidates(family, 3)
    for unit, votes in zip(units, said.values(), strict=True):
        for worker, vote in zip(workers, votes, strict=False):
            lease = answer(unit, worker, vote)
    review.reject_work(assignments=[lease], reason="Answered without opening the image.")
    launch(FamilyFactory(), Stage.VERIFICATION, overlap=1)

    out = io.StringIO()
    call_command("replay_answers", "--family", "Last campaign", "--fixed", "1", "--until-decided", "2:3",
                 stdout=out)
    text = out.getvalue()

    # The rejected third answer of the last reference does not count: eight answers are replayed,
    # each reference's in the order they were submitted.
    assert "Replayed 8 answers by 3 workers on 3 items, each item's answers in the order they were submitted in; " \
           "no truth given, so no accuracy." in text
    # Two agreeing of up to three: the first two agree on references 1 and 3 (2 + 2), not on 2 (3).
    assert cells(text, "2 agreeing of up to 3")[:2] == ["7", "2.33"]
    with pytest.raises(CommandError, match="No instruction family is named “Nobody”"):
        call_command("replay_answers", "--family", "Nobody")


# --- weighed by worker accuracy, and the curve of accuracy against answers bought ----------------


def test_a_workers_weight_on_an_item_never_rests_on_that_items_own_truth(crowd):
    answers = replay_input.read_answers(as_csv(crowd))
    flipped = [{**row, "truth": "incorrect" if row["truth"] == "correct" else "correct"}
               if row["item"] == "item-0" else row for row in crowd]
    before, _ = replay.accuracies(answers)
    after, _ = replay.accuracies(replay_input.read_answers(as_csv(flipped)))
    frame = answers.frame
    on_item = frame["task"] == "item-0"
    assert after[on_item].tolist() == before[on_item].tolist()
    elsewhere = frame["worker"].isin(frame.loc[on_item, "worker"]) & ~on_item
    assert (after[elsewhere] != before[elsewhere]).all()


def test_a_weighed_rule_stops_once_the_weighed_posterior_passes_its_threshold_or_at_its_most(crowd):
    answers = replay_input.read_answers(as_csv(crowd))
    weights, _ = replay.accuracies(answers)
    result = replay.replay(answers, chosen=replay.rules(fixed=(), until_decided=(), worker_aware=(0.9,), most=4))
    rule = WorkerAware(0.9, replay.PRIOR_ACCURACY, labels=("correct", "incorrect"))
    expected = 0
    for _, said in answers.frame.groupby("task", sort=False)["label"]:
        pairs = list(zip(said, weights[said.index], strict=True))
        expected += next(count for count in range(1, len(pairs) + 1)
                         if rule.decision(pairs[:count]) is not None or count == 4)
    assert row_named(result, "weighed 0.9, up to 4").answers == expected


def test_with_a_truth_the_command_prints_each_kinds_curve_and_whether_issue_41s_goals_are_met(crowd, tmp_path):
    out = io.StringIO()
    call_command("replay_answers", str(write_csv(tmp_path / "campaign.csv", crowd)), "--fixed", "1", "3", "5",
                 "--until-decided", "2:3", "--weighed", "0.8", "0.95", "--by-truth", "0.9", "--matching", "0",
                 stdout=out)
    text = out.getvalue()
    result = replayed(crowd, chosen=replay.rules(fixed=(1, 3, 5), until_decided=((2, 3),), worker_aware=(0.8, 0.95),
                                                 by_truth=(0.9,)))
    lines = text.splitlines()
    for title, names in (("weighed by accuracy:", ("weighed 0.8, up to 5", "weighed 0.95, up to 5")),
                         ("weighed by accuracy on each truth:", ("by truth 0.9, up to 5",))):
        curve = next(line for line in lines if line.strip().startswith(title))
        for name in names:
            row = row_named(result, name)
            assert f"{row.per_item:.2f} → {row.decided['votes'].accuracy:.3f}" in curve
    assert "from the truth of the worker's other items" in text
    # Each kind of weighed rule is held to both goals.
    assert lines.count("Weighed by accuracy:") == lines.count("Weighed by accuracy on each truth:") == 1
    goals = [line for line in lines if line.startswith("Goal ")]
    assert len(goals) == 4 and all(": met, " in line or ": not met, " in line for line in goals)
    assert "by truth 0.9, up to 5" in goals[2] + goals[3] and "by truth" not in goals[0] + goals[1]


def test_each_kind_of_weighed_rule_is_replayed_at_the_highest_threshold_that_spends_what_a_fixed_three_does(
        crowd, tmp_path):
    """What a researcher sets to spend what they spend now: no threshold to 0.001 above it buys as
    little, whichever thresholds were asked for."""
    result = replayed(crowd, chosen=replay.rules(fixed=(3,), until_decided=(), worker_aware=(0.8,), by_truth=(0.9,)),
                      matching=3)
    budget = row_named(result, "fixed overlap 3").answers
    answers = replay_input.read_answers(as_csv(crowd))
    weights, _ = replay.accuracies(answers)
    assert [kind for kind, _ in result.matched] == [replay.WEIGHED, replay.BY_TRUTH]
    for _, name in result.matched:
        row = row_named(result, name)
        assert row.answers <= budget
        threshold = float(name.split(",")[0].split()[-1])
        if threshold >= 0.999:
            continue
        kind = replay.BY_TRUTH if name.startswith(replay.BY_TRUTH) else replay.WEIGHED
        above = replay.rules(fixed=(), until_decided=(), worker_aware=(threshold + 0.001,) * (kind == replay.WEIGHED),
                             by_truth=(threshold + 0.001,) * (kind == replay.BY_TRUTH))
        bought_above = row_named(replayed(crowd, chosen=above), above[0].name).answers
        assert bought_above > budget, name

    out = io.StringIO()
    call_command("replay_answers", str(write_csv(tmp_path / "campaign.csv", crowd)), "--fixed", "3", "5",
                 "--until-decided", "--weighed", "0.8", "--by-truth", stdout=out)
    assert f"{result.matched[0][1]}: the highest thresholds, to 0.001, that buy no more than fixed overlap 3" \
        in out.getvalue()
    out = io.StringIO()
    call_command("replay_answers", str(write_csv(tmp_path / "campaign.csv", crowd)), "--fixed", "1",
                 "--until-decided", "--weighed", "0.8", "--by-truth", "--matching", "1", stdout=out)
    assert "No weighed rule buys as little as fixed overlap 1, even at a threshold of 0.501." in out.getvalue()

    with pytest.raises(CommandError, match="needs fixed overlap 4"):
        call_command("replay_answers", str(write_csv(tmp_path / "campaign.csv", crowd)), "--fixed", "3",
                     "--matching", "4", stdout=io.StringIO())


def test_a_matched_threshold_that_ran_out_of_answers_says_a_live_campaign_would_buy_more():
    # The published sample holds three answers a sentence: every threshold buys no more than a fixed three.
    out = io.StringIO()
    call_command("replay_answers", str(REAL_SET), "--fixed", "3", "--until-decided", "--weighed", "0.8",
                 "--by-truth", stdout=out)
    assert "weighed 0.999, up to 5 ran out on " in out.getvalue()
    assert "a live campaign at that threshold would buy more than the replay could" in out.getvalue()


def test_a_share_of_gold_weighs_by_that_share_and_none_by_dawid_skene_fitted_on_every_answer(crowd):
    answers = replay_input.read_answers(as_csv(crowd))
    _, said = replay.accuracies(answers, gold_share=0.1)
    assert said.startswith(f"the truth of the worker's other items ({ITEMS // 10} of them, 10%, taken as gold) "
                           f"where they have {replay.ENOUGH} or more, else Dawid-Skene fitted on every answer")
    weights, said = replay.accuracies(answers, gold_share=0)
    assert said.startswith("Dawid-Skene fitted on every answer")
    fit = worker_models.fit_labels(answers.frame, "dawid_skene")
    worker = answers.frame["worker"].iloc[0]
    reliability, count = fit.reliability[worker], fit.answers[worker]
    assert weights.iloc[0].value == pytest.approx(shrunk(reliability * count, count, replay.PRIOR_ACCURACY))
    correct = fit.by_truth.loc[worker, "correct"]
    assert weights.iloc[0].on("correct") == pytest.approx(
        shrunk(correct * count * fit.shares["correct"], count * fit.shares["correct"], weights.iloc[0].value))


def test_a_worker_with_too_little_gold_is_weighed_by_the_worker_model_as_the_stage_weighs_them(crowd):
    # The stage's order of evidence (accuracy_from): gold where a worker has enough, else the worker
    # model, else the prior. A thin share of gold leaves most workers to the worker model, not the prior.
    answers = replay_input.read_answers(as_csv(crowd))
    frame = answers.frame
    gold = replay.gold_of(answers, 0.05)
    weights, _ = replay.accuracies(answers, gold_share=0.05)
    fit = worker_models.fit_labels(frame, "dawid_skene")
    checked = frame["task"].isin(gold.index)
    # Gold checked elsewhere: the worker's answers on gold items, less this answer's own item.
    elsewhere = checked.groupby(frame["worker"]).transform("sum") - checked
    sources = Counter()
    for row, accuracy in enumerate(weights):
        worker = frame["worker"].iloc[row]
        if elsewhere.iloc[row] >= replay.ENOUGH:
            assert accuracy.source == "gold"
        else:
            count = fit.answers[worker]
            assert accuracy.source == "worker model"
            assert accuracy.value == pytest.approx(
                shrunk(fit.reliability[worker] * count, count, replay.PRIOR_ACCURACY))
        sources[accuracy.source] += 1
    assert sources["worker model"] > sources["gold"] > 0
