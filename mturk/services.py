"""Crowd platform actions: publish, sync, review, pay, block, notify, expire.

Each payment action is taken by a researcher (staff with `mturk.pay_workers`), checked against our
own records and then against the platform's, and written to the AuditLog whatever the outcome.
"""

import json
import logging
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.models import Assignment, StageConfig, Worker, WorkerBlock, WorkUnit
from mturk import client as mturk_client
from mturk import pay
from mturk.exceptions import PlatformError, PlatformRequestError
from mturk.models import AuditLog, Bonus, CrowdStudy, Hit, NotificationEvent, Submission
from mturk.platforms import get_backend
from mturk.platforms.base import State

logger = logging.getLogger(__name__)

PAY_PERMISSION = "mturk.pay_workers"


def require_researcher(actor):
    if actor is None or not actor.is_active or not actor.is_staff or not actor.has_perm(PAY_PERMISSION):
        raise PlatformError("Only researchers allowed to pay workers can do this.")


def log(*, action, study=None, worker=None, submission=None, amount=None, actor=None, ok=True,
        request=None, response=None, error=""):
    platform = study.platform if study else (worker.platform if worker else Worker.Platform.LOCAL)
    return AuditLog.objects.create(
        action=action, platform=platform, study=study, worker=worker, submission=submission,
        amount_usd=amount, actor=actor, ok=ok, request=_jsonable(request or {}),
        response=_jsonable(response or {}), error=error,
    )


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))


# --- publishing ---------------------------------------------------------------------------------


def units_to_publish(study):
    units = WorkUnit.objects.filter(stage=study.stage, status=WorkUnit.Status.OPEN).exclude(
        hits__study=study)
    launched = StageConfig.objects.filter(stage=study.stage, launched_at__isnull=False)
    units = units.filter(family__in=launched.values("family"))
    if study.family_id:
        units = units.filter(family_id=study.family_id)
    return units.annotate(
        submitted=Count("assignments", filter=Q(assignments__status=Assignment.Status.SUBMITTED))
    ).order_by("id")


def set_reward_from_plan(*, study, actor):
    """Set the study's reward from the measured median time and its target wage."""
    require_researcher(actor)
    plan = pay.plan_for_study(study, tasks=1)
    study.reward_usd = plan.reward
    study.save(update_fields=["reward_usd"])
    return plan


def publish_batch(*, study, tasks, actor):
    """Publish `tasks` more units of the study's stage (MTurk: one HIT each; CloudResearch and
    Prolific: that many more places). Refused when it would take the study past its budget."""
    require_researcher(actor)
    if tasks < 1:
        raise PlatformError("Publish at least one task.")
    if study.reward_usd <= 0:
        raise PlatformError("Set the reward first (the 'plan pay' action sets it from the target wage).")
    backend = get_backend(study.platform)
    committed = pay.committed_spend(study)
    if not backend.publishes_per_unit:
        cost = pay.batch_cost(platform=study.platform, reward=study.reward_usd,
                              assignments_per_task=1, tasks=tasks)
        _check_budget(study, committed, cost, per_task=cost / tasks)
        with transaction.atomic():
            locked = CrowdStudy.objects.select_for_update().get(pk=study.pk)
            locked.places_published += tasks
            locked.save(update_fields=["places_published"])
            log(action=AuditLog.Action.PUBLISH, study=study, actor=actor, amount=cost,
                request={"places": tasks}, response={"places_published": locked.places_published})
        study.places_published = locked.places_published
        return []
    units = list(units_to_publish(study)[:tasks])
    if not units:
        raise PlatformError("No open work units of this stage are waiting to be published.")
    sizes = [max(1, unit.overlap - unit.submitted) for unit in units]
    costs = [pay.batch_cost(platform=study.platform, reward=study.reward_usd,
                            assignments_per_task=size, tasks=1) for size in sizes]
    _check_budget(study, committed, sum(costs), per_task=max(costs))
    hit_type_id, _ = backend.ensure_hit_type(study, study.reward_usd)
    hits = []
    for unit, size, cost in zip(units, sizes, costs, strict=True):
        hit, _ = Hit.objects.get_or_create(
            study=study, unit=unit,
            defaults={"hit_type_id": hit_type_id, "environment": mturk_client.environment(),
                      "max_assignments": size, "reward_usd": study.reward_usd},
        )
        if hit.status != Hit.Status.CREATING:
            continue
        try:
            result = backend.create_hit(hit, study)
        except PlatformError as error:
            log(action=AuditLog.Action.PUBLISH, study=study, actor=actor, ok=False, amount=cost,
                request={"unit": unit.pk}, error=str(error))
            raise
        created = result.response["HIT"]
        hit.hit_id = created["HITId"]
        hit.status = Hit.Status.OPEN
        hit.expires_at = created.get("Expiration") or timezone.now() + timedelta(
            hours=study.lifetime_hours)
        hit.save(update_fields=["hit_id", "status", "expires_at"])
        log(action=AuditLog.Action.PUBLISH, study=study, actor=actor, amount=cost,
            request={k: v for k, v in result.request.items() if k != "Question"} | {"unit": unit.pk},
            response={"HITId": hit.hit_id, "HITTypeId": hit_type_id})
        hits.append(hit)
    return hits


