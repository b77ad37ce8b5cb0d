"""Qualification tests (paper §2.2: five to ten sample tasks) and live gold items.

A worker takes a stage's test of gold items with known answers (free-text items wait for a
researcher's review); at the pass score they are qualified for the stage (on MTurk also through the
stage's qualification type, granted by a job: mturk/services/qualifying.py). Gold items mixed into
live work (when, and which: annotation/crowdwork/next_step.py) keep their accuracy current; below
the stage's bar they are paused and the queue stops giving them that stage's units.
"""

import logging
import random
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils import timezone

from annotation.exceptions import WorkerFacingError
from annotation.models import (
    GoldAnswer,
    GoldItem,
    QualificationAttempt,
    Stage,
    StageQualification,
    Worker,
    WorkerQualification,
)
from crowdbench.events import emit

logger = logging.getLogger(__name__)

# Sent with `granted` (a WorkerQualification) when a worker passes a stage's test, inside its
# transaction. The crowd platforms listen (mturk/listeners.py): one with qualifications of its own
# (MTurk's) grants its one too, by a job, so the worker's page never waits on it.
qualification_granted = Signal()


def stage_qualification(stage):
    return StageQualification.objects.filter(stage=stage).first()


# --- taking the test ------------------------------------------------------------------------


@dataclass
class ItemFeedback:
    item_id: int
    question: str
    answer: object
    correct: bool | None
    expected: object
    explanation: str


@dataclass
class QualificationResult:
    stage: str
    status: str
    score: Decimal | None
    passed: bool
    pending_review: bool
    feedback: list[ItemFeedback] = field(default_factory=list)


def _score(value):
    return Decimal(value).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)


def start_qualification_test(worker, stage):
    """The worker's open attempt at the stage's test (a new one if allowed). Raises if they are
    already qualified or must wait before a retake."""
    qualification = stage_qualification(stage)
    if qualification is None:
        raise WorkerFacingError("This task has no qualification test: you can start right away.")
    if WorkerQualification.objects.filter(qualification=qualification, worker=worker).exists():
        raise WorkerFacingError("You have already qualified for this task.")
    open_attempt = QualificationAttempt.objects.filter(
        qualification=qualification, worker=worker, status=QualificationAttempt.Status.STARTED).first()
    if open_attempt:
        return open_attempt
    last = QualificationAttempt.objects.filter(qualification=qualification, worker=worker).first()
    if last and last.status == QualificationAttempt.Status.PENDING_REVIEW:
        raise WorkerFacingError("Your answers are waiting for a researcher's review.")
    if last and last.status == QualificationAttempt.Status.FAILED:
        retake_at = last.submitted_at + timedelta(hours=qualification.retake_after_hours)
        if timezone.now() < retake_at:
            raise WorkerFacingError(f"You can take the test again after {retake_at:%Y-%m-%d %H:%M} UTC.")
    items = list(qualification.gold_items.filter(active=True, in_test=True).values_list("pk", flat=True))
    if len(items) < qualification.test_size:
        raise WorkerFacingError("This qualification test is not ready yet; please come back later.")
    chosen = random.sample(items, qualification.test_size)
    try:
        with transaction.atomic():
            return QualificationAttempt.objects.create(qualification=qualification, worker=worker,
                                                       item_ids=chosen)
    except IntegrityError:
        # Another tab started one at the same moment: that one is the worker's attempt.
        return QualificationAttempt.objects.get(qualification=qualification, worker=worker,
                                                status=QualificationAttempt.Status.STARTED)


def qualification_items(attempt):
    """What the test page shows, in order: never the answers."""
    items = GoldItem.objects.in_bulk(attempt.item_ids)
    return [
        {"id": pk, "kind": items[pk].kind, "content": items[pk].content,
         "question": items[pk].question, "options": items[pk].options}
        for pk in attempt.item_ids if pk in items
    ]


