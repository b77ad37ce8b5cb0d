"""Bringing submitted work back from the platforms: syncing studies (also on a schedule) and
MTurk's notifications."""

import json
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import Assignment, Worker
from mturk import client as mturk_client
from mturk.exceptions import PlatformError
from mturk.models import AuditLog, CrowdStudy, Hit, NotificationEvent, Submission
from mturk.platforms import backend_class, get_backend
from mturk.platforms.base import State
from mturk.services.audit import audited, jsonable
from mturk.services.confirming import confirm_and_quarantine
from mturk.services.reviewing import answers_follow

logger = logging.getLogger(__name__)


def sync_study(*, study, hits=None, actor=None):
    """Reconcile the platform's list of work with what our pages stored. Returns counts by review.
    The calls it made, and what they brought back, are audited whatever the platform answers."""
    backend = get_backend(study.platform)
    if not backend.credential_settings:
        raise PlatformError(f"Nothing to sync: {backend.label} work is stored here as it is "
                            "submitted, with no platform to ask.")
    if hits is None and backend.publishes_per_unit:
        hits = list(study.hits.filter(status__in=[Hit.Status.OPEN, Hit.Status.EXPIRED])
                    .exclude(hit_id="").select_related("unit"))
        if not hits:
            raise PlatformError("Nothing to sync: the study has no HITs on MTurk yet, so nothing "
                                "was asked of MTurk.")
    with audited(action=AuditLog.Action.SYNC, study=study, actor=actor,
                 request={"hits": [hit.hit_id for hit in hits]} if hits is not None else {}) as step:
        records = backend.records(study, hits=hits)
        hits_by_id = {hit.hit_id: hit for hit in (hits or [])}
        counts = {}
        for record in records:
            submission = _reconcile(study, record, hits_by_id.get(record.hit_id))
            counts[submission.review] = counts.get(submission.review, 0) + 1
        checked = confirm_and_quarantine(study=study, records=records, hits=hits)
        if checked.quarantined:
            counts["quarantined"] = checked.quarantined
        step.response = {"records": len(records), "by_review": counts, "confirmed": checked.confirmed,
                         "quarantined": checked.quarantined}
    now = timezone.now()
    if hits:
        Hit.objects.filter(pk__in=[h.pk for h in hits]).update(last_synced_at=now)
    return counts


def _reconcile(study, record, hit):
    worker, _ = Worker.objects.get_or_create(platform=study.platform, external_id=record.worker_id)
    with transaction.atomic():
        submission = (Submission.objects.select_for_update()
                      .filter(study=study, worker=worker, platform_assignment_id=record.assignment_id)
                      .first())
        if submission is None:
            submission = Submission(study=study, worker=worker)
        submission.platform_assignment_id = record.assignment_id
        submission.hit = hit or submission.hit
        submission.platform_status = record.platform_status
        submission.submitted_at = record.submitted_at or submission.submitted_at
        submission.platform_record = jsonable(record.raw)
        decided_there = False
        if record.state == State.APPROVED and submission.review != Submission.Review.APPROVED:
            submission.review = Submission.Review.APPROVED
            submission.feedback = submission.feedback or "Approved on the platform (e.g. auto-approval)."
            decided_there = True
        elif record.state == State.REJECTED and submission.review != Submission.Review.REJECTED:
            submission.review = Submission.Review.REJECTED
            decided_there = True
        elif record.state == State.SUBMITTED and submission.review in (
                Submission.Review.IN_PROGRESS, Submission.Review.READY, Submission.Review.FLAGGED):
            submission.save()
            problems = _attach_and_check(submission, hit)
            submission.review = Submission.Review.FLAGGED if problems else Submission.Review.READY
            submission.flag_reason = "; ".join(problems)
        submission.save()
        if decided_there and submission.pk:
            # Approved or rejected on the platform's own page: its answers follow.
            answers_follow(submission, actor=None)
    return submission


def _attach_and_check(submission, hit):
    """Link our stored assignments to the platform's record; the problems that stop approval."""
    worker = submission.worker
    if backend_class(submission.study.platform).publishes_per_unit:
        if hit is None:
            return ["the assignment is of a HIT we did not publish"]
        ours = Assignment.objects.filter(unit=hit.unit, worker=worker).first()
        if ours is None:
            return ["submitted on MTurk, but our pages stored nothing for this worker on this HIT"]
        if ours.platform_assignment_id and ours.platform_assignment_id != submission.platform_assignment_id:
            return [f"our task was stored under assignment {ours.platform_assignment_id}, not this one"]
        submission.assignments.set([ours])
        if ours.status != Assignment.Status.SUBMITTED:
            return [f"our task is {ours.get_status_display().lower()}, not submitted"]
        return []
    study = submission.study
    # The study page stores the study's platform id on every assignment done through the link.
    ours = Assignment.objects.filter(worker=worker, unit__stage=study.stage,
                                     platform_listing_id=study.external_id,
                                     status=Assignment.Status.SUBMITTED)
    ours = ours.exclude(platform_submissions__in=study.submissions.exclude(pk=submission.pk))
    submission.assignments.add(*ours)
    if not submission.assignments.exists():
        return ["completed on the platform, but our pages stored no submitted work for this participant"]
    return []


def sync_open_studies():
    """The periodic job: every study with open HITs or places whose platform can be asked (one
    without credentials would only fail, every few minutes; its study page says what to set)."""
    done = {}
    studies = CrowdStudy.objects.filter(
        Q(hits__status=Hit.Status.OPEN) | Q(places_published__gt=0)).distinct()
    for study in studies:
        backend = get_backend(study.platform)
        if not backend.credential_settings:
            continue
        if missing := backend.missing_credentials():
            done[study.pk] = {"skipped": f"{' and '.join(missing)} not set"}
            continue
        try:
            done[study.pk] = sync_study(study=study)
        except PlatformError as error:
            logger.warning("Sync of %s failed: %s", study, error)
            done[study.pk] = {"error": str(error)}
    return done


def handle_mturk_notification(body):
    """Sync the HITs a notification names, once per EventDocId (notifications can repeat and
    carry no WorkerId, so they only tell us where to look)."""
    message = json.loads(body) if isinstance(body, str) else body
    if "Message" in message and "EventDocId" not in message:
        message = json.loads(message["Message"])  # delivered through SNS
    event_doc_id = message.get("EventDocId")
    if not event_doc_id:
        return 0
    _, created = NotificationEvent.objects.get_or_create(event_doc_id=event_doc_id,
                                                         defaults={"payload": message})
    if not created:
        return 0
    hit_ids = {event.get("HITId") for event in message.get("Events", []) if event.get("HITId")}
    synced = 0
    for hit in Hit.objects.filter(hit_id__in=hit_ids).select_related("study", "unit"):
        sync_study(study=hit.study, hits=[hit])
        synced += 1
    return synced


def poll_mturk_notifications():
    """Handle what is waiting on the notification queue; a message is deleted once handled."""
    sqs, queue_url = mturk_client.get_sqs_client(), settings.MTURK_SQS_QUEUE_URL
    response = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    handled = 0
    for message in response.get("Messages", []):
        handle_mturk_notification(message["Body"])
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        handled += 1
    return handled