def _check_budget(study, committed, cost, *, per_task):
    if study.budget_usd is None or committed + cost <= study.budget_usd:
        return
    room = max(Decimal("0"), study.budget_usd - committed)
    fit = int(room // per_task) if per_task else 0
    raise PlatformError(
        f"Publishing this batch (${cost:.2f}) would bring “{study.name}” to ${committed + cost:.2f}, "
        f"over its ${study.budget_usd} budget (${committed:.2f} committed); at most {fit} more "
        "task(s) fit.")


# --- sync ---------------------------------------------------------------------------------------


def sync_study(*, study, hits=None):
    """Reconcile the platform's list of work with what our pages stored. Returns counts by review."""
    backend = get_backend(study.platform)
    if hits is None and backend.publishes_per_unit:
        hits = list(study.hits.filter(status__in=[Hit.Status.OPEN, Hit.Status.EXPIRED])
                    .exclude(hit_id="").select_related("unit"))
    records = backend.records(study, hits=hits)
    hits_by_id = {hit.hit_id: hit for hit in (hits or [])}
    counts = {}
    for record in records:
        submission = _reconcile(study, record, hits_by_id.get(record.hit_id))
        counts[submission.review] = counts.get(submission.review, 0) + 1
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
        submission.platform_record = _jsonable(record.raw)
        if record.state == State.APPROVED and submission.review != Submission.Review.APPROVED:
            submission.review = Submission.Review.APPROVED
            submission.feedback = submission.feedback or "Approved on the platform (e.g. auto-approval)."
        elif record.state == State.REJECTED and submission.review != Submission.Review.REJECTED:
            submission.review = Submission.Review.REJECTED
        elif record.state == State.SUBMITTED and submission.review in (
                Submission.Review.IN_PROGRESS, Submission.Review.READY, Submission.Review.FLAGGED):
            submission.save()
            problems = _attach_and_check(submission, hit)
            submission.review = Submission.Review.FLAGGED if problems else Submission.Review.READY
            submission.flag_reason = "; ".join(problems)
        submission.save()
    return submission


def _attach_and_check(submission, hit):
    """Link our stored assignments to the platform's record; the problems that stop approval."""
    worker = submission.worker
    if submission.study.platform == Worker.Platform.MTURK:
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
                                     platform_task_id=study.external_id,
                                     status=Assignment.Status.SUBMITTED)
    ours = ours.exclude(platform_submissions__in=study.submissions.exclude(pk=submission.pk))
    submission.assignments.add(*ours)
    if not submission.assignments.exists():
        return ["completed on the platform, but our pages stored no submitted work for this participant"]
    return []


