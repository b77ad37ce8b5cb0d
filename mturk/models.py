"""Crowd platforms: where a stage's work is published and how its workers come back to us.

Platform worker ids (Worker.external_id) are kept as they are because payment needs them; every
export, report and admin list outside payment shows `Worker.pseudonym` instead.
"""

import hashlib
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from annotation.model_checks import CheckedFields, StorableJSONField
from annotation.models import Assignment, InstructionFamily, Stage, Worker, WorkUnit


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
                               help_text="Leave empty to draw work from every family of no research group.")
    name = models.CharField(max_length=200)
    external_id = models.CharField(
        max_length=128, blank=True,
        help_text="The study's id on its platform: a CloudResearch project, a Prolific study or a Toloka pool. "
                  "(An MTurk study's HIT type changes with its reward, so it is kept in hit_type_id.)",
    )
    completion_code = models.CharField(max_length=64, blank=True)
    reward_usd = models.DecimalField(max_digits=8, decimal_places=2, default=Decimal("0.00"))
    budget_usd = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True,
                                     help_text="Publishing stops once planned spend would pass it.")
    created_at = models.DateTimeField(auto_now_add=True)

    # What workers see of the task (MTurk HIT type; the other platforms show their own listing).
    title = models.CharField(max_length=128, blank=True, help_text="Defaults to the name.")
    description = models.TextField(blank=True, max_length=2000)
    keywords = models.CharField(max_length=1000, blank=True, help_text="Comma-separated.")
    assignment_duration_minutes = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(1), MaxValueValidator(365 * 24 * 60)])
    lifetime_hours = models.PositiveIntegerField(
        default=72, validators=[MinValueValidator(1), MaxValueValidator(365 * 24)])
    auto_approval_days = models.PositiveIntegerField(
        default=3, validators=[MaxValueValidator(30)],
        help_text="Days after which the platform approves submitted work by itself; review before then.")
    frame_height = models.PositiveIntegerField(default=0, help_text="0: the full window.")
    worker_countries = models.CharField(max_length=200, default="US", blank=True,
                                        help_text="ISO country codes, comma-separated; empty: any.")
    min_approval_rate = models.PositiveSmallIntegerField(
        default=98, validators=[MaxValueValidator(100)])
    min_approved_hits = models.PositiveIntegerField(default=1000)
    requires_stage_qualification = models.BooleanField(
        default=True, help_text="Only workers who passed the stage's qualification test.")
    # Pay planning (paper §2.2: $18/h; CHIRP C.2.2: $0.10/min).
    target_hourly_wage_usd = models.DecimalField(max_digits=6, decimal_places=2,
                                                 default=Decimal("18.00"))
    estimated_seconds = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Time per task used for pay until enough work has been measured.")
    hit_type_id = models.CharField(max_length=64, blank=True, editable=False)
    hit_type_environment = models.CharField(max_length=12, blank=True, editable=False)
    hit_type_signature = models.CharField(max_length=64, blank=True, editable=False)
    places_published = models.PositiveIntegerField(
        default=0, help_text="CloudResearch, Prolific and Toloka: places recorded here against the budget. "
                             "Nothing is sent: open them on the platform's own site.")

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

    @property
    def hit_title(self):
        return self.title or self.name

    def families_drawn_on(self):
        """The families whose work the study publishes and plans pay from: its family or, when it
        names none, every family of no research group. A study belongs to its family's group
        (annotation/teams.py), so one naming no family is of no group, and draws on what no group
        owns, as a tournament of no group does (issue 37): another group's work is never published,
        priced or paid through it."""
        if self.family_id:
            return InstructionFamily.objects.filter(pk=self.family_id)
        return InstructionFamily.objects.filter(group__isnull=True)


class Environment(models.TextChoices):
    SANDBOX = "sandbox", "Sandbox"
    PRODUCTION = "production", "Production"


class Hit(CheckedFields, models.Model):
    """An MTurk HIT: one work unit, its overlap as MaxAssignments."""

    class Status(models.TextChoices):
        CREATING = "creating", "Being created"
        OPEN = "open", "Open"
        EXPIRED = "expired", "Expired"

    study = models.ForeignKey(CrowdStudy, on_delete=models.PROTECT, related_name="hits")
    unit = models.ForeignKey(WorkUnit, on_delete=models.PROTECT, related_name="hits")
    hit_id = models.CharField(max_length=64, blank=True)
    hit_type_id = models.CharField(max_length=64, blank=True)
    environment = models.CharField(max_length=12, choices=Environment.choices)
    max_assignments = models.PositiveSmallIntegerField()
    reward_usd = models.DecimalField(max_digits=8, decimal_places=2)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CREATING)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "HIT"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "unit"], name="hit_one_per_study_unit"),
            models.UniqueConstraint(fields=["hit_id"], condition=~Q(hit_id=""), name="hit_id_unique"),
            models.CheckConstraint(condition=Q(max_assignments__gte=1), name="hit_assignments_positive",
                                   violation_error_message="A HIT asks at least one assignment."),
        ]

    def __str__(self):
        return self.hit_id or f"HIT for {self.unit} (being created)"

    @property
    def request_token(self):
        # Deterministic, so a retried CreateHIT (a crash, a timeout) never makes a second HIT.
        return f"crowdbench-hit-{self.study_id}-{self.unit_id}"


