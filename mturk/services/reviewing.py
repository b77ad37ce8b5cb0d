"""Reviewing and paying: approve or reject in bulk, bonuses (Prolific's two-step payment included),
blocks, messages to workers, and expiring or extending HITs."""

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.crowdwork import review
from annotation.models import WorkerBlock, WorkState
from mturk import calls, pay, selectors
from mturk.exceptions import PlatformError, PlatformRequestError
from mturk.models import AuditLog, Bonus, CrowdStudy, Hit, Submission
from mturk.platforms import backend_class, get_backend
from mturk.platforms.base import State
from mturk.services.audit import audited, log_calls, require_researcher
from mturk.services.publishing import check_budget

logger = logging.getLogger(__name__)


def _amount(submission):
    return submission.hit.reward_usd if submission.hit_id else submission.study.reward_usd


def _review(*, submissions, actor, action, call, message, answers_decided=False):
    """Verify each submission with the platform, then approve or reject; returns (done, problems).
    The submissions' answers follow the decision unless `answers_decided` (a reviewer decided them
    first, annotation.crowdwork.review.review_work, and the platform follows that)."""
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
            with calls.collect() as made:
                try:
                    with transaction.atomic():
                        done.extend(_review_group(study, backend, group, actor, action, call,
                                                  message, problems, made, answers_decided))
                except PlatformError as error:
                    # Written after the rollback, so the failure and the calls that led to it stay.
                    for submission in Submission.objects.filter(pk__in=group).select_related("worker"):
                        problems.append(f"{submission.worker}: {error}")
                        log_calls(made, action=action, study=study, worker=submission.worker,
                                  submission=submission, actor=actor, ok=False, error=str(error),
                                  request={"assignment": submission.platform_assignment_id})
    return done, problems


def _review_group(study, backend, ids, actor, action, call, message, problems, made, answers_decided):
    locked = list(Submission.objects.select_for_update(of=("self",)).filter(pk__in=ids)
                  .select_related("worker", "hit", "study"))
    reviewable = []
    for submission in locked:
        if submission.review != Submission.Review.READY:
            why = submission.flag_reason or submission.get_review_display().lower()
            problems.append(f"{submission.worker}: not ready for review ({why}).")
            continue
        reviewable.append(submission)
    # A worker id in a URL is a claim: the platform must confirm the work is theirs, now, and it
    # is asked once for the whole group where it can answer for all of it at once.
    records = backend.verify_batch(reviewable)
    ready = []
    for submission in reviewable:
        record = records[submission.pk]
        if record is not None and record.state != State.SUBMITTED:
            problems.append(f"{submission.worker}: the platform says {record.platform_status}.")
            log_calls(made, action=action, study=study, worker=submission.worker,
                      submission=submission, actor=actor, ok=False,
                      request={"assignment": submission.platform_assignment_id},
                      error=f"not sent: the platform says the work is {record.platform_status}")
            continue
        ready.append(submission)
    results = call(backend, ready) if ready else {}
    done = []
    for submission in ready:
        result = results[submission.pk]
        amount = _amount(submission) if action == AuditLog.Action.APPROVE else None
        log_calls(made, action=action, study=study, worker=submission.worker,
                  submission=submission, amount=amount, actor=actor, ok=result.ok,
                  request=result.request, response=result.response, error=result.error)
        if not result.ok:
            problems.append(f"{submission.worker}: {result.error}")
            continue
        submission.review = (Submission.Review.APPROVED if action == AuditLog.Action.APPROVE
                             else Submission.Review.REJECTED)
        submission.reviewed_at, submission.reviewed_by = timezone.now(), actor
        submission.feedback = message
        submission.save(update_fields=["review", "reviewed_at", "reviewed_by", "feedback"])
        if not answers_decided:
            answers_follow(submission, actor)
        done.append(submission)
    return done


def answers_follow(submission, actor):
    """The answers of work approved or rejected on its platform's side (its own page, or the
    admin's platform submissions) are accepted or rejected with it: a platform rejection takes them
    out of every count and asks their tasks again."""
    answers = list(submission.assignments.all())
    if submission.review == Submission.Review.APPROVED:
        review.accept_work(assignments=answers, reviewer=actor, reason=submission.feedback)
    elif submission.review == Submission.Review.REJECTED:
        review.reject_work(assignments=answers, reviewer=actor,
                           reason=submission.feedback or "Rejected on the platform.")