def sync_open_studies():
    """The periodic job: every study with open HITs or places."""
    done = {}
    studies = CrowdStudy.objects.filter(
        Q(hits__status=Hit.Status.OPEN) | Q(places_published__gt=0)).distinct()
    for study in studies:
        try:
            done[study.pk] = sync_study(study=study)
        except PlatformError as error:
            logger.warning("Sync of %s failed: %s", study, error)
            done[study.pk] = {"error": str(error)}
    return done


# --- review -------------------------------------------------------------------------------------


def _amount(submission):
    return submission.hit.reward_usd if submission.hit_id else submission.study.reward_usd


def _review(*, submissions, actor, action, call, message):
    """Verify each submission with the platform, then approve or reject; returns (done, problems)."""
    require_researcher(actor)
    done, problems = [], []
    by_study = {}
    for submission in submissions:
        by_study.setdefault(submission.study_id, []).append(submission.pk)
    for study_id, ids in by_study.items():
        study = CrowdStudy.objects.get(pk=study_id)
        backend = get_backend(study.platform)
        # MTurk reviews one assignment per call; the others take a list in one call.
        groups = [[pk] for pk in ids] if backend.publishes_per_unit else [ids]
        for group in groups:
            try:
                with transaction.atomic():
                    done.extend(_review_group(study, backend, group, actor, action, call, message,
                                              problems))
            except PlatformError as error:
                for submission in Submission.objects.filter(pk__in=group).select_related("worker"):
                    problems.append(f"{submission.worker}: {error}")
                    log(action=action, study=study, worker=submission.worker, submission=submission,
                        actor=actor, ok=False, error=str(error))
    return done, problems


def _review_group(study, backend, ids, actor, action, call, message, problems):
    locked = list(Submission.objects.select_for_update(of=("self",)).filter(pk__in=ids)
                  .select_related("worker", "hit", "study"))
    ready = []
    for submission in locked:
        if submission.review != Submission.Review.READY:
            why = submission.flag_reason or submission.get_review_display().lower()
            problems.append(f"{submission.worker}: not ready for review ({why}).")
            continue
        # A worker id in a URL is a claim: the platform must confirm the work is theirs, now.
        record = backend.verify(submission)
        if record is not None and record.state != State.SUBMITTED:
            problems.append(f"{submission.worker}: the platform says {record.platform_status}.")
            continue
        ready.append(submission)
    results = call(backend, ready) if ready else {}
    done = []
    for submission in ready:
        result = results[submission.pk]
        amount = _amount(submission) if action == AuditLog.Action.APPROVE else None
        log(action=action, study=study, worker=submission.worker, submission=submission,
            amount=amount, actor=actor, ok=result.ok, request=result.request,
            response=result.response, error=result.error)
        if not result.ok:
            problems.append(f"{submission.worker}: {result.error}")
            continue
        submission.review = (Submission.Review.APPROVED if action == AuditLog.Action.APPROVE
                             else Submission.Review.REJECTED)
        submission.reviewed_at, submission.reviewed_by = timezone.now(), actor
        submission.feedback = message
        submission.save(update_fields=["review", "reviewed_at", "reviewed_by", "feedback"])
        done.append(submission)
    return done


def approve_submissions(*, submissions, actor, feedback=""):
    feedback = (feedback or "").strip()[:1024]
    return _review(submissions=submissions, actor=actor, action=AuditLog.Action.APPROVE,
                   call=lambda backend, ready: backend.approve(ready, feedback=feedback),
                   message=feedback)


def reject_submissions(*, submissions, actor, message, category=""):
    message = (message or "").strip()
    if not message:
        raise PlatformError("Say why the work is rejected; the worker sees this message.")
    if len(message) > 1024:
        raise PlatformError("Keep the rejection message under 1024 characters.")
    return _review(submissions=submissions, actor=actor, action=AuditLog.Action.REJECT,
                   call=lambda backend, ready: backend.reject(ready, message=message,
                                                              category=category),
                   message=message)


# --- bonuses ------------------------------------------------------------------------------------


