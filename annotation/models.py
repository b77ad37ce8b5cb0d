"""The VisIT-Bench collection pipeline as data (paper §2.1, Fig. 3).

An instruction family is curated by researchers; crowd stages turn it into instances (image(s) +
instruction), instruction-conditioned captions, candidate references from a model, and
verifications of those references. Every crowd stage draws work units from one queue
(annotation/queue.py); an assignment is one worker's lease on one unit.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Stage(models.TextChoices):
    INSTRUCTION_GENERATION = "instruction_generation", "Instruction generation"
    CAPTION = "caption", "Instruction-conditioned caption"
    VERIFICATION = "verification", "Verification"


class ImageAsset(models.Model):
    """An image with its licence; either stored by us (upload) or referenced by URL."""

    file = models.ImageField(upload_to="images/%Y/%m/", blank=True, width_field="width",
                             height_field="height")
    url = models.URLField(max_length=1000, blank=True,
                          help_text="Where the image lives when we do not store it ourselves.")
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    licence = models.CharField(max_length=200, blank=True, help_text="e.g. CC BY 2.0, CC0, public domain")
    licence_url = models.URLField(max_length=500, blank=True)
    author = models.CharField(max_length=300, blank=True)
    source_url = models.URLField(max_length=1000, blank=True,
                                 help_text="The page the image was found on (e.g. Openverse).")
    uploaded_by = models.ForeignKey("Worker", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="images")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(file="") | ~Q(url=""), name="image_has_file_or_url"),
        ]

    def __str__(self):
        return self.url or self.file.name

    @property
    def display_url(self):
        return self.file.url if self.file else self.url


class InstructionFamily(models.Model):
    class Source(models.TextChoices):
        NEW = "new", "New (written for this benchmark)"
        REFORMATTED = "reformatted", "Reformatted from an existing dataset"

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    skill_tags = models.JSONField(default=list, blank=True,
                                  help_text='A JSON list, e.g. ["recognition", "reasoning"].')
    is_multi_image = models.BooleanField(default=False)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.NEW)
    source_dataset = models.CharField(max_length=200, blank=True)
    citation = models.TextField(blank=True, help_text="BibTeX or a reference for reformatted datasets.")
    seed_instruction = models.TextField(blank=True)
    seed_response = models.TextField(blank=True)
    seed_images = models.ManyToManyField(ImageAsset, through="SeedImage", blank=True,
                                         related_name="seed_of")
    target_instances = models.PositiveIntegerField(default=10)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "instruction families"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(source="new") | ~Q(source_dataset=""),
                name="reformatted_family_names_its_dataset",
            ),
        ]

    def __str__(self):
        return self.name


class SeedImage(models.Model):
    family = models.ForeignKey(InstructionFamily, on_delete=models.CASCADE)
    image = models.ForeignKey(ImageAsset, on_delete=models.PROTECT)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["family", "position"], name="seed_image_position_unique"),
        ]


class Worker(models.Model):
    """Someone doing crowd work, identified by their platform's id.

    Platform ids are personal data: exports and reports use `pseudonym`, never `external_id`.
    """

    class Platform(models.TextChoices):
        MTURK = "mturk", "MTurk"
        CLOUDRESEARCH = "cloudresearch", "CloudResearch"
        PROLIFIC = "prolific", "Prolific"
        LOCAL = "local", "In-house"
        IMPORT = "import", "Imported dataset"

    platform = models.CharField(max_length=20, choices=Platform.choices)
    external_id = models.CharField(max_length=128)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="worker")
    created_at = models.DateTimeField(auto_now_add=True)

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


class Instance(models.Model):
    """One benchmark item: image(s) and an instruction of a family, and where it is in the pipeline."""

    class Status(models.TextChoices):
        AWAITING_CAPTION = "awaiting_caption", "Awaiting caption"
        AWAITING_REFERENCE = "awaiting_reference", "Awaiting reference"
        AWAITING_VERIFICATION = "awaiting_verification", "Awaiting verification"
        VERIFIED = "verified", "Verified"
        DISCARDED = "discarded", "Discarded"

    family = models.ForeignKey(InstructionFamily, on_delete=models.PROTECT, related_name="instances")
    instruction = models.TextField()
    images = models.ManyToManyField(ImageAsset, through="InstanceImage", related_name="instances")
    author = models.ForeignKey(Worker, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="instructions_written")
    status = models.CharField(max_length=30, choices=Status.choices, default=Status.AWAITING_CAPTION,
                              db_index=True)
    current_caption = models.ForeignKey("Caption", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    # Kept from imported sheets so a published dataset round-trips unchanged.
    reference_output = models.TextField(blank=True)
    public_images_metadata = models.JSONField(default=dict, blank=True)
    imported_from = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"#{self.pk} {self.family.name}: {self.instruction[:60]}"

    @property
    def is_multi_image(self):
        return self.family.is_multi_image or self.instanceimage_set.count() > 1

    def ordered_images(self):
        return [link.image for link in self.instanceimage_set.select_related("image")]


class InstanceImage(models.Model):
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE)
    image = models.ForeignKey(ImageAsset, on_delete=models.PROTECT)
    position = models.PositiveSmallIntegerField(default=0)
    blip2_caption = models.TextField(blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "position"], name="instance_image_position_unique"),
        ]


class WorkUnit(models.Model):
    """One item of crowd work in a stage, answered by `overlap` different workers.

    `key` names what the unit is about (a family slot, an instance's caption round, a reference),
    so creating units twice never duplicates them.
    """

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"

    stage = models.CharField(max_length=30, choices=Stage.choices)
    key = models.CharField(max_length=100)
    family = models.ForeignKey(InstructionFamily, on_delete=models.CASCADE, related_name="work_units")
    instance = models.ForeignKey(Instance, null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="work_units")
    reference = models.ForeignKey("Reference", null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="work_units")
    overlap = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["stage", "key"], name="work_unit_key_unique"),
            models.CheckConstraint(condition=Q(overlap__gte=1), name="work_unit_overlap_positive"),
        ]
        indexes = [models.Index(fields=["stage", "status", "id"], name="work_unit_queue_idx")]

    def __str__(self):
        return f"{self.get_stage_display()} {self.key}"


class AssignmentQuerySet(models.QuerySet):
    def holding_a_slot(self, now=None):
        """Assignments that count against a unit's overlap: submitted, or leased and not expired."""
        now = now or timezone.now()
        return self.filter(
            Q(status=Assignment.Status.SUBMITTED)
            | Q(status=Assignment.Status.LEASED, lease_expires_at__gt=now)
        )


class Assignment(models.Model):
    """A worker's lease on a work unit, and later their submission of it."""

    class Status(models.TextChoices):
        LEASED = "leased", "Leased"
        SUBMITTED = "submitted", "Submitted"
        EXPIRED = "expired", "Expired"
        RETURNED = "returned", "Returned"

    unit = models.ForeignKey(WorkUnit, on_delete=models.CASCADE, related_name="assignments")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="assignments")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.LEASED)
    leased_at = models.DateTimeField(default=timezone.now)
    lease_expires_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    active_seconds = models.FloatField(null=True, blank=True,
                                       help_text="Time the worker was active on the page, for pay planning.")
    platform_assignment_id = models.CharField(max_length=128, blank=True)
    platform_task_id = models.CharField(max_length=128, blank=True)

    objects = AssignmentQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            # A worker never gets the same unit twice, whatever the race.
            models.UniqueConstraint(fields=["unit", "worker"], name="assignment_unit_worker_unique"),
        ]
        indexes = [models.Index(fields=["unit", "status"], name="assignment_unit_status_idx")]

    def __str__(self):
        return f"{self.unit} → {self.worker}"