def approve_submissions(*, submissions, actor, feedback="", answers_decided=False):
    feedback = (feedback or "").strip()[:1024]
    return _review(submissions=submissions, actor=actor, action=AuditLog.Action.APPROVE,
                   call=lambda backend, ready: backend.approve(ready, feedback=feedback),
                   message=feedback, answers_decided=answers_decided)


def reject_submissions(*, submissions, actor, message, category="", answers_decided=False):
    message = (message or "").strip()
    if not message:
        raise PlatformError("Say why the work is rejected; the worker sees this message.")
    if len(message) > 1024:
        raise PlatformError("Keep the rejection message under 1024 characters.")
    return _review(submissions=submissions, actor=actor, action=AuditLog.Action.REJECT,
                   call=lambda backend, ready: backend.reject(ready, message=message,
                                                              category=category),
                   message=message, answers_decided=answers_decided)


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
    """Pay once. MTurk and Connect carry a token derived from the bonus row; a platform paying in
    two steps (Prolific) has a pay step that is not idempotent, so the row is marked 'paying' and
    committed before the call, and a bonus in that state is never sent again by us."""
    require_researcher(actor)
    backend = get_backend(bonus.submission.study.platform)
    if backend.bonus_in_two_steps:
        return _pay_bonus_in_two_steps(bonus, backend, actor)
    with calls.collect() as made, transaction.atomic():
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
        log_calls(made, action=AuditLog.Action.BONUS, study=submission.study,
                  worker=submission.worker, submission=submission, amount=bonus.amount_usd,
                  actor=actor, ok=bonus.status == Bonus.Status.PAID,
                  request=result.request if result else {}, response=result.response if result else {},
                  error=bonus.error)
    if bonus.status != Bonus.Status.PAID:
        raise PlatformError(f"The bonus was not paid: {bonus.error}")
    return bonus


def _pay_bonus_in_two_steps(bonus, backend, actor):
    submission = bonus.submission
    with calls.collect() as made:
        try:
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
                    log_calls(made, action=AuditLog.Action.BONUS, study=submission.study,
                              worker=submission.worker, submission=submission,
                              amount=Decimal("0.00"), actor=actor, request=result.request,
                              response=result.response)
        except PlatformError as error:
            # Step one failed: nothing was set up, so nothing can have been paid.
            log_calls(made, action=AuditLog.Action.BONUS, study=submission.study,
                      worker=submission.worker, submission=submission, amount=Decimal("0.00"),
                      actor=actor, ok=False, error=f"not set up, nothing paid: {error}")
            raise
    if bonus.status == Bonus.Status.PAID:
        return bonus
    if bonus.status == Bonus.Status.PAYING:
        raise PlatformError(
            f"A pay request for this bonus was already sent ({backend.label} payment "
            f"{bonus.platform_reference}) and its outcome is unknown; check it on {backend.label}. "
            "It is never sent twice from here.")
    with transaction.atomic():
        claimed = Bonus.objects.filter(pk=bonus.pk, status=Bonus.Status.SET_UP).update(
            status=Bonus.Status.PAYING)
    if not claimed:
        raise PlatformError("Another request is paying this bonus.")
    with calls.collect() as made:
        try:
            result = backend.pay_set_up_bonus(bonus)
        except PlatformError as error:
            refused = isinstance(error, PlatformRequestError) or not error.sent
            if refused:
                # Refused outright (4xx), or never sent: nothing was paid, so the set-up payment
                # may be sent again.
                Bonus.objects.filter(pk=bonus.pk).update(status=Bonus.Status.SET_UP, error=str(error))
            log_calls(made, action=AuditLog.Action.BONUS, study=submission.study,
                      worker=submission.worker, submission=submission, amount=bonus.amount_usd,
                      actor=actor, ok=False, request={"pay": bonus.platform_reference},
                      error=str(error) if refused else f"outcome unknown: {error}")
            raise
    Bonus.objects.filter(pk=bonus.pk).update(status=Bonus.Status.PAID, paid_at=timezone.now())
    log_calls(made, action=AuditLog.Action.BONUS, study=submission.study, worker=submission.worker,
              submission=submission, amount=bonus.amount_usd, actor=actor, request=result.request,
              response=result.response)
    bonus.refresh_from_db()
    return bonus