def create_bonus(*, submission, amount, reason, actor):
    require_researcher(actor)
    amount = pay.cents(amount)
    if amount <= 0:
        raise PlatformError("A bonus must be more than $0.00.")
    if not (reason or "").strip():
        raise PlatformError("Give the worker a reason for the bonus.")
    if submission.review != Submission.Review.APPROVED:
        raise PlatformError("Approve the work before paying a bonus on it.")
    return Bonus.objects.create(submission=submission, amount_usd=amount, reason=reason.strip(),
                                created_by=actor)


def pay_bonus(*, bonus, actor):
    """Pay once. MTurk and Connect carry a token derived from the bonus row; Prolific's pay step is
    not idempotent, so the row is marked 'paying' and committed before the call, and a bonus in
    that state is never sent again by us."""
    require_researcher(actor)
    backend = get_backend(bonus.submission.study.platform)
    if bonus.submission.study.platform == Worker.Platform.PROLIFIC:
        return _pay_prolific_bonus(bonus, backend, actor)
    with transaction.atomic():
        bonus = Bonus.objects.select_for_update(of=("self",)).select_related(
            "submission__worker", "submission__study", "submission__hit").get(pk=bonus.pk)
        if bonus.status == Bonus.Status.PAID:
            return bonus
        submission = bonus.submission
        try:
            backend.verify(submission)
            result = backend.pay_bonus(bonus)
        except PlatformError as error:
            result = None
            error_text = str(error)
        if result is not None and result.ok:
            bonus.status, bonus.paid_at, bonus.error = Bonus.Status.PAID, timezone.now(), ""
        else:
            error_text = result.error if result is not None else error_text
            bonus.status, bonus.error = Bonus.Status.FAILED, error_text
        bonus.save(update_fields=["status", "paid_at", "error"])
        log(action=AuditLog.Action.BONUS, study=submission.study, worker=submission.worker,
            submission=submission, amount=bonus.amount_usd, actor=actor,
            ok=bonus.status == Bonus.Status.PAID, request=result.request if result else {},
            response=result.response if result else {}, error=bonus.error)
    if bonus.status != Bonus.Status.PAID:
        raise PlatformError(f"The bonus was not paid: {bonus.error}")
    return bonus


def _pay_prolific_bonus(bonus, backend, actor):
    with transaction.atomic():
        bonus = Bonus.objects.select_for_update(of=("self",)).select_related(
            "submission__worker", "submission__study").get(pk=bonus.pk)
        submission = bonus.submission
        if bonus.status in (Bonus.Status.PENDING, Bonus.Status.FAILED):
            backend.verify(submission)
            result = backend.set_up_bonus(bonus)
            bonus.platform_reference = str(result.response.get("id", ""))
            bonus.status, bonus.error = Bonus.Status.SET_UP, ""
            bonus.save(update_fields=["platform_reference", "status", "error"])
            log(action=AuditLog.Action.BONUS, study=submission.study, worker=submission.worker,
                submission=submission, amount=Decimal("0.00"), actor=actor,
                request=result.request, response=result.response)
    if bonus.status == Bonus.Status.PAID:
        return bonus
    if bonus.status == Bonus.Status.PAYING:
        raise PlatformError(
            f"A pay request for this bonus was already sent (Prolific payment "
            f"{bonus.platform_reference}) and its outcome is unknown; check it on Prolific. "
            "It is never sent twice from here.")
    with transaction.atomic():
        claimed = Bonus.objects.filter(pk=bonus.pk, status=Bonus.Status.SET_UP).update(
            status=Bonus.Status.PAYING)
    if not claimed:
        raise PlatformError("Another request is paying this bonus.")
    try:
        result = backend.pay_set_up_bonus(bonus)
    except PlatformRequestError as error:
        # Refused outright (4xx): nothing was paid, so the set-up payment may be sent again.
        Bonus.objects.filter(pk=bonus.pk).update(status=Bonus.Status.SET_UP, error=str(error))
        log(action=AuditLog.Action.BONUS, study=submission.study, worker=submission.worker,
            submission=submission, amount=bonus.amount_usd, actor=actor, ok=False,
            request={"pay": bonus.platform_reference}, response=error.response, error=str(error))
        raise
    except PlatformError as error:
        log(action=AuditLog.Action.BONUS, study=submission.study, worker=submission.worker,
            submission=submission, amount=bonus.amount_usd, actor=actor, ok=False,
            request={"pay": bonus.platform_reference}, error=f"outcome unknown: {error}")
        raise
    Bonus.objects.filter(pk=bonus.pk).update(status=Bonus.Status.PAID, paid_at=timezone.now())
    log(action=AuditLog.Action.BONUS, study=submission.study, worker=submission.worker,
        submission=submission, amount=bonus.amount_usd, actor=actor, request=result.request,
        response=result.response)
    bonus.refresh_from_db()
    return bonus


