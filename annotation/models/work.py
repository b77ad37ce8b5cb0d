"""Crowd work: the stages, how each runs for a family, its units and the workers' leases on them.

Every crowd stage draws work units from one queue (annotation/crowdwork/queue.py); an assignment is one
worker's lease on one unit.
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.model_checks import CheckedFields
from annotation.models.families import InstructionFamily
from annotation.models.instances import Instance
from annotation.models.workers import Worker


class Stage(models.TextChoices):
    INSTRUCTION_GENERATION = "instruction_generation", "Instruction generation"
    CAPTION = "caption", "Instruction-conditioned caption"
    VERIFICATION = "verification", "Verification"
    PAIRWISE = "pairwise", "Pairwise preference"


class WorkUnit(CheckedFields, models.Model):
    """One item of crowd work in a stage, answered by `overlap` different workers.

    `key` is the unit's identity, made from facts that do not change while the unit is worked on
    (a family's slot number, an instance's caption round, a reference, a battle: see
    annotation/crowdwork/stages.py), so making a stage's units again, from a sweep, a retried job
    or a second click, never makes one twice.
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
    battle = models.ForeignKey("Battle", null=True, blank=True, on_delete=models.CASCADE,
                               related_name="work_units")
    overlap = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    # Made beyond what its stage asked, by a version that keyed caption units by the captions
    # already in (migration 0012 found and closed them): its answers were paid for and are kept,
    # and `manage.py surplus_work` reports them for the researcher to decide on.
    surplus = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["stage", "key"], name="work_unit_key_unique"),
            models.CheckConstraint(condition=Q(overlap__gte=1), name="work_unit_overlap_positive",
                                   violation_error_message="A task asks at least one answer."),
        ]
        indexes = [
            models.Index(fields=["stage", "status", "id"], name="work_unit_queue_idx"),
            # The admin finds a unit by its key, pasted whole, without its stage.
            models.Index(fields=["key"], name="work_unit_key_idx"),
            # A study's queue is one family's: its open units in order, so the first with room ends
            # the scan. Without it PostgreSQL, taking family, stage and status for independent,
            # expects two rows where a launched family has thousands, and checks every one of them
            # (each with its anti-join and slot count) before sorting: 28 ms at 1,246 open units on
            # the campaign-sized world, 0.5 ms with it and assignment_worker_status_idx (benchmarks/README.md).
            models.Index(fields=["family", "stage", "status", "id"], name="work_unit_family_queue_idx"),
        ]

    def __str__(self):
        return f"{self.get_stage_display()} {self.key}"


class WorkState(models.TextChoices):
    """What a submitted answer is worth (DESIGN: "Whose work counts"). Every answer starts
    provisional; a reviewer, the platform's approval or a failed identity check moves it on.
    Answers made by researchers or imports have no assignment and count as accepted."""

    PROVISIONAL = "provisional", "Provisional"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"


def counted_work(*, assignment="assignment", provisional_counts):
    """A Q for the answers that count, reached through their `assignment` path: accepted ones,
    provisional ones where `provisional_counts` says (True, False, or the path of the setting that
    says, e.g. "battle__tournament__counts_provisional"), and the researchers' and imports', which
    have no assignment."""
    counted = Q(**{f"{assignment}__isnull": True}) | Q(**{f"{assignment}__work_state": WorkState.ACCEPTED})
    if provisional_counts is True:
        return counted | Q(**{f"{assignment}__work_state": WorkState.PROVISIONAL})
    if provisional_counts is False:
        return counted
    return counted | Q(**{f"{assignment}__work_state": WorkState.PROVISIONAL, provisional_counts: True})


def unreviewed_answers(*, path=""):
    """A Q for submitted answers still waiting for a review (provisional), reached through `path`
    (e.g. "assignments" from a unit), or of Assignment rows themselves."""
    prefix = f"{path}__" if path else ""
    return Q(**{f"{prefix}status": Assignment.Status.SUBMITTED, f"{prefix}work_state": WorkState.PROVISIONAL})


