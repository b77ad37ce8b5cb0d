"""Crowd platforms: where a stage's work is published and how its workers come back to us."""

from decimal import Decimal

from django.db import models

from annotation.models import InstructionFamily, Stage, Worker


class CrowdStudy(models.Model):
    """One stage of work published on one platform: an MTurk HIT type, a CloudResearch project,
    a Prolific study, or in-house work for local annotators.

    Workers arriving by a study link are matched to it by (platform, external_id); the completion
    code is what we hand them back at the end.
    """

    platform = models.CharField(max_length=20, choices=Worker.Platform.choices)
    stage = models.CharField(max_length=30, choices=Stage.choices)
    family = models.ForeignKey(InstructionFamily, null=True, blank=True, on_delete=models.PROTECT,
                               related_name="crowd_studies",
                               help_text="Leave empty to draw work from every family of the stage.")
    name = models.CharField(max_length=200)
    external_id = models.CharField(
        max_length=128, blank=True,
        help_text="MTurk HIT type id, CloudResearch project id or Prolific study id.",
    )
    completion_code = models.CharField(max_length=64, blank=True)
    reward_usd = models.DecimalField(max_digits=8, decimal_places=2, default=Decimal("0.00"))
    budget_usd = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True,
                                     help_text="Publishing stops once planned spend would pass it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "crowd studies"
        constraints = [
            models.UniqueConstraint(
                fields=["platform", "external_id"], condition=~models.Q(external_id=""),
                name="crowd_study_external_id_unique",
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.get_platform_display()}, {self.get_stage_display()})"
