"""The VisIT-Bench collection pipeline as data (paper §2.1, Fig. 3).

An instruction family is curated by researchers; crowd stages turn it into instances (image(s) +
instruction), instruction-conditioned captions, candidate references from a model, and
verifications of those references. Every crowd stage draws work units from one queue
(annotation/queue.py); an assignment is one worker's lease on one unit.
"""

from django.conf import settings
from django.db import models
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThan
from django.utils import timezone

from annotation.image_urls import image_url_allowed


class Stage(models.TextChoices):
    INSTRUCTION_GENERATION = "instruction_generation", "Instruction generation"
    CAPTION = "caption", "Instruction-conditioned caption"
    VERIFICATION = "verification", "Verification"
    PAIRWISE = "pairwise", "Pairwise preference"


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
    original_name = models.CharField(
        max_length=255, blank=True,
        help_text="The uploaded file's own name, for people; the stored file is named by its content hash.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(file="") | ~Q(url=""), name="image_has_file_or_url"),
        ]

    def __str__(self):
        name = self.original_name or self.url or f"image #{self.pk}"
        return f"{name} ({self.width}×{self.height})" if self.width and self.height else name

    @property
    def display_url(self):
        return self.file.url if self.file else self.url

    @property
    def browser_url(self):
        """What a page may point a browser at: our stored file, or a link on an allowed host, else ""."""
        if self.file:
            return self.file.url
        return self.url if image_url_allowed(self.url) else ""


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

    def __str__(self):
        return f"Seed image {self.position + 1} of {self.family}"


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
        """In Python what `multi_image_q` says in SQL; uses prefetched images when there are any."""
        return self.family.is_multi_image or len(self.instanceimage_set.all()) > 1

    def ordered_images(self):
        return [link.image for link in self.instanceimage_set.select_related("image")]


