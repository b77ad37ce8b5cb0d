"""Worker models (DESIGN: "worker model"): our counted answers become crowd-kit's frames, and its
fitted models become our rows.

crowd-kit does the estimating (Dawid-Skene, GLAD and MACE on `task, worker, label`; Bradley-Terry
and noisy Bradley-Terry on `worker, left, right, label`); this module only shapes the data both
ways. Only counted work enters a fit (`counted_work`, as every other aggregate reads it): a
rejected answer, or a provisional one where its stage counts only accepted answers, is not in the
frame. Fitting reads every counted answer of a stage, which takes seconds at 100,000 answers, so
it runs in the worker-model job (tasks/pipeline.py), never in a request.
"""

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
from django.db import transaction
from django.utils import timezone

from annotation.models import (
    Aggregation,
    HumanJudgement,
    LabelShare,
    Reference,
    Side,
    Stage,
    Verification,
    WorkerModel,
    WorkerReliability,
    counted_verifications,
)

CORRECT, INCORRECT = "correct", "incorrect"
LABEL_COLUMNS = ["task", "worker", "label"]
PAIRWISE_COLUMNS = ["worker", "left", "right", "label"]
# crowd-kit's defaults but MACE's restarts (fit_labels says why), named here so the benchmark
# times what the job runs.
N_ITER = 100
SEED = 0
MACE_RESTARTS = 1


@dataclass(frozen=True)
class LabelFit:
    """A fitted label model: per task its most likely label and that label's posterior
    probability; per worker the model's reliability and how many answers it rests on."""

    model: str
    labels: pd.Series
    posteriors: pd.Series
    reliability: pd.Series
    answers: pd.Series
    # Per task, the workers whose answers the fit saw.
    voters: pd.Series = field(default_factory=lambda: pd.Series(dtype=object))
    # Dawid-Skene only: per worker (rows) how often right on items whose truth is each label
    # (columns), and how common each label is (its class priors).
    by_truth: pd.DataFrame = field(default_factory=pd.DataFrame)
    shares: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))

    def label_of(self, task):
        """(label, posterior) for one task, or None when the fit never saw it."""
        found = self._by_task.get(task)
        return None if found is None else (found[0], float(found[1]))

    def answers_of(self, worker):
        """How many of `worker`'s answers the fit saw."""
        return self._answers.get(worker, 0)

    def voters_of(self, task):
        """The workers whose answers to `task` the fit saw, or None when it never saw the task."""
        return self._voters.get(task)

    # A job asks these of tens of thousands of references; a pandas lookup costs tens of microseconds.
    @cached_property
    def _by_task(self):
        return dict(zip(self.labels.index, zip(self.labels.to_numpy(),
                                               self.posteriors.reindex(self.labels.index).to_numpy(), strict=True),
                        strict=True))

    @cached_property
    def _answers(self):
        return self.answers.to_dict()

    @cached_property
    def _voters(self):
        return self.voters.to_dict()


def verification_frame(family=None):
    """Every counted verification answer (of `family` alone, when given) as crowd-kit's frame, in
    the order they were submitted: task (the reference's id), worker (the worker's id), label
    ("correct" or "incorrect"). A family whose verification stage counts only accepted answers
    leaves its provisional ones out; withdrawn references (their caption was rejected) are left out
    with their answers."""
    rows = Verification.objects.filter(counted_verifications()).exclude(reference__verdict=Reference.Verdict.WITHDRAWN)
    if family is not None:
        rows = rows.filter(reference__instance__family=family)
    rows = rows.order_by("pk").values_list("reference_id", "worker_id", "is_correct")
    frame = pd.DataFrame(list(rows), columns=["task", "worker", "is_correct"])
    frame["label"] = frame.pop("is_correct").map({True: CORRECT, False: INCORRECT})
    return frame[LABEL_COLUMNS]


def canonical_order(frame, columns=LABEL_COLUMNS):
    """The frame's `columns`, its rows sorted by them, so that a fit sees the same frame whatever
    order the rows came in: crowd-kit numbers workers, tasks and items in order of first
    appearance, MACE and noisy Bradley-Terry draw each one's starting point by that number, and
    sums taken in another order can tip a close posterior."""
    return frame[columns].sort_values(columns, kind="stable", ignore_index=True)


def fit_labels(frame, model):
    """Fit one of crowd-kit's label models (an Aggregation value other than votes) on a
    `task, worker, label` frame; the same answers in any row order give the same fit."""
    # crowd-kit is imported here, where a fit needs it: importing it takes seconds (its text
    # aggregators bring transformers and nltk), which every web and worker process would pay.
    from crowdkit.aggregation import GLAD, MACE, DawidSkene

    frame = canonical_order(frame)
    by_truth, shares = pd.DataFrame(), pd.Series(dtype=float)
    if model == Aggregation.DAWID_SKENE:
        fitted = DawidSkene(n_iter=N_ITER).fit(frame)
        by_truth, shares = _dawid_skene_by_truth(fitted), fitted.priors_.astype(float)
        reliability = (by_truth * shares).sum(axis="columns")
    elif model == Aggregation.GLAD:
        # With one label seen (every answer "correct"), GLAD takes log(0) on its way to the
        # right answer; numpy's warning says nothing to a researcher.
        with np.errstate(divide="ignore"):
            fitted = GLAD(n_iter=N_ITER).fit(frame)
        reliability = fitted.alphas_
    elif model == Aggregation.MACE:
        fitted, reliability = _mace(frame, MACE)
    else:
        raise ValueError(f"{model!r} is not a worker model of labels.")
    probas = fitted.probas_
    return LabelFit(model=str(model), labels=probas.idxmax(axis="columns"), posteriors=probas.max(axis="columns"),
                    reliability=reliability.astype(float), answers=frame.groupby("worker").size(),
                    voters=_workers_by_task(frame), by_truth=by_truth, shares=shares)


