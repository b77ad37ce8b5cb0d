"""Confirmed participants (DESIGN: "Whose work counts"). A worker id in a link is a claim: work done
under it counts as that worker's once the platform's own record names them for it (a submitted
MTurk assignment, a Prolific submission, a Connect assignment), and is *confirmed*. Work that the
record contradicts (MTurk lists the assignment under another worker: someone opened the HIT with
another's workerId), or that the platform never shows (a participant id the study never had), is
*quarantined*: rejected with the reason, out of every count, and its task asked again of someone
else (annotation/crowdwork/review.py). Run by every sync.
"""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotation.crowdwork import review
from annotation.models import (
    Assignment,
    Caption,
    HumanJudgement,
    Instance,
    Verification,
    Worker,
    WorkState,
)
from mturk.platforms import backend_class

QUARANTINED = "Quarantined: "


@dataclass
class Confirmation:
    confirmed: int = 0
    quarantined: int = 0


def confirm_and_quarantine(*, study, records, hits=None):
    """Confirm or quarantine the study's submitted work against the platform's `records` (the
    PlatformRecords one sync brought back; MTurk's for `hits`)."""
    if backend_class(study.platform).publishes_per_unit:
        return _check_mturk(study.platform, records, hits or [])
    return _check_participants(study, records)


def _check_mturk(platform, records, hits):
    named = {record.assignment_id: record.worker_id for record in records}
    ours = (Assignment.objects.filter(unit__in=[hit.unit_id for hit in hits],
                                      platform_listing_id__in=[hit.hit_id for hit in hits],
                                      status=Assignment.Status.SUBMITTED)
            .exclude(platform_assignment_id="").exclude(work_state=WorkState.REJECTED).select_related("worker"))
    outcome = Confirmation()
    for assignment in ours:
        worker_id = named.get(assignment.platform_assignment_id)
        if worker_id is None:
            continue  # MTurk lists an assignment only once it is submitted there
        if worker_id == assignment.worker.external_id:
            outcome.confirmed += _confirm(assignment)
            continue
        _quarantine(assignment, f"MTurk's record of assignment {assignment.platform_assignment_id} names "
                                "another worker: this HIT was opened here with a workerId that was not the "
                                "accepting worker's.", unbind=True)
        _attribute_to(assignment, platform, worker_id)
        outcome.quarantined += 1
    return outcome


def _attribute_to(assignment, platform, external_id):
    """The quarantined answer was the accepting worker's, typed in under another's id: it becomes
    theirs (rejected), so the worker whose id was used may still do the HIT as themselves. Left
    where it is when the accepting worker already has an answer on the same task."""
    accepted_by, _ = Worker.objects.get_or_create(platform=platform, external_id=external_id)
    if Assignment.objects.filter(unit_id=assignment.unit_id, worker=accepted_by).exists():
        return
    claimed = assignment.worker_id
    Assignment.objects.filter(pk=assignment.pk).update(worker=accepted_by)
    Caption.objects.filter(assignment=assignment.pk, author_id=claimed).update(author=accepted_by)
    Verification.objects.filter(assignment=assignment.pk, worker_id=claimed).update(worker=accepted_by)
    HumanJudgement.objects.filter(assignment=assignment.pk, worker_id=claimed).update(worker=accepted_by)
    Instance.objects.filter(instruction_submission__assignment=assignment.pk, author_id=claimed) \
        .update(author=accepted_by)


def _check_participants(study, records):
    session_of = {record.assignment_id: record.worker_id for record in records}
    listed = {record.worker_id for record in records}
    ours = (Assignment.objects.filter(platform_listing_id=study.external_id, unit__stage=study.stage,
                                      worker__platform=study.platform, status=Assignment.Status.SUBMITTED)
            .exclude(work_state=WorkState.REJECTED).select_related("worker"))
    outcome = Confirmation()
    for assignment in ours:
        participant = assignment.worker.external_id
        named = session_of.get(assignment.platform_assignment_id)
        if participant not in listed:
            why = (f"{study.get_platform_display()} has no record of participant {participant} in this "
                   "study: the id was typed into the study link, not given by the platform.")
        elif named is not None and named != participant:
            why = (f"{study.get_platform_display()}'s session {assignment.platform_assignment_id} belongs to "
                   "another participant.")
        else:
            outcome.confirmed += _confirm(assignment)
            continue
        _quarantine(assignment, why)
        outcome.quarantined += 1
    return outcome


def _confirm(assignment):
    if assignment.confirmed_at is not None:
        return 0
    return Assignment.objects.filter(pk=assignment.pk, confirmed_at__isnull=True).update(confirmed_at=timezone.now())


def _quarantine(assignment, why, *, unbind=False):
    with transaction.atomic():
        review.reject_work(assignments=[assignment], reason=QUARANTINED + why)
        if unbind:
            # The assignment id is the accepting worker's, who may now open their own HIT here.
            Assignment.objects.filter(pk=assignment.pk).update(platform_assignment_id="")