def counted_verifications():
    """A Q for the verification votes that count, over Verification rows of any family at once:
    `counted_work`, with provisional votes left out where their family's verification stage counts
    only accepted answers (StageConfig.counts_provisional; a family without one counts them, as
    its stage's default does). The rule annotation/worker_models.py verification_frame fits on."""
    strict_families = StageConfig.objects.filter(stage=Stage.VERIFICATION, counts_provisional=False)
    return counted_work(provisional_counts=True) & ~(
        Q(assignment__work_state=WorkState.PROVISIONAL)
        & Q(reference__instance__family__in=strict_families.values("family_id"))
    )


class AssignmentQuerySet(models.QuerySet):
    def holding_a_slot(self, now=None):
        """Assignments that count against a unit's overlap: submitted and not rejected, or leased
        and not expired. A rejected answer gives its slot back, so its unit asks someone else."""
        now = now or timezone.now()
        return self.filter(
            Q(status=Assignment.Status.SUBMITTED) & ~Q(work_state=WorkState.REJECTED)
            | Q(status=Assignment.Status.LEASED, lease_expires_at__gt=now)
        )

    def answered(self):
        """Submitted answers that still fill their unit: not rejected."""
        return self.filter(status=Assignment.Status.SUBMITTED).exclude(work_state=WorkState.REJECTED)


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
    # What the platform calls this piece of work, kept so its review and pay find it: MTurk's
    # assignment and HIT, Prolific's session and study, Connect's assignment and project.
    platform_assignment_id = models.CharField(max_length=128, blank=True)
    platform_listing_id = models.CharField(max_length=128, blank=True)
    # Review of the answer (annotation/crowdwork/review.py): its state, why, by whom and when. A reviewer's
    # rejection, the platform's rejection and a failed identity check ("quarantined") all reject.
    work_state = models.CharField(max_length=12, choices=WorkState.choices, default=WorkState.PROVISIONAL)
    review_reason = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    # When the platform's own record (a submitted MTurk assignment, a Prolific submission, a Connect
    # participant) named this worker for this work; in-house work is confirmed by the login.
    confirmed_at = models.DateTimeField(null=True, blank=True)

    objects = AssignmentQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            # A worker never gets the same unit twice, whatever the race.
            models.UniqueConstraint(fields=["unit", "worker"], name="assignment_unit_worker_unique"),
        ]
        indexes = [
            models.Index(fields=["unit", "status"], name="assignment_unit_status_idx"),
            # A worker's leases held or lapsed in a stage, which every next unit asks after: a worker
            # averages 135 assignments on the campaign-sized world, so without the status beside the
            # worker PostgreSQL found them from the family's open units instead (7 ms against 0.1 ms).
            models.Index(fields=["worker", "status"], name="assignment_worker_status_idx"),
            # The leaderboard's fingerprint finds the few judgements their state leaves out through it.
            models.Index(fields=["work_state"], name="assignment_work_state_idx"),
        ]

    def __str__(self):
        return f"{self.unit} → {self.worker}"


class Answer(Assignment):
    """A submitted assignment seen as the answer it holds, for review (annotation/crowdwork/review.py)."""

    class Meta:
        proxy = True
        verbose_name = "answer to review"
        verbose_name_plural = "answers to review"


class Aggregation(models.TextChoices):
    """How a verification stage turns its counted answers into a reference's decision
    (DESIGN: "worker model"). Votes apply the stage's verification rule at once; a worker model
    (crowd-kit's) is fitted over every counted verification answer by a background job
    (annotation/worker_models.py), which weighs each worker by their estimated reliability."""

    VOTES = "votes", "Votes, counted by the verification rule (no worker model)"
    DAWID_SKENE = "dawid_skene", "Dawid-Skene worker model (crowd-kit)"
    GLAD = "glad", "GLAD worker model (crowd-kit)"
    MACE = "mace", "MACE worker model (crowd-kit)"


