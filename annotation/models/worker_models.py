"""Each worker's reliability as a worker model estimates it (DESIGN: "worker model"), stored by
the worker-model job (annotation/worker_models.py) so that pages read it and never fit.

What `reliability` measures is the model's own: Dawid-Skene's probability of a correct answer
(the diagonal of the worker's confusion matrix weighted by the classes' priors), GLAD's ability
alpha (unbounded; above 0 better than chance), MACE's competence (the posterior probability that
the worker answers what they know rather than spam), noisy Bradley-Terry's skill (0 to 1). Compare
workers within one model, never across models.
"""

from django.db import models

from annotation.model_checks import CheckedFields, StorableJSONField
from annotation.models.families import InstructionFamily
from annotation.models.work import Stage
from annotation.models.workers import Worker


class WorkerModel(models.TextChoices):
    DAWID_SKENE = "dawid_skene", "Dawid-Skene"
    GLAD = "glad", "GLAD"
    MACE = "mace", "MACE"
    NOISY_BT = "noisy_bt", "Noisy Bradley-Terry"


class WorkerReliability(models.Model):
    """One worker's reliability in one stage under one model, from its latest fit. `family` is
    empty for a fit over every family's answers (verification is fitted across families: a worker's
    care does not change with the family, and more answers per worker make a steadier estimate)."""

    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="reliabilities")
    stage = models.CharField(max_length=30, choices=Stage.choices)
    family = models.ForeignKey(InstructionFamily, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="+")
    model = models.CharField(max_length=20, choices=WorkerModel.choices)
    reliability = models.FloatField()
    answers = models.PositiveIntegerField(help_text="Counted answers the fit used.")
    by_truth = StorableJSONField(
        default=dict, blank=True,
        help_text="Dawid-Skene only: how often the worker is right on items whose truth is each label "
                  "(the diagonal of their confusion matrix), by label.")
    fitted_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "worker reliabilities"
        ordering = ["stage", "model", "-reliability"]
        constraints = [
            models.UniqueConstraint(fields=["worker", "stage", "family", "model"], nulls_distinct=False,
                                    name="worker_reliability_unique"),
        ]

    def __str__(self):
        return f"{self.worker} {self.get_model_display()}: {self.reliability:.3f}"


class LabelShare(CheckedFields, models.Model):
    """How common a label is among a stage's items, as a worker model's latest fit estimates it (its
    class prior): a rule that weighs answers by label (annotation/workforce/accuracy.py) starts
    from it. `family` is empty for a fit over every family's answers, as for WorkerReliability."""

    stage = models.CharField(max_length=30, choices=Stage.choices)
    family = models.ForeignKey(InstructionFamily, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="+")
    model = models.CharField(max_length=20, choices=WorkerModel.choices)
    label = models.CharField(max_length=50)
    share = models.FloatField()
    fitted_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["stage", "family", "model", "label"], nulls_distinct=False,
                                    name="label_share_unique"),
            models.CheckConstraint(condition=models.Q(share__gte=0, share__lte=1), name="label_share_is_a_share",
                                   violation_error_message="A share is between 0 and 1."),
        ]

    def __str__(self):
        return f"{self.get_stage_display()} {self.get_model_display()}: {self.label} {self.share:.3f}"