class StageConfig(models.Model):
    """How a crowd stage runs for one family: overlap, lease, and whether it is launched."""

    class VerificationRule(models.TextChoices):
        UNANIMOUS = "unanimous", "All verifiers must mark it correct"
        MAJORITY = "majority", "A strict majority must mark it correct"
        ANY = "any", "One verifier marking it correct is enough"

    class IncorrectAction(models.TextChoices):
        DISCARD = "discard", "Discard the instance (as in the paper)"
        RECAPTION = "recaption", "Send back for a new caption when the caption was the problem"

    family = models.ForeignKey(InstructionFamily, on_delete=models.CASCADE, related_name="stage_configs")
    stage = models.CharField(max_length=30, choices=Stage.choices)
    overlap = models.PositiveSmallIntegerField(default=1)
    lease_minutes = models.PositiveIntegerField(default=30)
    launched_at = models.DateTimeField(null=True, blank=True)
    verification_rule = models.CharField(max_length=20, choices=VerificationRule.choices,
                                         default=VerificationRule.UNANIMOUS)
    on_incorrect = models.CharField(max_length=20, choices=IncorrectAction.choices,
                                    default=IncorrectAction.DISCARD)
    max_caption_rounds = models.PositiveSmallIntegerField(default=2)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["family", "stage"], name="stage_config_unique"),
            models.CheckConstraint(condition=Q(overlap__gte=1), name="stage_config_overlap_positive"),
        ]

    def __str__(self):
        return f"{self.family} / {self.get_stage_display()}"