# --- blocks, messages, HITs ----------------------------------------------------------------------


def block_worker(*, worker, reason, actor, study=None):
    """Block on the platform where it can, and always here: the queue stops giving them work."""
    require_researcher(actor)
    reason = (reason or "").strip()
    if not reason:
        raise PlatformError("Give the reason for the block; MTurk shows it to the worker.")
    result = get_backend(worker.platform if worker.platform in (
        Worker.Platform.MTURK, Worker.Platform.CLOUDRESEARCH, Worker.Platform.PROLIFIC)
        else Worker.Platform.LOCAL).block(worker, reason=reason)
    log(action=AuditLog.Action.BLOCK, study=study, worker=worker, actor=actor, ok=result.ok,
        request=result.request, response=result.response, error=result.error)
    if not result.ok:
        raise PlatformError(f"The platform refused the block: {result.error}")
    return WorkerBlock.objects.create(worker=worker, reason=reason, created_by=actor)


def notify_workers(*, study, workers, subject, message, actor):
    require_researcher(actor)
    subject, message = (subject or "").strip(), (message or "").strip()
    if not subject or not message or len(subject) > 200 or len(message) > 4096:
        raise PlatformError("A message needs a subject (up to 200 characters) and a text (up to 4096).")
    workers = list(workers)
    results = get_backend(study.platform).notify(study, workers, subject=subject, message=message)
    for result in results:
        log(action=AuditLog.Action.NOTIFY, study=study, actor=actor, ok=result.ok,
            request={**result.request, "WorkerIds": len(result.request.get("WorkerIds", workers))},
            response=result.response, error=result.error)
    return results


def expire_hits(*, study, actor):
    """Stop the study's open HITs taking new workers; submitted work can still be reviewed."""
    require_researcher(actor)
    hits = list(study.hits.filter(status=Hit.Status.OPEN))
    for hit, result in get_backend(study.platform).expire(study, hits):
        hit.status, hit.expires_at = Hit.Status.EXPIRED, timezone.now()
        hit.save(update_fields=["status", "expires_at"])
        log(action=AuditLog.Action.EXPIRE, study=study, actor=actor, request=result.request,
            response=result.response)
    return hits


def extend_hit(*, hit, more, actor):
    require_researcher(actor)
    if more < 1:
        raise PlatformError("Add at least one assignment.")
    cost = pay.batch_cost(platform=hit.study.platform, reward=hit.reward_usd,
                          assignments_per_task=hit.max_assignments + more, tasks=1) - pay.batch_cost(
        platform=hit.study.platform, reward=hit.reward_usd,
        assignments_per_task=hit.max_assignments, tasks=1)
    _check_budget(hit.study, pay.committed_spend(hit.study), cost, per_task=cost)
    result = get_backend(hit.study.platform).extend(hit, more=more)
    Hit.objects.filter(pk=hit.pk).update(max_assignments=hit.max_assignments + more)
    log(action=AuditLog.Action.EXTEND, study=hit.study, actor=actor, amount=cost,
        request=result.request, response=result.response)
    hit.refresh_from_db()
    return hit


# --- MTurk notifications -------------------------------------------------------------------------


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