def submit_qualification_answers(worker, stage, answers):
    """Score the worker's open attempt; `answers` maps gold item id to the answer. Submitting again
    returns the stored result."""
    qualification = stage_qualification(stage)
    if qualification is None:
        raise WorkerFacingError("This task has no qualification test.")
    answers = {int(k): v for k, v in (answers or {}).items()}
    worker.forget_standing()
    with transaction.atomic():
        attempt = (QualificationAttempt.objects.select_for_update()
                   .filter(qualification=qualification, worker=worker).first())
        if attempt is None:
            raise WorkerFacingError("Please start the test first.")
        if attempt.status != QualificationAttempt.Status.STARTED:
            return _result(attempt)
        missing = [pk for pk in attempt.item_ids if answers.get(pk) in (None, "", [])]
        if missing:
            raise WorkerFacingError(f"Please answer every question ({len(missing)} left).")
        items = GoldItem.objects.in_bulk(attempt.item_ids)
        for pk in attempt.item_ids:
            item = items[pk]
            GoldAnswer.objects.create(
                item=item, worker=worker, attempt=attempt, source=GoldAnswer.Source.TEST,
                answer=answers[pk], correct=_is_correct(item, answers[pk]),
            )
        attempt.submitted_at = timezone.now()
        _decide(attempt)
    return _result(attempt)


def _is_correct(item, answer):
    if item.kind == GoldItem.Kind.FREE_TEXT:
        return None
    return GoldItem.normalised(answer) == GoldItem.normalised(item.answer)


def _decide(attempt):
    answers = list(attempt.answers.all())
    scored = [a for a in answers if a.correct is not None]
    attempt.score = _score(sum(a.correct for a in scored) / len(scored)) if scored else None
    if len(scored) < len(answers):
        attempt.status = QualificationAttempt.Status.PENDING_REVIEW
    else:
        passed = attempt.score >= attempt.qualification.pass_score
        attempt.status = (QualificationAttempt.Status.PASSED if passed
                          else QualificationAttempt.Status.FAILED)
        if passed:
            granted, _ = WorkerQualification.objects.get_or_create(
                qualification=attempt.qualification, worker=attempt.worker,
                defaults={"test_score": attempt.score},
            )
            # A platform with qualifications of its own grants its one too (mturk listens).
            qualification_granted.send(sender=WorkerQualification, granted=granted)
    attempt.save(update_fields=["score", "status", "submitted_at"])


def review_free_text_answer(*, answer, correct, reviewer):
    """A researcher marks a free-text gold answer; a test waiting only on it is then decided."""
    with transaction.atomic():
        answer = (GoldAnswer.objects.select_for_update(of=("self",)).select_related("attempt")
                  .get(pk=answer.pk))
        answer.correct, answer.reviewed_by = bool(correct), reviewer
        answer.save(update_fields=["correct", "reviewed_by"])
        attempt = answer.attempt
        if attempt and attempt.status == QualificationAttempt.Status.PENDING_REVIEW:
            _decide(attempt)
        elif answer.source == GoldAnswer.Source.LIVE:
            _update_live_accuracy(answer.worker, answer.item.qualification)
    return answer


def qualification_result(attempt):
    """A submitted attempt as its worker sees it: score, outcome and feedback per item."""
    return _result(attempt)


def _result(attempt):
    feedback = []
    for answer in attempt.answers.select_related("item"):
        item = answer.item
        feedback.append(ItemFeedback(
            item_id=item.pk, question=item.question, answer=answer.answer, correct=answer.correct,
            expected=item.answer if answer.correct is False else None,
            explanation=item.explanation))
    return QualificationResult(
        stage=attempt.qualification.stage, status=attempt.status, score=attempt.score,
        passed=attempt.status == QualificationAttempt.Status.PASSED,
        pending_review=attempt.status == QualificationAttempt.Status.PENDING_REVIEW,
        feedback=feedback,
    )


# --- gold items in live work --------------------------------------------------------------------


def record_live_gold_answer(worker, item_id, answer):
    """Store a live gold answer and keep the worker's accuracy current; pauses them below the bar.

    One answer per item and worker counts, whatever a double click or a resent form does: a second
    one is not stored, and the first is returned.
    """
    item = GoldItem.objects.select_related("qualification").get(pk=item_id)
    with transaction.atomic():
        # The worker's row is the lock two submits of the same item queue on.
        Worker.objects.select_for_update().filter(pk=worker.pk).first()
        first = GoldAnswer.objects.filter(item=item, worker=worker, source=GoldAnswer.Source.LIVE).first()
        if first is not None:
            return first
        gold = GoldAnswer.objects.create(item=item, worker=worker, source=GoldAnswer.Source.LIVE,
                                         answer=answer, correct=_is_correct(item, answer))
        _update_live_accuracy(worker, item.qualification)
    worker.forget_standing()
    return gold