def multi_image_q(instance_path=""):
    """Multi-image as the benchmark counts it everywhere (Table 2, the two published sheets, the
    leaderboard's columns, the API filter): the family says so, or the instance has several images.

    `instance_path` is the lookup from the queried model to its instance ("" for Instance).
    """
    prefix = f"{instance_path}__" if instance_path else ""
    image_count = (
        InstanceImage.objects.filter(instance=OuterRef(instance_path or "pk"))
        .order_by()
        .values("instance")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Q(**{f"{prefix}family__is_multi_image": True}) | Q(
        GreaterThan(Coalesce(Subquery(image_count), 0), 1)
    )


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

    def __str__(self):
        return f"Image {self.position + 1} of instance #{self.instance_id}"


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

    def __str__(self):
        return f"Instruction of instance #{self.instance_id}"


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

    def __str__(self):
        return f"{'Correct' if self.is_correct else 'Incorrect'}: reference #{self.reference_id} by {self.worker}"


# --- scoring: model responses, pairwise preference, LLM judges (paper §4; CHIRP; Prometheus) ---

# The verified reference takes part in battles as one more "model" (paper Table 3's
# "Human Verified GPT-4 Reference"); win-rates are measured against it.
REFERENCE_MODEL_NAME = "human-verified reference"

# CHIRP's five criteria (Appendix C.2.1), overall first: it is the forced choice of every battle.
CHIRP_CRITERIA = (
    "overall",
    "relevance_and_completeness",
    "understanding_and_reasoning",
    "hallucination",
    "detail",
)


class ModelResponse(models.Model):
    """A model's answer to an instance (a `<model name> prediction` cell of predictions.csv)."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="model_responses")
    model_name = models.CharField(max_length=200)
    text = models.TextField()
    imported_from = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["instance_id", "model_name"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "model_name"],
                                    name="model_response_unique"),
        ]

    def __str__(self):
        return f"{self.model_name} on #{self.instance_id}"


class PreferenceStudy(models.Model):
    """Which battles to sample, and how the crowd judges them (paper §4; CHIRP C.2.2)."""

    class Sampling(models.TextChoices):
        UNIFORM = "uniform", "Uniform: a fixed number of random (instance, pair) battles"
        ALL_PAIRS = "all_pairs", "All pairs of models on every instance"
        K_MATCHUPS = "k_matchups", "k random pairs per instance (CHIRP)"

    class ImageKind(models.TextChoices):
        ALL = "all", "Single- and multi-image"
        SINGLE = "single", "Single-image only"
        MULTI = "multi", "Multi-image only"

    name = models.CharField(max_length=200, unique=True)
    families = models.ManyToManyField(InstructionFamily, blank=True,
                                      related_name="preference_studies",
                                      help_text="None chosen: every family.")
    image_kind = models.CharField(max_length=10, choices=ImageKind.choices, default=ImageKind.ALL)
    model_names = models.JSONField(default=list, blank=True,
                                   help_text='A JSON list of model names; empty: every model.')
    include_reference = models.BooleanField(
        default=True, help_text="The verified reference takes part as a model.")
    sampling = models.CharField(max_length=20, choices=Sampling.choices, default=Sampling.ALL_PAIRS)
    battle_count = models.PositiveIntegerField(default=0,
                                               help_text="Uniform sampling: how many battles.")
    matchups_per_question = models.PositiveIntegerField(default=5,
                                                        help_text="k matchups: pairs per instance.")
    judgements_per_pair = models.PositiveSmallIntegerField(default=5)
    with_criteria = models.BooleanField(default=False,
                                        help_text="Ask CHIRP's five criteria, not only overall.")
    with_rubric = models.BooleanField(default=False,
                                      help_text="Ask Prometheus-style 1-5 scores against a rubric.")
    rubric = models.TextField(blank=True,
                              help_text="Default score rubric (description and scores 1-5).")
    lease_minutes = models.PositiveIntegerField(default=30)
    seed = models.PositiveIntegerField(default=0)
    launched_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "preference studies"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(judgements_per_pair__gte=1),
                                   name="study_judgements_per_pair_positive"),
        ]

    def __str__(self):
        return self.name

    def clean(self):
        # Without a rubric the annotators' page has nothing to score against and refuses every
        # submission; a family's or an instance's rubric only overrides this default.
        if self.with_rubric and not self.rubric.strip():
            from django.core.exceptions import ValidationError

            raise ValidationError({"rubric": "A study that asks for rubric scores needs a rubric: write "
                                             "the default score rubric here (what is judged, and what "
                                             "scores 1 to 5 mean), or untick “with rubric”."})

    def rubric_for(self, instance):
        """The most specific rubric: the instance's, then its family's, then the study's."""
        rubrics = {(r.family_id, r.instance_id): r.text for r in self.rubrics.all()}
        return (
            rubrics.get((None, instance.pk))
            or rubrics.get((instance.family_id, None))
            or self.rubric
        )


class Rubric(models.Model):
    """A score rubric for one family or one instance of a study (Prometheus-Vision §3)."""

    study = models.ForeignKey(PreferenceStudy, on_delete=models.CASCADE, related_name="rubrics")
    family = models.ForeignKey(InstructionFamily, null=True, blank=True, on_delete=models.CASCADE)
    instance = models.ForeignKey(Instance, null=True, blank=True, on_delete=models.CASCADE)
    text = models.TextField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(family__isnull=False, instance__isnull=True)
                           | Q(family__isnull=True, instance__isnull=False)),
                name="rubric_for_family_or_instance",
            ),
            models.UniqueConstraint(fields=["study", "family"], name="rubric_family_unique"),
            models.UniqueConstraint(fields=["study", "instance"], name="rubric_instance_unique"),
        ]

    def __str__(self):
        return f"Rubric of {self.instance or self.family} in {self.study}"


class Battle(models.Model):
    """Two responses to one instance, judged by the crowd and by LLM judges.

    A and B are fixed when the battle is sampled; the side each is shown on is drawn per human
    assignment and stored on the judgement.
    """

    study = models.ForeignKey(PreferenceStudy, on_delete=models.CASCADE, related_name="battles")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="battles")
    response_a = models.ForeignKey(ModelResponse, on_delete=models.PROTECT, related_name="+")
    response_b = models.ForeignKey(ModelResponse, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "response_a", "response_b"],
                                    name="battle_pair_unique"),
            models.CheckConstraint(condition=~Q(response_a=F("response_b")),
                                   name="battle_two_different_responses"),
        ]

    def __str__(self):
        return f"Battle #{self.pk}: {self.response_a.model_name} vs {self.response_b.model_name}"

    @property
    def unit_key(self):
        return f"battle-{self.pk}"


class Side(models.TextChoices):
    """Where a response was shown to a worker."""

    LEFT = "left", "Left (Response 1)"
    RIGHT = "right", "Right (Response 2)"