def block_worker(*, worker, reason, actor, study=None):
    """Block on the platform where it can, and always here: the queue stops giving them work."""
    require_researcher(actor)
    reason = (reason or "").strip()
    if not reason:
        raise PlatformError("Give the reason for the block; MTurk shows it to the worker.")
    backend = backend_class(worker.platform)()
    with audited(action=AuditLog.Action.BLOCK, study=study, worker=worker, actor=actor) as step:
        result = backend.block(worker, reason=reason)
        step.request, step.response, step.error = result.request, result.response, result.error
    if not result.ok:
        raise PlatformError(f"The platform refused the block: {result.error}")
    worker.forget_standing()
    return WorkerBlock.objects.create(worker=worker, reason=reason, created_by=actor)


@dataclass(frozen=True)
class StoppedWorkers:
    """What `stop_workers` did, for the reviewer's message."""

    blocked: list
    already_blocked: list
    problems: list

    def message(self):
        parts = []
        if self.blocked:
            parts.append(f"{len(self.blocked)} worker(s) will get no more tasks (blocked): "
                         + ", ".join(worker.pseudonym for worker in self.blocked) + ".")
        if self.already_blocked:
            parts.append("Blocked already: " + ", ".join(worker.pseudonym for worker in self.already_blocked) + ".")
        return " ".join(parts)


def stop_workers(*, workers, reason, actor):
    """Block these workers, each once, with `reason`: the reviewer's "also stop this worker getting
    more tasks" beside a rejection. Call it after the rejection has committed, not in its
    transaction: a block may call the worker's platform, and `audited` needs its audit row to
    outlive a refusal, which a rollback of the rejection would take with it."""
    require_researcher(actor)
    workers = {worker.pk: worker for worker in workers}
    already = set(WorkerBlock.objects.filter(worker__in=workers, active=True).values_list("worker_id", flat=True))
    blocked, problems = [], []
    for worker_id in sorted(set(workers) - already):
        worker = workers[worker_id]
        try:
            block_worker(worker=worker, reason=reason, actor=actor)
        except PlatformError as error:
            problems.append(f"{worker.pseudonym}: {error}")
            continue
        blocked.append(worker)
    return StoppedWorkers(blocked=blocked, already_blocked=[workers[pk] for pk in sorted(already)],
                          problems=problems)


@dataclass(frozen=True)
class Notification:
    """What a message to workers did: the platform's answers, and what the researcher is told."""

    results: list
    message: str


def notify_workers(*, study, workers, subject, message, actor):
    """Message workers through the platform; what is said back counts only what it accepted."""
    require_researcher(actor)
    subject, message = (subject or "").strip(), (message or "").strip()
    if not subject or not message or len(subject) > 200 or len(message) > 4096:
        raise PlatformError("A message needs a subject (up to 200 characters) and a text (up to 4096).")
    workers = list(workers)
    _refuse_past_the_message_limit(workers)
    backend = get_backend(study.platform)
    with audited(action=AuditLog.Action.NOTIFY, study=study, actor=actor,
                 request={"subject": subject, "workers": len(workers),
                          "worker_ids": [worker.pk for worker in workers]}) as step:
        results = backend.notify(study, workers, subject=subject, message=message)
        failed = [result.error for result in results if not result.ok]
        step.response = {"results": [result.response for result in results]}
        step.error = "; ".join(failed)
    if not step.calls:
        note = "; ".join(str(result.response.get("note", "")) for result in results)
        return Notification(results, f"Nothing was sent to a platform: {note}.")
    sent = sum(len(r.request.get("WorkerIds", [])) or 1 for r in results if r.ok)
    text = f"{backend.label} accepted the message for {sent} of {len(workers)} worker(s)."
    return Notification(results, f"{text} It refused: {step.error}" if failed else text)


