"""How often a worker's answers are right, as worker-aware ask-until-decided weighs them (issue 41):
from their checked gold answers (the stage's qualification test and the gold mixed into live
work) where there are enough, else from the worker model's fit once it has enough of their
answers, else a stated prior.

Whatever it rests on, an accuracy is shrunk toward the prior as a Beta prior worth `PRIOR_ANSWERS`
answers would shrink it, so that a worker right on all of five gold items counts as good, not as
never wrong.
"""

from dataclasses import dataclass

from django.db.models import Count, OuterRef, Q, Subquery

from annotation.models import Stage, Worker, WorkerModel, WorkerReliability

# How many answers the prior is worth: with a prior of 0.7, a worker right on 5 of 5 gold items
# counts 0.87, on 50 of 50 0.98.
PRIOR_ANSWERS = 4


@dataclass(frozen=True)
class Accuracy:
    """A worker's accuracy and what it rests on: "gold", "worker model" or "prior"."""

    value: float
    source: str
    answers: int = 0


def shrunk(right, answered, prior):
    """The Beta posterior mean of an accuracy seen right `right` times in `answered`, the prior
    worth PRIOR_ANSWERS answers at `prior`."""
    return (right + PRIOR_ANSWERS * prior) / (answered + PRIOR_ANSWERS)


def accuracy_from(*, gold, fitted, prior, enough):
    """A worker's Accuracy from `gold` ((right, checked)) and `fitted` ((accuracy, answers) of the
    worker model, or None): the first with at least `enough` answers, else the prior."""
    right, checked = gold
    if checked >= enough:
        return Accuracy(shrunk(right, checked, prior), "gold", checked)
    if fitted is not None and fitted[1] >= enough:
        reliability, answers = fitted
        return Accuracy(shrunk(reliability * answers, answers, prior), "worker model", answers)
    return Accuracy(prior, "prior")


def verifier_accuracies(worker_ids, *, prior, enough):
    """{worker id: Accuracy} of verifiers, in one query: their checked gold answers of the
    verification stage, and Dawid-Skene's accuracy from the worker-model job's latest fit over
    every family (the job fits it whatever a stage aggregates by)."""
    fit = WorkerReliability.objects.filter(worker=OuterRef("pk"), stage=Stage.VERIFICATION, family=None,
                                           model=WorkerModel.DAWID_SKENE)
    gold = Q(gold_answers__item__qualification__stage=Stage.VERIFICATION, gold_answers__correct__isnull=False)
    rows = (Worker.objects.filter(pk__in=set(worker_ids)).order_by()
            .annotate(gold_checked=Count("gold_answers", filter=gold),
                      gold_right=Count("gold_answers", filter=gold & Q(gold_answers__correct=True)),
                      fitted=Subquery(fit.values("reliability")[:1]),
                      fitted_answers=Subquery(fit.values("answers")[:1]))
            .values_list("pk", "gold_right", "gold_checked", "fitted", "fitted_answers"))
    return {pk: accuracy_from(gold=(right, checked), prior=prior, enough=enough,
                              fitted=None if fitted is None else (fitted, fitted_answers))
            for pk, right, checked, fitted, fitted_answers in rows}
