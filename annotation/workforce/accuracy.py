"""How often a worker's answers are right, as worker-aware ask-until-decided weighs them (issue 41):
from their checked gold answers (the stage's qualification test and the gold mixed into live
work) where there are enough, else from the worker model's fit once it has enough of their
answers, else a stated prior.

Whatever it rests on, an accuracy is shrunk toward the prior as a Beta prior worth `PRIOR_ANSWERS`
answers would shrink it, so that a worker right on all of five gold items counts as good, not as
never wrong.

Verifiers are seldom as good at both verdicts: many pass a flawed reference more often than they
fail a sound one. So an accuracy also keeps, where its evidence tells them apart, how often the
worker is right on items whose truth is each label (`by_truth`: gold items by their answer, the
worker model by the diagonal of the worker's confusion matrix), each shrunk toward the worker's
one accuracy by the same `PRIOR_ANSWERS`, so that a label seen on few items says little. With them
comes how common each label is (`Evidence.shares`, the worker model's class priors), without
which a rule weighing by label would read a crowd's usual answer as a doubtful one (issue 41).
"""

from dataclasses import dataclass, field

from django.db.models import Count, OuterRef, Q, Subquery

from annotation.models import GoldItem, LabelShare, Stage, Worker, WorkerModel, WorkerReliability

# How many answers the prior is worth: with a prior of 0.7, a worker right on 5 of 5 gold items
# counts 0.87, on 50 of 50 0.98.
PRIOR_ANSWERS = 4
# A verification gold item's answer, as the stage's labels read it.
VERIFICATION_LABELS = dict(zip(GoldItem.VERDICTS, (True, False), strict=True))


@dataclass(frozen=True)
class Accuracy:
    """A worker's accuracy and what it rests on: "gold", "worker model" or "prior"; and, where the
    evidence tells labels apart, their accuracy on items whose truth is each label (`by_truth`)."""

    value: float
    source: str
    answers: int = 0
    by_truth: dict = field(default_factory=dict)

    def on(self, truth):
        """How often the worker is right on an item whose truth is `truth`."""
        return self.by_truth.get(truth, self.value)


@dataclass(frozen=True)
class Evidence:
    """What a rule weighing by accuracy knows of some workers: their Accuracy by id (`of`), and how
    common each label is among the items (`shares`; empty: as common as each other)."""

    of: dict
    shares: dict = field(default_factory=dict)


def shrunk(right, answered, prior):
    """The Beta posterior mean of an accuracy seen right `right` times in `answered`, the prior
    worth PRIOR_ANSWERS answers at `prior`."""
    return (right + PRIOR_ANSWERS * prior) / (answered + PRIOR_ANSWERS)


def accuracy_from(*, gold, fitted, prior, enough, gold_by_truth=None, fitted_by_truth=None, shares=None):
    """A worker's Accuracy from `gold` ((right, checked)) and `fitted` ((accuracy, answers) of the
    worker model, or None): the first with at least `enough` answers, else the prior. Each source
    may tell labels apart: `gold_by_truth` ({label: (right, checked)}) and `fitted_by_truth`
    ({label: accuracy on items of that truth}), which rests on the worker's answers times the
    label's share of the items (`shares`, the same fit's; a label without one is left out)."""
    right, checked = gold
    if checked >= enough:
        value = shrunk(right, checked, prior)
        return Accuracy(value, "gold", checked, _by_truth(gold_by_truth, value))
    if fitted is not None and fitted[1] >= enough:
        reliability, answers = fitted
        value = shrunk(reliability * answers, answers, prior)
        shares = shares or {}
        by_truth = {label: (accuracy * answers * shares[label], answers * shares[label])
                    for label, accuracy in (fitted_by_truth or {}).items() if label in shares}
        return Accuracy(value, "worker model", answers, _by_truth(by_truth, value))
    return Accuracy(prior, "prior")


def _by_truth(seen, value):
    return {label: shrunk(right, answered, value) for label, (right, answered) in (seen or {}).items() if answered}


def verifier_accuracies(worker_ids, *, prior, enough):
    """Evidence of verifiers, in one query: their checked gold answers of the verification stage,
    by the gold item's answer, and Dawid-Skene's accuracy and confusion from the worker-model
    job's latest fit over every family (the job fits it whatever a stage aggregates by), with the
    share of references that fit takes to be correct."""
    fit = WorkerReliability.objects.filter(worker=OuterRef("pk"), stage=Stage.VERIFICATION, family=None,
                                           model=WorkerModel.DAWID_SKENE)
    share = LabelShare.objects.filter(stage=Stage.VERIFICATION, family=None, model=WorkerModel.DAWID_SKENE)
    gold = Q(gold_answers__item__qualification__stage=Stage.VERIFICATION, gold_answers__correct__isnull=False)
    right = Q(gold_answers__correct=True)
    on = {label: Q(gold_answers__item__answer=label) for label in VERIFICATION_LABELS}
    read = {"gold_checked": Count("gold_answers", filter=gold),
            "gold_right": Count("gold_answers", filter=gold & right),
            **{f"checked_{label}": Count("gold_answers", filter=gold & on[label]) for label in on},
            **{f"right_{label}": Count("gold_answers", filter=gold & on[label] & right) for label in on},
            "fitted": Subquery(fit.values("reliability")[:1]),
            "fitted_answers": Subquery(fit.values("answers")[:1]),
            "fitted_by_truth": Subquery(fit.values("by_truth")[:1]),
            **{f"share_{label}": Subquery(share.filter(label=label).values("share")[:1]) for label in on}}
    rows = list(Worker.objects.filter(pk__in=set(worker_ids)).order_by().annotate(**read).values("id", *read))
    # The same shares on every row: the subqueries name no worker. A fit that saw one verdict only
    # keeps a share of that one, which says the other's too.
    fitted_shares = {VERIFICATION_LABELS[label]: rows[0][f"share_{label}"] for label in on} if rows else {}
    known = {label: share for label, share in fitted_shares.items() if share is not None}
    shares = {} if not known else {label: known.get(label, 1 - sum(known.values())) for label in fitted_shares}
    accuracies = {row["id"]: accuracy_from(
        gold=(row["gold_right"], row["gold_checked"]), prior=prior, enough=enough,
        gold_by_truth={VERIFICATION_LABELS[label]: (row[f"right_{label}"], row[f"checked_{label}"]) for label in on},
        fitted=None if row["fitted"] is None else (row["fitted"], row["fitted_answers"]),
        fitted_by_truth={VERIFICATION_LABELS[label]: accuracy
                         for label, accuracy in (row["fitted_by_truth"] or {}).items() if label in VERIFICATION_LABELS},
        shares=shares) for row in rows}
    return Evidence(of=accuracies, shares=shares)