def _refuse_past_the_message_limit(workers):
    """At most WORKER_MESSAGES_PER_DAY messages reach a worker in 24 hours, whichever study or
    researcher sends them: counted from the audit log's messages the platform took."""
    limit = settings.WORKER_MESSAGES_PER_DAY
    recent = AuditLog.objects.filter(action=AuditLog.Action.NOTIFY, ok=True, sent_to_platform=True,
                                     created_at__gte=timezone.now() - timedelta(days=1))
    received = Counter(pk for ids in recent.values_list("request__worker_ids", flat=True) for pk in ids or ())
    over = [worker for worker in workers if received[worker.pk] >= limit]
    if over:
        names = ", ".join(worker.external_id for worker in over[:5]) + (" and more" if len(over) > 5 else "")
        raise PlatformError(f"{len(over)} worker(s) had {limit} message(s) in the last 24 hours already ({names}); "
                            "nothing was sent. Leave them out or try again tomorrow.")


def expire_hits(*, study, actor):
    """Stop the study's open HITs taking new workers; submitted work can still be reviewed."""
    require_researcher(actor)
    backend = get_backend(study.platform)
    if not backend.publishes_per_unit:
        raise PlatformError(f"Close {backend.label} studies on {backend.label}'s own site; nothing "
                            "was sent.")
    hits = list(study.hits.filter(status=Hit.Status.OPEN))
    expired = []
    for hit in hits:
        try:
            with audited(action=AuditLog.Action.EXPIRE, study=study, actor=actor,
                         request={"HITId": hit.hit_id}):
                backend.expire(study, [hit])
                hit.status, hit.expires_at = Hit.Status.EXPIRED, timezone.now()
                hit.save(update_fields=["status", "expires_at"])
        except PlatformError as error:
            raise PlatformError(f"Expired {len(expired)} of {len(hits)} open HIT(s); HIT "
                                f"{hit.hit_id} was not: {error}") from error
        expired.append(hit)
    return expired


def extend_hit(*, hit, more, actor):
    require_researcher(actor)
    if more < 1:
        raise PlatformError("Add at least one assignment.")
    cost = pay.batch_cost(platform=hit.study.platform, reward=hit.reward_usd,
                          assignments_per_task=hit.max_assignments + more, tasks=1) - pay.batch_cost(
        platform=hit.study.platform, reward=hit.reward_usd,
        assignments_per_task=hit.max_assignments, tasks=1)
    check_budget(hit.study, selectors.committed_spend(hit.study), cost, per_task=cost)
    with audited(action=AuditLog.Action.EXTEND, study=hit.study, actor=actor, amount=cost,
                 request={"HITId": hit.hit_id, "more": more}):
        get_backend(hit.study.platform).extend(hit, more=more)
        Hit.objects.filter(pk=hit.pk).update(max_assignments=hit.max_assignments + more)
    hit.refresh_from_db()
    return hit


def review_on_platforms(*, assignments, actor, reason=""):
    """Carry a reviewer's decision on answers (annotation.crowdwork.review.review_work, which tells
    mturk/listeners.py) to the platforms they were done on: a platform submission whose answers
    are all rejected is rejected there with the reason, and one whose answers are all accepted is
    approved, through the calls and audit log above, all of a platform's in one batch (so Connect
    is asked once, not once per submission). The answers are decided already, so nothing here
    decides them again. Returns a line per submission for the reviewer."""
    submissions = list(Submission.objects.filter(assignments__in=assignments).distinct()
                       .select_related("worker", "study").prefetch_related("assignments"))
    batches = {}
    for submission in submissions:
        states = {assignment.work_state for assignment in submission.assignments.all()}
        if states == {WorkState.REJECTED} and submission.review != Submission.Review.REJECTED:
            verb = "rejected"
        elif states == {WorkState.ACCEPTED} and submission.review == Submission.Review.READY:
            verb = "approved"
        else:
            continue
        batches.setdefault((verb, submission.study.get_platform_display()), []).append(submission)
    lines = []
    for (verb, where), batch in batches.items():
        try:
            if verb == "rejected":
                done, problems = reject_submissions(submissions=batch, actor=actor, answers_decided=True,
                                                    message=reason or "Rejected in review.")
            else:
                done, problems = approve_submissions(submissions=batch, actor=actor, feedback=reason,
                                                     answers_decided=True)
        except PlatformError as error:
            done, problems = [], [str(error)]
        lines += [f"{where}: the work of {submission.worker.pseudonym} was {verb} there."
                  for submission in done]
        lines += [f"{where}: not {verb} there: {problem}" for problem in problems]
    return lines