class HumanJudgement(models.Model):
    """One worker's forced choice on a battle, as they saw it: choices name the shown side."""

    class ShownLeft(models.TextChoices):
        A = "a", "Response A on the left"
        B = "b", "Response B on the left"

    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="human_judgements")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="human_judgements")
    assignment = models.OneToOneField(Assignment, on_delete=models.PROTECT,
                                      related_name="human_judgement")
    shown_left = models.CharField(max_length=1, choices=ShownLeft.choices)
    choice = models.CharField(max_length=5, choices=Side.choices)
    criteria = models.JSONField(default=dict, blank=True,
                                help_text='CHIRP criteria, e.g. {"detail": "left"}.')
    rubric_scores = models.JSONField(default=dict, blank=True,
                                     help_text='1-5 per shown side, e.g. {"left": 4, "right": 2}.')
    active_seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["battle", "worker"],
                                    name="human_judgement_once_per_worker"),
        ]

    def __str__(self):
        return f"{self.worker} on battle #{self.battle_id}"

    def winner_side(self, side):
        """'model_a' or 'model_b' for a shown side."""
        on_left = "model_a" if self.shown_left == self.ShownLeft.A else "model_b"
        on_right = "model_b" if on_left == "model_a" else "model_a"
        return on_left if side == Side.LEFT else on_right


class JudgeRun(models.Model):
    """One LLM judge over every battle of a study, with its cost and progress."""

    class Mode(models.TextChoices):
        REFERENCE_FREE = "reference_free", "Text, reference-free (paper Fig. 16)"
        REFERENCE_BACKED = "reference_backed", "Text, reference-backed (paper Fig. 17)"
        VISION = "vision", "Vision, images attached (CHIRP GPT-4V)"
        PROMETHEUS = "prometheus", "Absolute 1-5 scores against a rubric (Prometheus-Vision)"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        # Between the attempts of a job that met a rate limit, an outage or a lost database.
        RETRYING = "retrying", "Retrying"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey(PreferenceStudy, on_delete=models.CASCADE, related_name="judge_runs")
    engine = models.CharField(max_length=200, help_text="The judge model, e.g. gpt-4-0613.")
    base_url_label = models.CharField(max_length=300, blank=True,
                                      help_text="Which server answered (no credentials).")
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.REFERENCE_FREE)
    concurrency = models.PositiveSmallIntegerField(default=0, help_text="0: JUDGE_CONCURRENCY.")
    use_batch_api = models.BooleanField(default=False)
    batch_ids = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    total_calls = models.PositiveIntegerField(default=0)
    done_calls = models.PositiveIntegerField(default=0)
    cached_calls = models.PositiveIntegerField(default=0)
    fallback_calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.engine} ({self.get_mode_display()}) on {self.study}"

    @property
    def judge_name(self):
        return f"{self.engine} ({self.mode})"

    @property
    def progress(self):
        return f"{self.done_calls}/{self.total_calls}"


class JudgeCall(models.Model):
    """A chat completion request and its answer, keyed by the whole request: asking again is free.
    """

    request_sha256 = models.CharField(max_length=64, unique=True)
    request = models.JSONField()
    response = models.JSONField()
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    via_batch = models.BooleanField(default=False)
    # The run that paid for the answer; a run's tokens and cost are the sum of its own calls.
    run = models.ForeignKey(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="paid_calls")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.request.get('model', '?')} call {self.request_sha256[:12]}"


class Judgement(models.Model):
    """One judge answer on a battle in one ordering (and criterion), mapped back to A/B."""

    class Ordering(models.TextChoices):
        AB = "ab", "A shown first"
        BA = "ba", "B shown first"

    class Winner(models.TextChoices):
        A = "a", "Response A"
        B = "b", "Response B"
        TIE = "tie", "Tie / undecided"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="judgements")
    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="judgements")
    ordering = models.CharField(max_length=2, choices=Ordering.choices)
    criterion = models.CharField(max_length=40, default="overall")
    cot = models.TextField(blank=True, help_text="The judge's chain of thought, as it answered.")
    winner = models.CharField(max_length=3, choices=Winner.choices)
    used_fallback = models.BooleanField(default=False)
    refused = models.BooleanField(default=False)
    score_a = models.PositiveSmallIntegerField(null=True, blank=True)
    score_b = models.PositiveSmallIntegerField(null=True, blank=True)
    call = models.ForeignKey(JudgeCall, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    fallback_call = models.ForeignKey(JudgeCall, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    # Prometheus scores each response on its own: `call` scored A, this one scored B.
    call_b = models.ForeignKey(JudgeCall, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "battle", "ordering", "criterion"],
                                    name="judgement_unique_per_ordering"),
        ]

    def __str__(self):
        return f"{self.run.engine} on battle #{self.battle_id} ({self.ordering}, {self.criterion})"


