"""Qualification tests (paper §2.2), live gold items and the queue's hook."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.crowdwork import next_step, queue
from annotation.crowdwork.standing import may_work
from annotation.exceptions import WorkerFacingError
from annotation.models import (
    GoldAnswer,
    GoldItem,
    QualificationAttempt,
    Stage,
    StageQualification,
    WorkerQualification,
    WorkUnit,
)
from annotation.workforce import qualifications
from mturk.services import qualifying
from tests.factories import FamilyFactory, WorkerFactory, launch
from tests.mturk_wire import make_researcher
from tests.webhook_support import deliver_due

pytestmark = pytest.mark.django_db


def verification_test(*, size=5, free_text=0):
    qualification = StageQualification.objects.create(
        stage=Stage.VERIFICATION, name="Verification qualification",
        description="Decide whether five responses follow their instruction.", test_size=size,
        live_min_answers=3, live_window=5, live_gold_every=1)
    for n in range(size - free_text):
        GoldItem.objects.create(
            qualification=qualification, content={"instruction": f"Count the dogs ({n})",
                                                  "response": "There are two dogs."},
            question="Is the response correct?", options=["correct", "incorrect"],
            answer="correct" if n % 2 == 0 else "incorrect",
            explanation="The image shows two dogs." if n % 2 == 0 else "There are three dogs.")
    for n in range(free_text):
        GoldItem.objects.create(qualification=qualification, kind=GoldItem.Kind.FREE_TEXT,
                                content={"instruction": f"Describe ({n})"}, question="Why?")
    return qualification


def right_answers(attempt, wrong=0):
    items = GoldItem.objects.in_bulk(attempt.item_ids)
    answers = {}
    for index, pk in enumerate(attempt.item_ids):
        item = items[pk]
        if item.kind == GoldItem.Kind.FREE_TEXT:
            answers[pk] = "Because the caption leaves out the dog's colour."
        elif index < wrong:
            answers[pk] = "incorrect" if item.answer == "correct" else "correct"
        else:
            answers[pk] = item.answer
    return answers


def test_a_worker_who_passes_is_qualified_and_sees_per_item_feedback(worker):
    verification_test()
    attempt = qualifications.start_qualification_test(worker, Stage.VERIFICATION)
    shown = qualifications.qualification_items(attempt)
    assert len(shown) == 5 and all("answer" not in item for item in shown)
    result = qualifications.submit_qualification_answers(worker, Stage.VERIFICATION,
                                                         right_answers(attempt, wrong=1))
    assert (result.passed, str(result.score)) == (True, "0.800")
    wrong = [f for f in result.feedback if f.correct is False]
    assert len(wrong) == 1 and wrong[0].expected in ("correct", "incorrect") and wrong[0].explanation
    assert may_work(worker, Stage.VERIFICATION)
    status, = qualifications.qualification_status(worker)
    assert status["status"] == "qualified"


def test_submitting_again_returns_the_stored_result(worker):
    verification_test()
    attempt = qualifications.start_qualification_test(worker, Stage.VERIFICATION)
    answers = right_answers(attempt, wrong=2)
    first = qualifications.submit_qualification_answers(worker, Stage.VERIFICATION, answers)
    again = qualifications.submit_qualification_answers(worker, Stage.VERIFICATION, answers)
    assert first.passed is False and again.score == first.score
    assert GoldAnswer.objects.count() == 5


def test_a_worker_who_fails_waits_before_a_retake_and_gets_no_units(worker):
    verification_test()
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION)
    WorkUnit.objects.create(stage=Stage.VERIFICATION, key="v1", family=family)
    attempt = qualifications.start_qualification_test(worker, Stage.VERIFICATION)
    qualifications.submit_qualification_answers(worker, Stage.VERIFICATION,
                                                right_answers(attempt, wrong=2))
    assert list(queue.units_open_to(worker=worker, stage=Stage.VERIFICATION)) == []
    with pytest.raises(WorkerFacingError, match="try again|again after"):
        qualifications.start_qualification_test(worker, Stage.VERIFICATION)
    QualificationAttempt.objects.update(submitted_at=timezone.now() - timedelta(days=2))
    assert qualifications.start_qualification_test(worker, Stage.VERIFICATION).pk != attempt.pk


def test_free_text_waits_for_a_researchers_review(worker):
    verification_test(free_text=1)
    attempt = qualifications.start_qualification_test(worker, Stage.VERIFICATION)
    result = qualifications.submit_qualification_answers(worker, Stage.VERIFICATION,
                                                         right_answers(attempt))
    assert result.pending_review and not result.passed
    assert qualifications.qualification_status(worker)[0]["status"] == "pending_review"
    free = GoldAnswer.objects.get(item__kind=GoldItem.Kind.FREE_TEXT)
    qualifications.review_free_text_answer(answer=free, correct=True, reviewer=make_researcher())
    assert WorkerQualification.objects.filter(worker=worker).exists()


def test_passing_on_mturk_grants_the_mturk_qualification(worker, mturk):
    verification_test()
    mturk.expect("create_qualification_type",
                 {"QualificationType": {"QualificationTypeId": "3QUAL00000000000000000"}})
    mturk.expect("associate_qualification_with_worker", {}, {
        "QualificationTypeId": "3QUAL00000000000000000", "WorkerId": worker.external_id,
        "IntegerValue": 100, "SendNotification": True})
    attempt = qualifications.start_qualification_test(worker, Stage.VERIFICATION)
    qualifications.submit_qualification_answers(worker, Stage.VERIFICATION, right_answers(attempt))
    assert not WorkerQualification.objects.get(worker=worker).mturk_granted
    # What the grant job (and the periodic platform job, for failures) runs:
    assert qualifying.push_pending_mturk_qualifications() == 1
    assert qualifying.push_pending_mturk_qualifications() == 0
    assert WorkerQualification.objects.get(worker=worker).mturk_granted
    mturk.done()


def test_a_second_live_answer_to_the_same_item_is_not_stored_and_moves_no_accuracy(worker):
    qualification = verification_test()
    WorkerQualification.objects.create(qualification=qualification, worker=worker,
                                       test_score="1.000")
    item = GoldItem.objects.filter(answer="correct").first()
    first = qualifications.record_live_gold_answer(worker, item.pk, "correct")
    again = qualifications.record_live_gold_answer(worker, item.pk, "incorrect")
    assert again.pk == first.pk and again.correct
    assert GoldAnswer.objects.filter(worker=worker, source=GoldAnswer.Source.LIVE).count() == 1
    granted = WorkerQualification.objects.get(worker=worker)
    assert (granted.live_answers, granted.live_accuracy) == (1, 1)


def test_live_gold_below_the_bar_pauses_the_worker_and_the_queue_stops(
        worker, mailoutbox, settings, django_capture_on_commit_callbacks):
    settings.ADMINS = [("Researcher", "researcher@example.org")]
    qualification = verification_test()
    WorkerQualification.objects.create(qualification=qualification, worker=worker,
                                       test_score="1.000")
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION)
    WorkUnit.objects.create(stage=Stage.VERIFICATION, key="v1", family=family)
    assert queue.units_open_to(worker=worker, stage=Stage.VERIFICATION).count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        for item in GoldItem.objects.filter(answer="correct"):
            qualifications.record_live_gold_answer(worker, item.pk, "incorrect")
    granted = WorkerQualification.objects.get(worker=worker)
    assert granted.status == WorkerQualification.Status.PAUSED and "0%" in granted.note
    assert list(queue.units_open_to(worker=worker, stage=Stage.VERIFICATION)) == []
    assert qualifications.qualification_status(worker)[0]["status"] == "paused"
    # The researcher is told (by the delivery job, run here), and the message names the worker by
    # pseudonym only.
    deliver_due()
    assert worker.pseudonym in mailoutbox[0].subject
    assert worker.external_id not in mailoutbox[0].subject + mailoutbox[0].body


def test_stages_without_a_test_and_in_house_annotators_are_not_held_back():
    verification_test()
    assert may_work(WorkerFactory(), Stage.CAPTION)
    assert may_work(WorkerFactory(platform="local"), Stage.VERIFICATION)
    assert not may_work(WorkerFactory(), Stage.VERIFICATION)


def test_a_test_has_five_to_ten_items():
    from django.db import IntegrityError

    with pytest.raises(IntegrityError):
        StageQualification.objects.create(stage=Stage.CAPTION, name="x", description="y", test_size=4)


def test_a_new_worker_is_shown_live_gold_more_often_until_a_pause_could_count(worker):
    qualification = verification_test()
    qualification.live_gold_every, qualification.new_worker_gold_every = 30_000, 1
    qualification.save()
    WorkerQualification.objects.create(qualification=qualification, worker=worker, test_score="1.000")
    # One in 30,000 for a known worker, but this one has answered none of the three live gold
    # items their live accuracy needs: gold now.
    assert next_step.live_gold_item(worker, Stage.VERIFICATION) is not None
    assert [next_step.gold_every(qualification, answered) for answered in range(5)] == [
        1, 1, 1, 30_000, 30_000]


def test_the_new_worker_rate_never_makes_gold_rarer_than_the_stages():
    qualification = StageQualification(live_gold_every=2, new_worker_gold_every=5, live_min_answers=3)
    assert next_step.gold_every(qualification, 0) == 2
    qualification.new_worker_gold_every = 0
    assert next_step.gold_every(qualification, 0) == 1
