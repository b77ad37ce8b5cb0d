"""A worker's own record, as our Assignment rows tell it (page 6, "Your work"), with the payment
review of each task where their platform reported it (mturk.Submission)."""

from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q, Sum

from annotation.models import Assignment, Reference, Side, Stage, WorkState
from mturk.models import Submission

RECENT = 50


@dataclass(frozen=True)
class StageTally:
    stage: str
    label: str
    submitted: int
    """Submitted and not rejected: accepted, or not reviewed yet."""
    rejected: int
    in_progress: int
    given_back: int
    active_minutes: float


@dataclass(frozen=True)
class WorkRow:
    stage_label: str
    family: str
    status: str
    submitted_at: object
    active_minutes: float | None
    wrote: str
    """The worker's own text (shown escaped), or their answer for verification."""
    outcome: str
    rejected: bool = False
    review_reason: str = ""
    """Why a reviewer rejected it, as they typed it (shown escaped)."""
    approval: str = ""
    """The payment review of the platform submission holding this task, or "" where none does."""
    approval_note: str = ""


def stage_tallies(worker, *, only=None):
    """Counts per stage; `only`: the assignment ids to count, when not all may be shown."""
    assignments = worker.assignments.all() if only is None else worker.assignments.filter(pk__in=only)
    rows = (
        assignments.values("unit__stage")
        .annotate(
            submitted=Count("pk", filter=Q(status=Assignment.Status.SUBMITTED)
                            & ~Q(work_state=WorkState.REJECTED)),
            rejected=Count("pk", filter=Q(status=Assignment.Status.SUBMITTED, work_state=WorkState.REJECTED)),
            in_progress=Count("pk", filter=Q(status=Assignment.Status.LEASED)),
            given_back=Count("pk", filter=Q(status__in=[Assignment.Status.RETURNED,
                                                        Assignment.Status.EXPIRED])),
            seconds=Sum("active_seconds"),
        )
        .order_by("unit__stage")
    )
    labels = dict(Stage.choices)
    return [
        StageTally(stage=row["unit__stage"], label=labels.get(row["unit__stage"], row["unit__stage"]),
                   submitted=row["submitted"], rejected=row["rejected"], in_progress=row["in_progress"],
                   given_back=row["given_back"], active_minutes=round((row["seconds"] or 0) / 60, 1))
        for row in rows
    ]


def recent_work(worker, limit=RECENT, *, only=None):
    assignments = worker.assignments.all() if only is None else worker.assignments.filter(pk__in=only)
    assignments = (
        assignments.select_related(
            "unit__family", "instruction_submission__instance", "caption__instance",
            "verification__reference", "human_judgement",
        )
        .prefetch_related(Prefetch("platform_submissions",
                                   queryset=Submission.objects.order_by("-id")))
        .order_by("-leased_at")[:limit]
    )
    return [_row(assignment) for assignment in assignments]


def _row(assignment):
    wrote, outcome = "", ""
    if hasattr(assignment, "instruction_submission"):
        instance = assignment.instruction_submission.instance
        wrote, outcome = instance.instruction, instance.get_status_display()
    elif hasattr(assignment, "caption"):
        caption = assignment.caption
        wrote = " / ".join(caption.texts)
        outcome = "Used for the reference" if caption.instance.current_caption_id == caption.pk \
            else caption.instance.get_status_display()
    elif hasattr(assignment, "verification"):
        verification = assignment.verification
        wrote = "Correct" if verification.is_correct else "Incorrect"
        outcome = _verification_outcome(verification)
    elif hasattr(assignment, "human_judgement"):
        judgement = assignment.human_judgement
        wrote = f"Preferred response {1 if judgement.choice == Side.LEFT else 2}"
        outcome = "Saved"
    rejected = assignment.work_state == WorkState.REJECTED
    if rejected:
        # A rejected answer counts in nothing, so what became of its item is not its doing:
        # an agreement with the verdict, or "Used for the reference", would tell the worker otherwise.
        outcome = "Rejected"
    approval, approval_note = _approval(assignment)
    seconds = assignment.active_seconds
    return WorkRow(
        stage_label=assignment.unit.get_stage_display(),
        family=assignment.unit.family.name,
        status=assignment.get_status_display(),
        submitted_at=assignment.submitted_at,
        active_minutes=round(seconds / 60, 1) if seconds is not None else None,
        wrote=wrote,
        outcome=outcome,
        rejected=rejected,
        review_reason=assignment.review_reason if rejected else "",
        approval=approval,
        approval_note=approval_note,
    )


# What a worker is told of a review: "flagged" is the researchers' own triage, not a verdict.
_REVIEW_WORDS = {
    Submission.Review.IN_PROGRESS: "Not submitted on your platform yet",
    Submission.Review.READY: "Waiting for review",
    Submission.Review.FLAGGED: "Waiting for review",
    Submission.Review.APPROVED: "Approved",
    Submission.Review.REJECTED: "Rejected",
}


def _approval(assignment):
    submissions = list(assignment.platform_submissions.all())
    if not submissions:
        return "", ""
    submission = submissions[0]
    note = submission.feedback if submission.review in (Submission.Review.APPROVED,
                                                        Submission.Review.REJECTED) else ""
    return _REVIEW_WORDS.get(submission.review, submission.get_review_display()), note


def _verification_outcome(verification):
    verdict = verification.reference.verdict
    if verdict == Reference.Verdict.PENDING:
        return "Waiting for the other verifiers"
    agreed = (verdict == Reference.Verdict.CORRECT) == verification.is_correct
    return "Agreed with the final verdict" if agreed else "Differed from the final verdict"