class InstructionSubmission(models.Model):
    """The output of an instruction-generation assignment: the instance it created."""

    assignment = models.OneToOneField(Assignment, on_delete=models.PROTECT, related_name="instruction_submission")
    instance = models.OneToOneField(Instance, on_delete=models.PROTECT, related_name="instruction_submission")
    created_at = models.DateTimeField(auto_now_add=True)


class Caption(models.Model):
    """An instruction-conditioned caption: one text per image, in the instance's image order."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="captions")
    texts = models.JSONField(help_text="One caption per image, in image order.")
    author = models.ForeignKey(Worker, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="captions")
    assignment = models.OneToOneField(Assignment, null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="caption")
    round = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"Caption of #{self.instance_id} (round {self.round})"


class Reference(models.Model):
    """A candidate reference response, from a model (paper §2.1), imported, or pasted by hand."""

    class Source(models.TextChoices):
        GENERATED = "generated", "Generated by a model"
        MANUAL = "manual", "Pasted by a researcher"
        IMPORTED = "imported", "Imported from a published sheet"

    class Verdict(models.TextChoices):
        PENDING = "pending", "Pending"
        CORRECT = "correct", "Correct"
        INCORRECT = "incorrect", "Incorrect"

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="references")
    caption = models.ForeignKey(Caption, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="references")
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.GENERATED)
    model = models.CharField(max_length=200, blank=True)
    prompt = models.TextField(blank=True)
    prompt_sha256 = models.CharField(max_length=64, blank=True)
    text = models.TextField()
    raw_output = models.JSONField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=6, null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    verdict = models.CharField(max_length=10, choices=Verdict.choices, default=Verdict.PENDING)
    problem_in_caption = models.BooleanField(default=False)
    problem_in_response = models.BooleanField(default=False)
    flagged_harmful = models.BooleanField(default=False)
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # Re-running the reference job for the same prompt must never add a second reference.
            models.UniqueConstraint(
                fields=["instance", "model", "prompt_sha256"],
                condition=Q(source="generated"),
                name="generated_reference_unique_per_prompt",
            ),
        ]

    def __str__(self):
        return f"Reference #{self.pk} for instance #{self.instance_id} ({self.model or self.source})"


class Verification(models.Model):
    """One verifier's judgement of a candidate reference (paper §2.1 'Model Output Evaluation')."""

    reference = models.ForeignKey(Reference, on_delete=models.CASCADE, related_name="verifications")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="verifications")
    assignment = models.OneToOneField(Assignment, null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="verification")
    is_correct = models.BooleanField()
    problem_in_caption = models.BooleanField(default=False)
    problem_in_response = models.BooleanField(default=False)
    is_harmful = models.BooleanField(default=False)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["reference", "worker"], name="verification_once_per_worker"),
            models.CheckConstraint(
                condition=Q(is_correct=False) | Q(problem_in_caption=False, problem_in_response=False),
                name="correct_verification_names_no_problem",
            ),
        ]
