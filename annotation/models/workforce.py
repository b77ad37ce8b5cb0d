"""Who may work: blocks, the qualification test of each stage (paper §2.2: five to ten sample
tasks), its gold items and answers, and each worker's standing, kept current by live gold items.

These are the domain's rules about the workforce, so they live with the domain, and so does their
logic (annotation/workforce/) and their app label (since issue 40). Their tables were made by the
crowd-platform app and keep its names (`db_table`, mturk_<model>), so no table moved when the label
did; their admin pages (now under /admin/annotation/) are registered beside the other admin pages
(annotation/admin/qualifications.py, platform_submissions.py).
"""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from annotation.model_checks import CheckedFields, StorableJSONField
from annotation.models.work import Stage
from annotation.models.workers import Worker


class WorkerBlock(models.Model):
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="blocks")
    reason = models.TextField()
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "mturk_workerblock"
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.worker} blocked"


class StageQualification(CheckedFields, models.Model):
    """The qualification test of one stage and the bars that keep workers in it."""

    stage = models.CharField(max_length=30, choices=Stage.choices, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(help_text="Shown to workers before they start.")
    test_size = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(5), MaxValueValidator(10)])
    pass_score = models.DecimalField(max_digits=4, decimal_places=3, default=Decimal("0.800"),
                                     help_text="Share of gold items right to qualify.")
    live_accuracy_bar = models.DecimalField(
        max_digits=4, decimal_places=3, default=Decimal("0.600"),
        help_text="Below this share of live gold items right, the worker is paused.")
    live_window = models.PositiveSmallIntegerField(
        default=10, help_text="Live accuracy counts the last this many gold answers.")
    live_min_answers = models.PositiveSmallIntegerField(
        default=5, help_text="No pause before this many live gold answers.")
    live_gold_every = models.PositiveSmallIntegerField(
        default=10, help_text="Mix one gold item into about every this many live tasks.")
    new_worker_gold_every = models.PositiveSmallIntegerField(
        default=3, verbose_name="new worker's gold every",
        help_text="Until a worker has answered as many live gold items as a pause needs (“live min "
                  "answers”), mix one into about every this many of their tasks, if that is more often: a new "
                  "worker's accuracy is the least known, and a poor one can be paused sooner.")
    retake_after_hours = models.PositiveIntegerField(default=24)
    mturk_qualification_type_id = models.CharField(max_length=64, blank=True, editable=False)
    mturk_environment = models.CharField(max_length=12, blank=True, editable=False)

    class Meta:
        db_table = "mturk_stagequalification"
        constraints = [
            models.CheckConstraint(condition=Q(test_size__gte=5, test_size__lte=10),
                                   name="qualification_test_five_to_ten_items",
                                   violation_error_message="A qualification test has 5 to 10 items."),
        ]

    def __str__(self):
        return self.name


class GoldItem(CheckedFields, models.Model):
    """A task with a known answer, or (free text) one a researcher reviews."""

    class Kind(models.TextChoices):
        CHOICE = "choice", "Choice with a known answer"
        FREE_TEXT = "free_text", "Free text reviewed by a researcher"

    qualification = models.ForeignKey(StageQualification, on_delete=models.CASCADE,
                                      related_name="gold_items")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.CHOICE)
    content = StorableJSONField(
        help_text='What the worker sees, e.g. {"instruction": ..., "image_url": ..., '
                  '"caption": ..., "response": ...}.')
    question = models.TextField()
    options = StorableJSONField(default=list, blank=True,
                               help_text='Choices as a JSON list, e.g. ["correct", "incorrect"].')
    answer = StorableJSONField(null=True, blank=True,
                              help_text="The right choice (choice items).")
    explanation = models.TextField(blank=True, help_text="Shown to the worker after they answer.")
    in_test = models.BooleanField(default=True)
    in_live_work = models.BooleanField(default=True)
    active = models.BooleanField(default=True)

    class Meta:
        db_table = "mturk_golditem"
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(kind="free_text") | Q(answer__isnull=False),
                                   name="choice_gold_item_has_answer",
                                   violation_error_message="A choice item needs its answer: the option to pick."),
        ]

    def __str__(self):
        return f"Gold #{self.pk}: {self.question[:60]}"

    # The verdicts a verification gold item's answer names: what scores a verifier's gold answers
    # and what a stage weighing verifiers by verdict counts them by.
    VERDICTS = ("correct", "incorrect")

    @staticmethod
    def normalised(choice):
        """A choice as answers are compared: a worker's "Correct " is the item's "correct"."""
        return choice.strip().casefold() if isinstance(choice, str) else choice

    def clean(self):
        """A choice item's answer is one of its options, so that some worker can be right; on the
        verification stage it is a verdict, kept as VERDICTS spell it, which the stage's weighing
        of each verifier by verdict reads (annotation/workforce/accuracy.py)."""
        super().clean()
        if self.options and not isinstance(self.options, list):
            raise ValidationError({"options": 'The options are a JSON list, e.g. ["correct", "incorrect"].'})
        if self.kind != self.Kind.CHOICE or self.answer is None:
            return
        options = [self.normalised(option) for option in self.options or []]
        if options and self.normalised(self.answer) not in options:
            named = ", ".join(map(str, self.options))
            raise ValidationError({"answer": f"The answer must be one of the options ({named})."})
        # Unset, the relation raises an AttributeError; in the admin's inline it may be unsaved yet.
        qualification = getattr(self, "qualification", None)
        if qualification is not None and qualification.stage == Stage.VERIFICATION:
            if self.normalised(self.answer) not in self.VERDICTS:
                raise ValidationError({"answer": "A verification gold item's answer is “correct” or “incorrect”: "
                                                 "the verdict on the reference it shows."})
            self.answer = self.normalised(self.answer)