class StageConfig(CheckedFields, models.Model):
    """How a crowd stage runs for one family: overlap, lease, and whether it is launched."""

    class VerificationRule(models.TextChoices):
        UNANIMOUS = "unanimous", "All verifiers must mark it correct"
        MAJORITY = "majority", "A strict majority must mark it correct"
        ANY = "any", "One verifier marking it correct is enough"

    class Stopping(models.TextChoices):
        AGREEMENT = "agreement", "Enough verifiers agree"
        WORKER_ACCURACY = "worker_accuracy", "Probable enough, each verifier weighed by their accuracy"
        WORKER_ACCURACY_BY_VERDICT = "accuracy_by_verdict", "Probable enough, weighed by accuracy on each verdict"

    # The stopping rules that weigh each verifier by their accuracy (annotation/crowdwork/stopping.py).
    WEIGHED_STOPPING = (Stopping.WORKER_ACCURACY, Stopping.WORKER_ACCURACY_BY_VERDICT)

    class IncorrectAction(models.TextChoices):
        DISCARD = "discard", "Discard the instance (as in the paper)"
        RECAPTION = "recaption", "Send back for a new caption when the caption was the problem"

    family = models.ForeignKey(InstructionFamily, on_delete=models.CASCADE, related_name="stage_configs")
    stage = models.CharField(max_length=30, choices=Stage.choices)
    overlap = models.PositiveSmallIntegerField(
        default=1, help_text="Answers asked per task; with “ask until decided”, the most it may ask.")
    lease_minutes = models.PositiveIntegerField(default=30)
    launched_at = models.DateTimeField(null=True, blank=True)
    adaptive = models.BooleanField(
        "ask until decided", default=False,
        help_text="Verification: stop asking once enough verifiers agree (“agree to decide”, e.g. two), "
                  "and ask one more at a time while they disagree, up to the overlap (e.g. three). "
                  "The verdict is what the agreeing verifiers said.")
    agree_to_decide = models.PositiveSmallIntegerField(
        default=2, help_text="With “ask until decided”: how many agreeing verifiers decide a reference.")
    stopping = models.CharField(
        "decided when", max_length=20, choices=Stopping.choices, default=Stopping.AGREEMENT,
        help_text="With “ask until decided”: stop when enough verifiers agree (“agree to decide”), or "
                  "weigh each verifier by how often they are right (from their gold answers, else from the "
                  "worker model once it has seen enough of their answers, else the “prior accuracy”) and stop "
                  "once the verdict is at least as probable as the “posterior threshold”. Weighed, one answer "
                  "of a verifier known to be very good can decide, and a poor verifier's answers ask for more, "
                  "up to the overlap; the verdict is the more probable one. Weighed by verdict, a verifier's "
                  "accuracy on sound and on flawed references counts apart (many pass a flawed one more often "
                  "than they fail a sound one), starting from how common sound references are, as the worker "
                  "model estimates it: on real yes/no crowds it bought the same accuracy with fewer answers, "
                  "and it is as good as that estimate. Replay your last campaign to choose "
                  "(manage.py replay_answers --family NAME).")
    posterior_threshold = models.FloatField(
        default=0.95, help_text="With “ask until decided” weighed by accuracy: how probable the verdict must be "
                                "to stop asking (between 0.5 and 1; 0.95 means wrong about one time in twenty, "
                                "if the accuracies are right).")
    prior_accuracy = models.FloatField(
        "prior accuracy", default=0.7,
        help_text="With “ask until decided” weighed by accuracy: how often a verifier is taken to be right "
                  "before there is evidence of their own (between 0.5 and 1). Evidence is pulled toward it "
                  "as if it were worth four answers.")
    verification_rule = models.CharField(max_length=20, choices=VerificationRule.choices,
                                         default=VerificationRule.UNANIMOUS)
    on_incorrect = models.CharField(max_length=20, choices=IncorrectAction.choices,
                                    default=IncorrectAction.DISCARD)
    max_caption_rounds = models.PositiveSmallIntegerField(default=2)
    counts_provisional = models.BooleanField(
        default=True, help_text="Provisional answers (not yet reviewed) count in decisions, Table 2 and "
                                "snapshots. Untick to count only accepted answers: decisions then wait "
                                "for review.")
    aggregation = models.CharField(
        max_length=20, choices=Aggregation.choices, default=Aggregation.VOTES,
        help_text="Verification: how counted answers decide a reference. A worker model decides in a "
                  "background job, a few minutes after a reference's answers are in; references decided "
                  "keep their decision until a snapshot publishes them; a later fit may revise "
                  "the others, and each change is recorded.")
    model_min_answers = models.PositiveSmallIntegerField(
        "a worker model's minimum answers per worker", default=5,
        help_text="Verification under a worker model: the model's label decides a reference only when every "
                  "verifier of it has at least this many counted answers in the fit (or a known accuracy on "
                  "gold items). Otherwise the verification rule decides from the votes. Ask until decided "
                  "weighed by accuracy takes a verifier's accuracy from gold, or from the worker model, only "
                  "once it rests on at least this many answers.")
    model_min_posterior = models.FloatField(
        "a worker model's minimum posterior", default=0.6,
        help_text="Verification under a worker model: the model's label decides a reference only when its "
                  "posterior probability reaches this. Otherwise the verification rule decides from the votes.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["family", "stage"], name="stage_config_unique"),
            models.CheckConstraint(condition=Q(overlap__gte=1), name="stage_config_overlap_positive",
                                   violation_error_message="A task asks at least one answer."),
            models.CheckConstraint(condition=Q(agree_to_decide__gte=1), name="stage_config_agree_to_decide_positive",
                                   violation_error_message="At least one verifier agrees to decide."),
            models.CheckConstraint(condition=Q(posterior_threshold__gt=0.5, posterior_threshold__lt=1),
                                   name="stage_config_posterior_threshold_between",
                                   violation_error_message="The posterior threshold is between 0.5 and 1, e.g. 0.95."),
            models.CheckConstraint(condition=Q(prior_accuracy__gt=0.5, prior_accuracy__lt=1),
                                   name="stage_config_prior_accuracy_between",
                                   violation_error_message=("The prior accuracy is between 0.5 and 1, e.g. 0.7: below "
                                                            "a half, a verifier would count against what they said.")),
        ]

    def __str__(self):
        return f"{self.family} / {self.get_stage_display()}"

    def clean(self):
        if self.stage == Stage.INSTRUCTION_GENERATION and self.overlap != 1:
            raise ValidationError({"overlap": "Each instruction-generation task is one new instance written "
                                              "by one worker, so its overlap is 1: to collect more "
                                              "instances, raise the family's target instead."})
        if self.adaptive:
            self._check_adaptive()

    def _check_adaptive(self):
        if self.stage != Stage.VERIFICATION:
            raise ValidationError({"adaptive": "“Ask until decided” is a verification setting; a tournament "
                                               "says when its battles are decided."})
        if self.stopping in self.WEIGHED_STOPPING:
            return
        if self.agree_to_decide < 2:
            raise ValidationError({"agree_to_decide": "At least two verifiers must agree to decide: one answer "
                                                      "alone is what a fixed overlap of 1 asks."})
        # Yes/no answers always hold a majority of 2 × agree − 1, so a larger overlap is never reached.
        most = 2 * self.agree_to_decide - 1
        if not self.agree_to_decide <= self.overlap <= most:
            raise ValidationError({"overlap": f"With “ask until decided” and {self.agree_to_decide} agreeing to "
                                              f"decide, the overlap (the most it asks) is between "
                                              f"{self.agree_to_decide} and {most}."})
