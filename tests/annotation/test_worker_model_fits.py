"""A worker-model fit is a function of the answers, not of the order the rows arrive in (issue 41):
the job reads them ordered by primary key, a replay in file order, and a researcher who sorts
their file must not get other decisions."""

import numpy as np
import pandas as pd
import pytest

from annotation import worker_models
from annotation.models import Aggregation, WorkerModel

LABEL_MODELS = [value for value in Aggregation.values if value != Aggregation.VOTES]


def spammed_frame(seed=41, tasks=400, workers=30, spammers=8):
    """Three answers per task by distinct workers; a quarter of the workers say "correct" whatever
    the truth, which leaves MACE close calls whose outcome its starting point decides."""
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(tasks), 3)
    worker = np.argsort(rng.random((tasks, workers)), axis=1)[:, :3].ravel()
    truth = rng.random(tasks) < 0.5
    accuracy = rng.uniform(0.55, 0.9, workers)
    said = np.where(rng.random(task.size) < accuracy[worker], truth[task], ~truth[task])
    said = np.where(worker < spammers, True, said)
    return pd.DataFrame({"task": task, "worker": worker,
                         "label": np.where(said, worker_models.CORRECT, worker_models.INCORRECT)})


@pytest.mark.parametrize("model", LABEL_MODELS)
def test_a_fits_labels_do_not_depend_on_the_order_of_its_rows(model):
    frame = spammed_frame()
    first = worker_models.fit_labels(frame, model)
    for reordered in (frame.sample(frac=1, random_state=1), frame.iloc[::-1]):
        again = worker_models.fit_labels(reordered, model)
        pd.testing.assert_series_equal(again.labels.sort_index(), first.labels.sort_index())
        pd.testing.assert_series_equal(again.posteriors.sort_index(), first.posteriors.sort_index())
        pd.testing.assert_series_equal(again.reliability.sort_index(), first.reliability.sort_index())


def test_a_fit_knows_each_tasks_voters_whatever_the_order_of_its_rows():
    """The job decides a reference only when the fit saw exactly its counted answers (`voters_of`)."""
    frame = spammed_frame(tasks=120)
    shuffled = frame.sample(frac=1, random_state=3)
    fit = worker_models.fit_labels(shuffled, Aggregation.DAWID_SKENE)
    expected = {task: frozenset(rows["worker"]) for task, rows in frame.groupby("task")}
    assert {task: fit.voters_of(task) for task in expected} == expected
    assert fit.voters_of(10_000) is None


def test_mace_restarts_once_and_loses_nothing_to_crowd_kits_ten_seeded_restarts():
    from crowdkit.aggregation import MACE

    frame = worker_models.canonical_order(spammed_frame(tasks=150))
    # Fitted as fit_labels fits it: on the codes of the workers and labels (`_mace`).
    labels, label_names = pd.factorize(frame["label"])
    coded = frame.assign(worker=pd.factorize(frame["worker"])[0], label=labels)
    ten = MACE(random_state=worker_models.SEED).fit(coded).probas_.rename(columns=dict(enumerate(label_names)))
    ours = worker_models.fit_labels(frame, Aggregation.MACE)
    pd.testing.assert_series_equal(ours.posteriors, ten.max(axis="columns"))
    pd.testing.assert_series_equal(ours.labels, ten.idxmax(axis="columns"), check_names=False)


@pytest.mark.parametrize("model", LABEL_MODELS)
def test_a_fits_labels_do_not_depend_on_what_the_tasks_and_labels_are_called(model):
    # crowd-kit's MACE kept each worker's strategy in the sorted order of the names and read it in
    # their order of first appearance: renaming one task, or naming the labels so that they sort
    # the other way, changed 163 of these 400 labels.
    frame = spammed_frame()
    first = worker_models.fit_labels(frame, model)
    renamed = frame.assign(task=frame["task"].replace({0: -1}))
    again = worker_models.fit_labels(renamed, model)
    pd.testing.assert_series_equal(again.labels.rename({-1: 0}).sort_index(), first.labels.sort_index())
    for spelled in ({"correct": "b-sound", "incorrect": "a-flawed"}, {"correct": "a-sound", "incorrect": "b-flawed"}):
        named = worker_models.fit_labels(frame.assign(label=frame["label"].map(spelled)), model)
        pd.testing.assert_series_equal(named.labels.map({name: label for label, name in spelled.items()}),
                                       first.labels)


@pytest.mark.parametrize("model", ["bradley_terry", WorkerModel.NOISY_BT])
def test_a_pairwise_fit_does_not_depend_on_the_order_of_its_rows(model):
    rng = np.random.default_rng(15)
    names = np.array([f"model-{index}" for index in range(8)])
    strength = rng.normal(0, 1, names.size)
    left = rng.integers(0, names.size, 2000)
    right = rng.integers(0, names.size - 1, 2000)
    right = np.where(right >= left, right + 1, right)
    chose_left = rng.random(2000) < 1 / (1 + np.exp(strength[right] - strength[left]))
    frame = pd.DataFrame({"worker": rng.integers(0, 40, 2000), "left": names[left], "right": names[right],
                          "label": np.where(chose_left, names[left], names[right])})
    first = worker_models.fit_pairwise(frame, model)
    again = worker_models.fit_pairwise(frame.sample(frac=1, random_state=2), model)
    pd.testing.assert_series_equal(again.scores.sort_index(), first.scores.sort_index())
    pd.testing.assert_series_equal(again.skills.sort_index(), first.skills.sort_index())


def test_noisy_bradley_terry_says_when_its_optimiser_did_not_settle():
    # llava always beat otter and otter always beat blip: no fit is best, and its optimiser stopped
    # with llava and otter at 1.0 alike. Plain Bradley-Terry still ranks them.
    separated = pd.DataFrame([{"worker": worker, "left": left, "right": right, "label": left}
                              for worker in range(3) for _ in range(4)
                              for left, right in (("llava", "otter"), ("otter", "blip"))])
    assert worker_models.fit_pairwise(separated, WorkerModel.NOISY_BT).unsettled
    plain = worker_models.fit_pairwise(separated, "bradley_terry")
    assert not plain.unsettled and list(plain.scores.index) == ["llava", "otter", "blip"]
    # Twelve judgements, llava never beaten: it stopped with otter at 0.9999 and instructblip, which
    # beat otter three times in four, at 0.0003.
    few = pd.DataFrame([{"worker": worker, "left": left, "right": right, "label": label}
                        for worker, left, right, label, times in (
                            (0, "llava", "instructblip", "llava", 2), (1, "llava", "instructblip", "llava", 2),
                            (2, "llava", "otter", "llava", 2), (0, "llava", "otter", "llava", 2),
                            (1, "instructblip", "otter", "instructblip", 3), (2, "otter", "instructblip", "otter", 1))
                        for _ in range(times)])
    assert worker_models.fit_pairwise(few, WorkerModel.NOISY_BT).unsettled
    crossed = pd.concat([separated, pd.DataFrame([
        {"worker": 0, "left": "otter", "right": "llava", "label": "otter"},
        {"worker": 1, "left": "blip", "right": "otter", "label": "blip"}])], ignore_index=True)
    fit = worker_models.fit_pairwise(crossed, WorkerModel.NOISY_BT)
    assert not fit.unsettled and list(fit.scores.index) == ["llava", "otter", "blip"]