class QualificationAttempt(models.Model):
    class Status(models.TextChoices):
        STARTED = "started", "Started"
        PENDING_REVIEW = "pending_review", "Waiting for a researcher's review"
        PASSED = "passed", "Passed"
        FAILED = "failed", "Failed"

    qualification = models.ForeignKey(StageQualification, on_delete=models.PROTECT,
                                      related_name="attempts")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="qualification_attempts")
    item_ids = StorableJSONField(
                                help_text="The gold items of this attempt, in the order shown.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.STARTED)
    score = models.DecimalField(max_digits=4, decimal_places=3, null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mturk_qualificationattempt"
        ordering = ["-started_at", "-id"]
        constraints = [
            # One open attempt at a time, whatever the race (two tabs).
            models.UniqueConstraint(fields=["qualification", "worker"], condition=Q(status="started"),
                                    name="one_open_qualification_attempt"),
        ]

    def __str__(self):
        return f"{self.qualification} attempt by {self.worker} ({self.get_status_display()})"


class GoldAnswer(models.Model):
    class Source(models.TextChoices):
        TEST = "test", "Qualification test"
        LIVE = "live", "Mixed into live work"

    item = models.ForeignKey(GoldItem, on_delete=models.PROTECT, related_name="answers")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="gold_answers")
    attempt = models.ForeignKey(QualificationAttempt, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="answers")
    source = models.CharField(max_length=4, choices=Source.choices)
    answer = StorableJSONField()
    correct = models.BooleanField(null=True, blank=True, help_text="Empty until reviewed (free text).")
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "mturk_goldanswer"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "item"], condition=Q(attempt__isnull=False),
                                    name="gold_answer_once_per_attempt"),
        ]

    def __str__(self):
        return f"{self.worker} on gold #{self.item_id}"


class WorkerQualification(models.Model):
    """Whether a worker may do a stage, kept current by live gold items."""

    class Status(models.TextChoices):
        QUALIFIED = "qualified", "Qualified"
        PAUSED = "paused", "Paused: live accuracy below the bar"

    qualification = models.ForeignKey(StageQualification, on_delete=models.PROTECT,
                                      related_name="worker_qualifications")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="qualifications")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUALIFIED)
    test_score = models.DecimalField(max_digits=4, decimal_places=3)
    live_accuracy = models.DecimalField(max_digits=4, decimal_places=3, null=True, blank=True)
    live_answers = models.PositiveIntegerField(default=0)
    granted_at = models.DateTimeField(auto_now_add=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    mturk_granted = models.BooleanField(
        default=False, help_text="The MTurk qualification has been associated with the worker.")

    class Meta:
        db_table = "mturk_workerqualification"
        constraints = [
            models.UniqueConstraint(fields=["qualification", "worker"],
                                    name="worker_qualification_unique"),
        ]

    def __str__(self):
        return f"{self.worker} — {self.qualification} ({self.get_status_display()})"