class Submission(models.Model):
    """A worker's work as their platform sees it: an MTurk assignment, a Connect assignment or a
    Prolific submission, reconciled with what our pages stored (`assignments`).

    Keyed by (platform assignment id, worker): MTurk reuses an assignment id after a worker
    returns a HIT.
    """

    class Review(models.TextChoices):
        IN_PROGRESS = "in_progress", "Not submitted yet"
        READY = "ready", "Ready for review (our checks passed)"
        FLAGGED = "flagged", "Flagged: nothing or something wrong on our side"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    study = models.ForeignKey(CrowdStudy, on_delete=models.PROTECT, related_name="submissions")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="platform_submissions")
    hit = models.ForeignKey(Hit, null=True, blank=True, on_delete=models.PROTECT,
                            related_name="submissions")
    platform_assignment_id = models.CharField(
        max_length=128, blank=True,
        help_text="MTurk AssignmentId, Connect assignmentId or Prolific submission id.")
    session_id = models.CharField(max_length=128, blank=True,
                                  help_text="Prolific SESSION_ID as the study link brought it.")
    assignments = models.ManyToManyField(Assignment, blank=True, related_name="platform_submissions")
    platform_status = models.CharField(max_length=30, blank=True)
    review = models.CharField(max_length=12, choices=Review.choices, default=Review.IN_PROGRESS)
    flag_reason = models.TextField(blank=True)
    feedback = models.TextField(blank=True, help_text="What the worker was told on approval or rejection.")
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    platform_record = StorableJSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "platform_assignment_id", "worker"],
                                    name="submission_key_unique"),
        ]

    def __str__(self):
        return f"{self.platform_assignment_id or 'session'} by {self.worker}"


class StudyCompletion(models.Model):
    """A study participant was shown the study's completion code in one platform session: that
    session's work is done. Opening the study link again in it shows the code again and hands out
    no more tasks; only a new session the platform confirms (a new Prolific submission, a new
    Connect assignment) is given tasks again."""

    study = models.ForeignKey(CrowdStudy, on_delete=models.PROTECT, related_name="completions")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="study_completions")
    platform_session_id = models.CharField(
        max_length=128, blank=True,
        help_text="Prolific SESSION_ID or Connect assignmentId; empty when the link carried none.")
    shown_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "worker", "platform_session_id"],
                                    name="study_completion_once_per_session"),
        ]

    def __str__(self):
        return f"{self.worker} finished {self.study}"


class Bonus(CheckedFields, models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Not paid yet"
        SET_UP = "set_up", "Set up on Prolific, not paid yet"
        PAYING = "paying", "Pay request sent; outcome unknown (check on the platform)"
        PAID = "paid", "Paid"
        FAILED = "failed", "Failed"

    submission = models.ForeignKey(Submission, on_delete=models.PROTECT, related_name="bonuses")
    amount_usd = models.DecimalField(max_digits=8, decimal_places=2)
    reason = models.TextField(help_text="Shown to the worker.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    platform_reference = models.CharField(max_length=128, blank=True,
                                          help_text="Prolific bulk bonus payment id.")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "bonuses"
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount_usd__gt=0), name="bonus_amount_positive",
                                   violation_error_message="A bonus is more than $0."),
        ]

    def __str__(self):
        return f"${self.amount_usd} to {self.submission.worker}"

    @property
    def request_token(self):
        # Derived from our row, so retrying SendBonus for this bonus can never pay twice.
        return f"crowdbench-bonus-{self.pk}"


class AuditLog(models.Model):
    """Every platform action (publish, sync, approve, reject, bonus, block, ...): who, when, how
    much, every call it made of the platform with its request and answer or error, and whether
    anything was sent at all (places recorded here, or a call refused for want of credentials,
    never reached the platform)."""

    class Action(models.TextChoices):
        PUBLISH = "publish", "Publish"
        SYNC = "sync", "Sync"
        APPROVE = "approve", "Approve"
        REJECT = "reject", "Reject"
        BONUS = "bonus", "Bonus"
        BLOCK = "block", "Block"
        NOTIFY = "notify", "Notify"
        EXPIRE = "expire", "Expire"
        EXTEND = "extend", "Extend"
        QUALIFY = "qualify", "Grant qualification"

    action = models.CharField(max_length=10, choices=Action.choices)
    platform = models.CharField(max_length=20, choices=Worker.Platform.choices)
    study = models.ForeignKey(CrowdStudy, null=True, blank=True, on_delete=models.PROTECT,
                              related_name="audit_log")
    worker = models.ForeignKey(Worker, null=True, blank=True, on_delete=models.PROTECT,
                               related_name="+")
    submission = models.ForeignKey(Submission, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="audit_log")
    amount_usd = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.PROTECT, related_name="+")
    ok = models.BooleanField()
    sent_to_platform = models.BooleanField(
        default=True, help_text="Whether any request of this action reached the platform.")
    request = StorableJSONField(default=dict, blank=True)
    response = StorableJSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [
            ("pay_workers", "Can approve, reject, bonus, block and notify crowd workers"),
        ]

    def __str__(self):
        outcome = "ok" if self.ok else "failed"
        return f"{self.get_action_display()} ({outcome}{'' if self.sent_to_platform else ', nothing sent'})"


class NotificationEvent(models.Model):
    """An MTurk notification already handled; they can arrive more than once."""

    event_doc_id = models.CharField(max_length=128, unique=True)
    payload = StorableJSONField()
    received_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.event_doc_id


def short_hash(*parts):
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:32]
