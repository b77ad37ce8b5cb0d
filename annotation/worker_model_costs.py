"""What a worker model costs to fit, told where a researcher chooses one (issue 41): a fit reads every
counted answer of its stage on every run of the worker-model job, and GLAD at a campaign's size
takes many minutes where Dawid-Skene takes seconds.

The figures are measured by benchmarks/worker_model_times.py (crowd-kit's fits as
annotation/worker_models.py runs them, simulated binary verification answers) and grow in
proportion to the answers, since every fit runs its iterations over every answer. This module
reads no pandas: the admin asks it, and the web processes stay without the scientific stack.
"""

from django.db.models import Count, Q

from annotation import teams
from annotation.models import Aggregation, Stage, Verification, WorkerModel, counted_verifications

# Seconds per 100,000 answers, the larger of the rates measured at 100,000 and at 1,000,000 answers
# on 2026-11-28 (a shared two-core machine): Dawid-Skene 0.8 s and 7.6 s, GLAD 99.7 s at 100,000
# (1,000,000 extrapolated: about 17 minutes), MACE 8.3 s and 30.3 s, noisy Bradley-Terry 19.2 s
# and 359.9 s. Issue 41 saw GLAD take 22 minutes on a real set of 92,721 answers on a loaded
# machine, so these are a floor, not a promise.
SECONDS_PER_100K = {
    WorkerModel.DAWID_SKENE: 0.8,
    WorkerModel.GLAD: 99.7,
    WorkerModel.MACE: 8.3,
    WorkerModel.NOISY_BT: 36.0,
}
# "A few minutes": past this a fit is named as slow where it is chosen.
SLOW_SECONDS = 180
LABEL_MODELS = (Aggregation.DAWID_SKENE, Aggregation.GLAD, Aggregation.MACE)


def fit_seconds(model, answers):
    return SECONDS_PER_100K[model] * answers / 100_000


def duration(seconds):
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def per_100k_text():
    """Each label model's time per 100,000 answers, for a help text."""
    return ", ".join(f"{_name(model)} about {duration(fit_seconds(model, 100_000))}" for model in LABEL_MODELS)


def verification_fit_size(config, user):
    """How many answers a verification fit reads once `config`'s family has its answers, as far as
    `user` may see (annotation/teams.py: another group's campaign is not theirs to count): every
    counted verification answer now (the job fits every family's at once), and the answers the
    family still asks for (its target instances times the overlap, less those already in)."""
    counted = teams.scoped(Verification.objects.filter(counted_verifications()), user)
    if config.family_id is None:
        return counted.count()
    # Both counts in one pass over the counted answers (a quarter of a million at campaign size).
    found = counted.aggregate(everything=Count("pk"),
                              family=Count("pk", filter=Q(reference__instance__family_id=config.family_id)))
    expected = config.family.target_instances * config.overlap
    return found["everything"] + max(expected - found["family"], 0)


def verification_fit_times(config, user):
    """Each label model's estimated fit time at `config`'s size, in words; "" outside verification."""
    if config is None or config.stage != Stage.VERIFICATION:
        return ""
    answers = verification_fit_size(config, user)
    times = ", ".join(f"{_name(model)} about {duration(fit_seconds(model, answers))}" for model in LABEL_MODELS)
    return f"At about {answers:,} answers (this family's to come and every counted one you can see): {times}."


def slow_fit_warning(config, user):
    """What to tell a researcher whose verification stage chose a worker model that would take over
    SLOW_SECONDS a fit at its size, or ""."""
    if config.stage != Stage.VERIFICATION or config.aggregation not in LABEL_MODELS:
        return ""
    answers = verification_fit_size(config, user)
    seconds = fit_seconds(config.aggregation, answers)
    if seconds <= SLOW_SECONDS:
        return ""
    fast = duration(fit_seconds(Aggregation.DAWID_SKENE, answers))
    return (f"{config}: {_name(config.aggregation)} would take about {duration(seconds)} to fit about {answers:,} "
            f"answers (every counted verification answer, and this family's still to come), on every run of the "
            f"worker-model job; Dawid-Skene takes about {fast} and beat the majority vote on the project's "
            f"benchmarks.")


def _name(model):
    return Aggregation(model).label.split(" worker model")[0]