def _update_live_accuracy(worker, qualification):
    granted = (WorkerQualification.objects.select_for_update()
               .filter(qualification=qualification, worker=worker).first())
    if granted is None:
        return None
    recent = list(GoldAnswer.objects.filter(
        worker=worker, item__qualification=qualification, source=GoldAnswer.Source.LIVE,
        correct__isnull=False).order_by("-created_at", "-id")[: qualification.live_window])
    granted.live_answers = GoldAnswer.objects.filter(
        worker=worker, item__qualification=qualification, source=GoldAnswer.Source.LIVE).count()
    granted.live_accuracy = _score(sum(a.correct for a in recent) / len(recent)) if recent else None
    fields = ["live_answers", "live_accuracy"]
    if (granted.status == WorkerQualification.Status.QUALIFIED
            and len(recent) >= qualification.live_min_answers
            and granted.live_accuracy < qualification.live_accuracy_bar):
        granted.status = WorkerQualification.Status.PAUSED
        granted.paused_at = timezone.now()
        granted.note = (f"Paused: {granted.live_accuracy:.0%} of the last {len(recent)} gold items "
                        f"right, below the {qualification.live_accuracy_bar:.0%} bar.")
        fields += ["status", "paused_at", "note"]
        logger.warning("Worker %s paused on %s: %s", granted.worker.pseudonym, qualification, granted.note)
        # The researchers are told by e-mail (NOTIFY_EVENTS) and any webhook asking for it.
        emit(event="worker.paused", scope=granted.worker, key=f"{granted.pk}:{granted.paused_at.isoformat()}", payload={
            "worker": granted.worker.pseudonym, "platform": granted.worker.platform,
            "qualification": str(qualification), "stage": qualification.stage, "note": granted.note})
    granted.save(update_fields=fields)
    return granted


def resume_worker(*, granted, actor):
    granted.status, granted.paused_at = WorkerQualification.Status.QUALIFIED, None
    granted.note = f"Resumed by {actor} on {timezone.now():%Y-%m-%d}."
    granted.save(update_fields=["status", "paused_at", "note"])
    return granted


# --- what workers see ------------------------------------------------------------------------


def qualification_status(worker):
    """One entry per stage with a test: where the worker stands, in words they can read."""
    rows = []
    granted = {g.qualification_id: g for g in worker.qualifications.select_related("qualification")}
    for qualification in StageQualification.objects.order_by("stage"):
        entry = {"stage": qualification.stage, "stage_label": Stage(qualification.stage).label,
                 "name": qualification.name, "score": None, "live_accuracy": None,
                 "retake_at": None}
        if qualification.pk in granted:
            g = granted[qualification.pk]
            entry.update(score=g.test_score, live_accuracy=g.live_accuracy, status=g.status)
            entry["message"] = ("You are qualified." if g.status == WorkerQualification.Status.QUALIFIED
                                else "Paused: too many recent check questions were answered "
                                     "wrongly. A researcher will be in touch.")
        else:
            last = qualification.attempts.filter(worker=worker).first()
            if last is None:
                entry.update(status="not_taken", message="Take the qualification test to start.")
            elif last.status == QualificationAttempt.Status.STARTED:
                entry.update(status="started", message="You have started the test.")
            elif last.status == QualificationAttempt.Status.PENDING_REVIEW:
                entry.update(status="pending_review", score=last.score,
                             message="Your written answers are waiting for a researcher's review.")
            else:
                retake_at = last.submitted_at + timedelta(hours=qualification.retake_after_hours)
                entry.update(status="failed", score=last.score, retake_at=retake_at,
                             message=f"Not passed this time; you can try again after "
                                     f"{retake_at:%Y-%m-%d %H:%M} UTC.")
        rows.append(entry)
    return rows