class LeaderboardResult(models.Model):
    """A study's leaderboard as computed once (annotation/leaderboard.py), kept so the dashboard,
    its figures, the API and the command all show the same numbers without rerunning the
    bootstrap. ``data_key`` is a hash of the judgements it was computed from and the parameters,
    so a new or changed judgement makes a new key and the stored result is simply not found."""

    study = models.ForeignKey(PreferenceStudy, on_delete=models.CASCADE, related_name="leaderboard_results")
    criterion = models.CharField(max_length=40)
    rounds = models.PositiveIntegerField()
    data_key = models.CharField(max_length=64)
    result = models.JSONField()
    computed_at = models.DateTimeField(auto_now_add=True)
    seconds = models.FloatField(help_text="How long the computation took.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "criterion", "rounds", "data_key"],
                                    name="leaderboard_result_unique_per_data"),
        ]

    def __str__(self):
        return f"Leaderboard of {self.study} ({self.criterion}, {self.rounds} rounds)"


# --- snapshots: versioned, immutable exports (DESIGN.md step 10) ---


class Snapshot(models.Model):
    """The verified benchmark and the judgements of chosen studies, frozen at one moment.

    A snapshot is written once: its rows may change only while it is being built (through
    QuerySet.update by annotation/snapshots.py); once done or failed, save() and delete() refuse.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    version = models.PositiveIntegerField(unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    note = models.TextField(blank=True)
    studies = models.ManyToManyField(PreferenceStudy, blank=True, related_name="snapshots",
                                     help_text="Studies whose judgements go in; none: no judgements.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent of the files written.")
    progress_message = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    content_sha256 = models.CharField(max_length=64, blank=True,
                                      help_text="sha256 over the data files' names and hashes, in name order.")
    manifest = models.JSONField(default=dict, blank=True)
    files = models.JSONField(default=list, blank=True,
                             help_text="[{name, path, sha256, bytes, rows}] in name order.")
    instance_digests = models.JSONField(default=dict, blank=True,
                                        help_text="Instance id -> sha256 of its exported row, for diffs.")

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="snapshot_version_positive"),
        ]

    def __str__(self):
        return f"Snapshot v{self.version}"

    def save(self, *args, **kwargs):
        if self.pk is not None and self._stored_status() in (self.Status.DONE, self.Status.FAILED):
            from annotation.exceptions import AnnotationError

            raise AnnotationError(f"{self} is immutable: make a new snapshot instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._stored_status() == self.Status.DONE:
            from annotation.exceptions import AnnotationError

            raise AnnotationError(f"{self} is published and immutable; it cannot be deleted.")
        return super().delete(*args, **kwargs)

    @property
    def is_frozen(self):
        return self.status in (self.Status.DONE, self.Status.FAILED)

    def _stored_status(self):
        return type(self).objects.filter(pk=self.pk).values_list("status", flat=True).first()


# --- imported sheets: the layout a published file was written in, kept to write it back ---


class ImportedSheet(models.Model):
    """A sheet file as imported: its layout as written (columns, booleans, line ends).

    Exports write a table in this layout when every instance in it came from sheets of this
    layout, so a published file imported alone comes back byte for byte.
    """

    class Kind(models.TextChoices):
        MULTI_IMAGE = "multi_image", "Multi-image sheet"
        SINGLE_IMAGE = "single_image", "Single-image sheet"
        FULLY_ANNOTATED = "fully_annotated", "Fully annotated example"

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    source_dataset = models.CharField(max_length=200, blank=True)
    columns = models.JSONField(default=list, help_text="The header, as written.")
    boolean_words = models.JSONField(
        default=list, help_text="Per column, how the file spells [true, false]; empty for others.")
    line_terminator = models.CharField(max_length=2, default="\n")
    ends_with_newline = models.BooleanField(default=True)
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.name} ({self.get_kind_display()})"


class ImportedRow(models.Model):
    """One row of an imported sheet and the instance it became (an identical repeat of an earlier
    row points at the same instance), with its cells as written."""

    sheet = models.ForeignKey(ImportedSheet, on_delete=models.CASCADE, related_name="rows")
    number = models.PositiveIntegerField(help_text="The row as a spreadsheet numbers it (header: 1).")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="imported_rows")
    cells = models.JSONField(default=list)

    class Meta:
        ordering = ["sheet_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["sheet", "number"], name="imported_row_number_unique"),
        ]

    def __str__(self):
        return f"Row {self.number} of {self.sheet.name}"