def _mace(frame, MACE):  # noqa: N803 (crowd-kit's class, imported by the caller)
    """crowd-kit's MACE fitted on `frame` (in canonical order), and each worker's competence.

    An integer random_state starts every restart from the same point (crowd-kit draws each with
    random_state=self.random_state), so its default ten restarts are one fit done ten times: one
    restart gives the same posteriors at a tenth of the time. crowd-kit 1.4 keeps each worker's
    strategy in the sorted order of worker and label names and reads it in their order of first
    appearance, so fitted on the names it mixed workers up, and swapped the labels' columns when the
    first answer was "incorrect" (renaming one task changed 163 of 400 labels). Fitted on the codes
    of those names in their order of first appearance, the two orders are one, and the fit no longer
    depends on what the names are."""
    workers, worker_names = pd.factorize(frame["worker"])
    labels, label_names = pd.factorize(frame["label"])
    fitted = MACE(n_restarts=MACE_RESTARTS, random_state=SEED).fit(frame.assign(worker=workers, label=labels))
    fitted.probas_ = fitted.probas_.rename(columns=dict(enumerate(label_names)))
    fitted.probas_.columns.name = None
    # spamming_ rows follow the workers' codes; its column 1 is "knows the answer", MACE's competence.
    return fitted, pd.Series(fitted.spamming_[:, 1], index=worker_names)


def _workers_by_task(frame):
    """Per task, the frozenset of its workers, from a frame in canonical order (each task's rows
    together): sliced from arrays, where pandas' groupby aggregation built each set through a
    Series of its own (0.7 s of the job's 33,000 references)."""
    tasks, workers = frame["task"].to_numpy(), frame["worker"].tolist()
    if not len(tasks):
        return pd.Series(dtype=object)
    starts = np.flatnonzero(np.r_[True, tasks[1:] != tasks[:-1]])
    ends = [*starts[1:].tolist(), len(tasks)]
    return pd.Series([frozenset(workers[start:end]) for start, end in zip(starts.tolist(), ends, strict=True)],
                     index=tasks[starts], dtype=object)


def _dawid_skene_by_truth(fitted):
    """Per worker, the probability that their answer is right on a task of each true label: the
    diagonal of their confusion matrix (errors_[worker, observed, true]); weighted by the class
    priors, the probability that an answer of theirs is right."""
    errors = fitted.errors_
    workers = errors.index.get_level_values(0).unique()
    # A worker who never gave `label` has no row for it: they never get it right.
    return pd.DataFrame({label: errors.xs(label, level=1)[label].reindex(workers, fill_value=0.0)
                         for label in fitted.priors_.index}, index=workers).astype(float)


def pairwise_frame(*, tournament, criterion="overall"):
    """The tournament's counted human judgements as crowd-kit's pairwise frame: worker, left and
    right (the models as the worker saw them, so noisy Bradley-Terry's per-worker bias is a bias
    for a side), label (the model chosen). The crowd's overall choice is forced; a CHIRP criterion
    a worker left unanswered leaves their judgement out."""
    rows = (HumanJudgement.objects.counted().filter(tournament=tournament)
            .select_related("battle__response_a", "battle__response_b").order_by("pk"))
    records = []
    for judgement in rows:
        battle = judgement.battle
        names = {"model_a": battle.response_a.model_name, "model_b": battle.response_b.model_name}
        side = judgement.choice if criterion == "overall" else judgement.criteria.get(criterion)
        if side not in Side.values:
            continue
        left, right = names[judgement.winner_side(Side.LEFT)], names[judgement.winner_side(Side.RIGHT)]
        records.append((judgement.worker_id, left, right, names[judgement.winner_side(side)]))
    return pd.DataFrame(records, columns=PAIRWISE_COLUMNS)


# How near 0 or 1 a noisy Bradley-Terry score is at its limit, where two scores tie whatever the
# judgements say: settled fits on the tests' and the benchmarks' tournaments keep every score further off.
AT_LIMIT = 1e-6


@dataclass(frozen=True)
class PairwiseFit:
    model: str
    scores: pd.Series
    skills: pd.Series
    answers: pd.Series
    unsettled: bool = False
    """Noisy Bradley-Terry has no best fit on these judgements (some model was never beaten, through
    any chain of wins, by another), or stopped with a score missing or two at one limit: its scores
    are where the optimiser stopped, and do not rank the models."""


