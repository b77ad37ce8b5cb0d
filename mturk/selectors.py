"""Reads of crowd studies that more than one place shows.

`study_figures` is the one computation of a study's submissions and committed spend: the study
list and page, the `study.completed` event and its e-mail all render its result (issue 39), so
they cannot disagree.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Max, Sum
from django.utils import timezone

from annotation.models import Assignment, Worker
from mturk import pay
from mturk.models import AuditLog, Bonus, Hit, StudyCompletion, Submission
from mturk.platforms import backend_class, backend_classes

ZERO = Decimal("0.00")

# A platform's submission that was handed in: waiting for review, flagged, or decided. One the
# participant is still working on, or returned, is not one.
SUBMITTED = [Submission.Review.READY, Submission.Review.FLAGGED, Submission.Review.APPROVED,
             Submission.Review.REJECTED]


@dataclass(frozen=True)
class StudyFigures:
    """A study's submissions and committed spend, with where they were counted.

    `source` is "platform" when the count is the platform's record (the Submission rows a sync
    brought back), "not synced" when the platform has a record we have not fetched yet, so the
    count is ours (the work submitted through the study link here), and "here" for in-house work,
    which has no platform."""

    platform: str
    source: str
    submissions: int
    approved: int | None  # only the platform's record says what was approved
    submitted_here: int  # what our pages stored, whatever the source
    not_in_record: int  # of those, how many the platform's record fetched last did not hold
    synced_at: datetime | None
    published: Decimal  # HITs and places published, at their reward and fees
    owed: Decimal  # the counted submissions not rejected, at their reward and fees
    bonuses: Decimal  # bonuses not failed, with their fees

    @property
    def committed(self):
        """What the study may cost: published work, or the work submitted when more was done
        than was published here (places opened on the platform's own site), and bonuses."""
        return max(self.published, self.owed) + self.bonuses

    @property
    def platform_label(self):
        return Worker.Platform(self.platform).label

    @property
    def submissions_text(self):
        n = self.submissions
        counted = f"{n} submission{'' if n == 1 else 's'}"
        if self.source == "platform":
            when = timezone.localtime(self.synced_at).strftime("%Y-%m-%d %H:%M")
            text = f"{counted} on {self.platform_label} ({self.approved} approved; synced {when})"
            if self.not_in_record:
                text += f"; {self.not_in_record} more submitted here since: sync to count them"
            return text
        if self.source == "here":
            who = "in-house: " if self.platform == Worker.Platform.LOCAL else ""
            return f"{counted} ({who}stored here, no platform to sync)"
        return f"{counted} (submitted through the study link here; not yet synced from {self.platform_label})"

    @property
    def summary(self):
        return f"{self.submissions_text}; ${self.committed:.2f} committed"

    def payload(self):
        """The event's figures, as JSON."""
        return {"submissions": self.submissions, "approved": self.approved, "submissions_source": self.source,
                "committed_usd": f"{self.committed:.2f}", "summary": self.summary}


def study_figures(study):
    """The study's submissions and committed spend, from the platform's record where a sync
    brought one, else from the work submitted through the study link here."""
    backend = backend_classes().get(study.platform)
    syncable = bool(backend and backend.credential_settings)
    here = _submitted_here(study, syncable=syncable)
    synced_at = None
    if syncable:
        synced_at = AuditLog.objects.filter(study=study, action=AuditLog.Action.SYNC, ok=True).aggregate(
            last=Max("created_at"))["last"]
    bill = pay.billing(study.platform)
    bonuses = Bonus.objects.filter(submission__study=study).exclude(status=Bonus.Status.FAILED)
    bonus_total = (bonuses.aggregate(total=Sum("amount_usd"))["total"] or ZERO) + sum(
        (bill.bonus_fee(b.amount_usd) for b in bonuses), ZERO)
    in_record = set(study.submissions.values_list("platform_assignment_id", flat=True))
    common = {"platform": study.platform, "submitted_here": len(here), "synced_at": synced_at,
              "not_in_record": sum(key not in in_record for key, _, _ in here) if synced_at else 0,
              "published": _published(study), "bonuses": bonus_total}
    if synced_at is not None:
        handed_in = study.submissions.filter(review__in=SUBMITTED).select_related("hit")
        rows = list(handed_in)
        paid = [(s.hit.reward_usd if s.hit else study.reward_usd, s.hit.max_assignments if s.hit else 1)
                for s in rows if s.review != Submission.Review.REJECTED]
        return StudyFigures(source="platform", submissions=len(rows),
                            approved=sum(s.review == Submission.Review.APPROVED for s in rows),
                            owed=_cost(study, paid), **common)
    return StudyFigures(source="not synced" if syncable else "here",
                        submissions=len(here), approved=None,
                        owed=_cost(study, [(reward, size) for _, reward, size in here]), **common)


def _submitted_here(study, *, syncable):
    """(platform id, reward, assignments of its HIT) of each submission our pages stored for the
    study: an MTurk assignment of one of its HITs; a Prolific or Connect session that submitted a
    task through the study link or was shown the code; a task an in-house annotator (or a worker
    of another platform with nothing to sync) submitted."""
    submitted = Assignment.objects.filter(status=Assignment.Status.SUBMITTED, unit__stage=study.stage)
    if backend_class(study.platform).publishes_per_unit:
        hits = {hit.hit_id: hit for hit in Hit.objects.filter(study=study).exclude(hit_id="")}
        listings = submitted.filter(platform_listing_id__in=list(hits)).values_list(
            "platform_assignment_id", "platform_listing_id")
        return [(key, hits[hit_id].reward_usd, hits[hit_id].max_assignments) for key, hit_id in listings]
    if not syncable:
        tasks = submitted.filter(worker__platform=study.platform,
                                 unit__family__in=study.families_drawn_on()).count()
        return [("", study.reward_usd, 1)] * tasks
    sessions = set(submitted.filter(platform_listing_id=study.external_id, worker__platform=study.platform)
                   .values_list("worker_id", "platform_assignment_id"))
    sessions |= set(StudyCompletion.objects.filter(study=study).values_list("worker_id", "platform_session_id"))
    return [(session, study.reward_usd, 1) for _, session in sessions]


def _cost(study, rewards):
    """Rewards and fees of submissions paid at `rewards` ((reward, assignments of its HIT) each),
    billed as the study's platform bills them."""
    bill = pay.billing(study.platform)
    if bill.per_assignment:
        return sum((reward + bill.fee_per_assignment(reward=reward, assignments_per_task=size)
                    for reward, size in rewards), ZERO)
    total = sum((reward for reward, _ in rewards), ZERO)
    return total + bill.fees(reward=total, assignments_per_task=1, tasks=1)


def _published(study):
    """Published work at its reward and fees: MTurk bills every HIT's assignments on their own;
    the places of a Prolific or Connect study count as one batch at the study's reward
    (publishing them in several batches can round each batch's fee a cent apart from this)."""
    total = ZERO
    for hit in Hit.objects.filter(study=study).only("reward_usd", "max_assignments"):
        total += pay.batch_cost(platform=study.platform, reward=hit.reward_usd,
                                assignments_per_task=hit.max_assignments, tasks=1)
    if study.places_published:
        total += pay.batch_cost(platform=study.platform, reward=study.reward_usd,
                                assignments_per_task=1, tasks=study.places_published)
    return total


def plan_for_study(study, *, tasks, assignments_per_task=None):
    """The study's plan: its platform, stage, the families it draws on, wage, estimate and budget,
    and, unless `assignments_per_task` says otherwise, its stage's overlap."""
    return pay.plan(platform=study.platform, stage=study.stage, tasks=tasks,
                    assignments_per_task=assignments_per_task, hourly_wage=study.target_hourly_wage_usd,
                    families=study.families_drawn_on(), estimated_seconds=study.estimated_seconds,
                    budget=study.budget_usd, committed=committed_spend(study))


def committed_spend(study):
    """What the study may cost already (study_figures, which every page, event and e-mail showing
    it reads): published work or, when more was submitted than published,
    the submitted work, each billed as its platform bills it, and bonuses."""
    return study_figures(study).committed
