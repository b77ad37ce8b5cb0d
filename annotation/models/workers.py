"""Who does crowd work: one row per person per platform."""

from django.conf import settings
from django.db import models


class Worker(models.Model):
    """Someone doing crowd work, identified by their platform's id.

    Platform ids are personal data: exports and reports use `pseudonym`, never `external_id`.
    """

    class Platform(models.TextChoices):
        MTURK = "mturk", "MTurk"
        CLOUDRESEARCH = "cloudresearch", "CloudResearch"
        PROLIFIC = "prolific", "Prolific"
        TOLOKA = "toloka", "Toloka"
        LOCAL = "local", "In-house"
        IMPORT = "import", "Imported dataset"

    #: The platforms of no crowd: in-house annotators, trained in person, and the workers named in
    #: an imported dataset. Every crowd platform is known in mturk/platforms/ alone.
    IN_HOUSE = (Platform.LOCAL, Platform.IMPORT)

    platform = models.CharField(max_length=20, choices=Platform.choices)
    external_id = models.CharField(max_length=128)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="worker")
    created_at = models.DateTimeField(auto_now_add=True)
    # The random key of the study-link arrival that made this row (frontend/arrival.py): a browser
    # whose first reply was lost brings it back in the signed arrival token, and is let in again
    # without the platform's confirmation. Empty for rows made any other way.
    first_arrival_key = models.CharField(max_length=32, blank=True, default="", editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["platform", "external_id"], name="worker_platform_id_unique"),
        ]

    def __str__(self):
        return f"{self.platform}:{self.pseudonym}"

    @property
    def pseudonym(self):
        from annotation.privacy import pseudonymise

        return pseudonymise(self.platform, self.external_id)

    def forget_standing(self):
        """After a change to this worker's block, qualification or pause: the standing it was
        fetched with (annotation/crowdwork/standing.py, `standing_stage` and its facts) is dropped,
        so that it is asked again."""
        self.__dict__.pop("standing_stage", None)