def fit_pairwise(frame, model):
    """crowd-kit's Bradley-Terry or noisy Bradley-Terry on a pairwise frame: each model's score,
    and (noisy only) each worker's skill; the same judgements in any row order give the same fit."""
    from crowdkit.aggregation import BradleyTerry, NoisyBradleyTerry

    frame = canonical_order(frame, PAIRWISE_COLUMNS)
    unsettled = False
    if model == "bradley_terry":
        fitted = BradleyTerry(n_iter=N_ITER).fit(frame)
        skills = pd.Series(dtype=float)
    elif model == WorkerModel.NOISY_BT:
        # Bradley-Terry's scores have a best fit only when every model has beaten, through some
        # chain of wins, every other one it was compared with (the win graph strongly connected,
        # Zermelo 1929); while one model has always beaten another, as in a tournament's first few
        # judgements, crowd-kit's optimiser runs off and stops anywhere: it scored llava and otter
        # 1.0 alike where llava always won, and otter far above a model that beat it three times in
        # four. Where a fit exists its result is judged too: no score missing, no two at one limit.
        with np.errstate(all="ignore"):
            fitted = NoisyBradleyTerry(n_iter=N_ITER, random_state=SEED).fit(frame)
        skills, scores = fitted.skills_, fitted.scores_
        top, bottom = (scores > 1 - AT_LIMIT).sum(), (scores < AT_LIMIT).sum()
        unsettled = bool(not _wins_connect_every_model(frame) or scores.isna().any() or top > 1 or bottom > 1)
    else:
        raise ValueError(f"{model!r} is not a pairwise worker model.")
    return PairwiseFit(model=model, scores=fitted.scores_.sort_values(ascending=False),
                       skills=skills.astype(float), answers=frame.groupby("worker").size(), unsettled=unsettled)


def _wins_connect_every_model(frame):
    """Whether every model of a pairwise frame reaches every other through a chain of wins."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    models, codes = np.unique(np.concatenate([frame["left"], frame["right"]]).astype(str), return_inverse=True)
    left, right = codes[:len(frame)], codes[len(frame):]
    winner = np.where(frame["label"].astype(str).to_numpy() == frame["left"].astype(str).to_numpy(), left, right)
    loser = np.where(winner == left, right, left)
    wins = coo_matrix((np.ones(len(frame)), (winner, loser)), shape=(len(models), len(models)))
    return connected_components(wins, directed=True, connection="strong")[0] == 1


def store_reliabilities(*, stage, model, reliability, answers, family=None, by_truth=None, shares=None):
    """Replace the stored reliabilities of (stage, family, model) with a fit's: workers the fit no
    longer saw (all their answers rejected) lose their row. A fit that tells labels apart
    (Dawid-Skene) stores each worker's accuracy `by_truth` and each label's share."""
    now = timezone.now()
    by_truth = {} if by_truth is None or by_truth.empty else {
        worker: {str(label): float(value) for label, value in row.items()} for worker, row in by_truth.iterrows()}
    rows = [WorkerReliability(worker_id=int(worker), stage=stage, family=family, model=model,
                              reliability=float(value), answers=int(answers[worker]),
                              by_truth=by_truth.get(worker, {}), fitted_at=now)
            for worker, value in reliability.items()]
    with transaction.atomic():
        WorkerReliability.objects.filter(stage=stage, family=family, model=model).delete()
        WorkerReliability.objects.bulk_create(rows)
        LabelShare.objects.filter(stage=stage, family=family, model=model).delete()
        LabelShare.objects.bulk_create(
            LabelShare(stage=stage, family=family, model=model, label=str(label), share=float(share), fitted_at=now)
            for label, share in (shares if shares is not None else {}).items())
    return len(rows)


def store_pairwise_skills():
    """Fit noisy Bradley-Terry on the counted judgements of every tournament whose crowd board
    uses it, and store each worker's skill (stage pairwise). Models are items per tournament (a
    model's strength is the tournament's question), workers are shared: their care is the same
    whichever tournament they judge in. Returns how many workers were stored: none when the fit
    did not settle (`PairwiseFit.unsettled`)."""
    from annotation.models import Tournament

    frames = []
    for tournament in Tournament.objects.filter(aggregation=Tournament.Aggregation.NOISY_BT).order_by("pk"):
        frame = pairwise_frame(tournament=tournament)
        for column in ("left", "right", "label"):
            frame[column] = f"{tournament.pk}:" + frame[column]
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PAIRWISE_COLUMNS)
    if frame.empty:
        return store_reliabilities(stage=Stage.PAIRWISE, model=WorkerModel.NOISY_BT, reliability=pd.Series(dtype=float),
                                   answers=pd.Series(dtype=int))
    fit = fit_pairwise(frame, WorkerModel.NOISY_BT)
    if fit.unsettled:
        # Where it stopped says nothing of the workers either: the skills of the last settled fit stand.
        return 0
    return store_reliabilities(stage=Stage.PAIRWISE, model=WorkerModel.NOISY_BT, reliability=fit.skills,
                               answers=fit.answers)
