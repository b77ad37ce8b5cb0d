"""A tournament that states how often a judgement is right is checked against the crowd's gold
answers on the pairwise stage, and its workflow page warns when they differ (issue 41: at a stated
0.8, battles called decided at 0.9 were right 72% and 83% of the time on two real crowds)."""

import pytest
from django.urls import reverse

from annotation.crowdwork.queue import next_assignment
from annotation.crowdwork.stopping import stated_accuracy_warning
from annotation.models import (
    GoldAnswer,
    GoldItem,
    QualificationAttempt,
    Stage,
    StageQualification,
    WorkerBlock,
    WorkerQualification,
)
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from tests.factories import WorkerFactory
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db


@pytest.fixture
def tournament():
    with_responses(verified_instance(), "llava", "otter")
    return launch_tournament(tournament=create_tournament(
        name="Stated", include_reference=False, judgements_per_pair=5, adaptive=True,
        posterior_threshold=0.9, judgement_accuracy=0.8))


def gold_answers(worker, *, right, wrong, source=GoldAnswer.Source.LIVE, status=WorkerQualification.Status.QUALIFIED,
                 attempt=None):
    """`right` and `wrong` checked gold answers of `worker`, qualified for the pairwise stage with
    `status` (None: not qualified), each on an item of its own."""
    qualification, _ = StageQualification.objects.get_or_create(
        stage=Stage.PAIRWISE, defaults={"name": "Which is better?", "description": "Pick the better answer."})
    if status:
        WorkerQualification.objects.get_or_create(qualification=qualification, worker=worker,
                                                  defaults={"test_score": "0.800", "status": status})
    for correct in [True] * right + [False] * wrong:
        item = GoldItem.objects.create(qualification=qualification, content={}, question="Which is better?",
                                       options=["left", "right"], answer="left")
        GoldAnswer.objects.create(item=item, worker=worker, source=source, answer="x", correct=correct,
                                  attempt=attempt and attempt(qualification))
    return qualification


def test_a_crowd_right_less_often_than_stated_is_warned_of_with_its_own_figure(tournament):
    gold_answers(WorkerFactory(), right=26, wrong=14)  # 65%, 95% interval 50% to 78%

    warning = stated_accuracy_warning(tournament)

    assert "right 80% of the time" in warning and "right 26 of 40 times (65%" in warning
    assert "called decided too early" in warning and "about 0.65" in warning
    assert "the crowd's gold answers" in warning


def test_before_anybody_judged_only_the_gold_of_workers_who_may_judge_counts(tournament):
    """Workers who failed the stage's test, are paused or blocked do not judge, and a failed attempt says
    nothing of the worker who passed a retake: their answers say nothing of the crowd that will."""

    def tested(*, right, wrong, status=WorkerQualification.Status.QUALIFIED, worker=None, attempt=None):
        gold_answers(worker or WorkerFactory(), right=right, wrong=wrong, source=GoldAnswer.Source.TEST,
                     status=status, attempt=attempt)

    tested(right=33, wrong=7)  # 82.5%
    tested(right=2, wrong=38, status=None)
    tested(right=2, wrong=38, status=WorkerQualification.Status.PAUSED)
    blocked = WorkerFactory()
    WorkerBlock.objects.create(worker=blocked, reason="Answered at random.")
    tested(right=2, wrong=38, worker=blocked)
    assert stated_accuracy_warning(tournament) == ""
    retaken = WorkerFactory()

    def attempt_that(status):
        def attempt(qualification):
            return QualificationAttempt.objects.get_or_create(qualification=qualification, worker=retaken,
                                                              status=status, defaults={"item_ids": []})[0]
        return attempt

    tested(right=2, wrong=38, worker=retaken, attempt=attempt_that(QualificationAttempt.Status.FAILED))
    tested(right=5, wrong=0, worker=retaken, attempt=attempt_that(QualificationAttempt.Status.PASSED))
    assert stated_accuracy_warning(tournament) == ""
    tested(right=12, wrong=28)
    assert "right 50 of 85 times" in stated_accuracy_warning(tournament)


def test_a_crowd_whose_gold_allows_the_stated_accuracy_is_not_warned_of(tournament):
    gold_answers(WorkerFactory(), right=33, wrong=7)  # 82.5%, 95% interval 68% to 91%
    assert stated_accuracy_warning(tournament) == ""


def test_once_anybody_has_judged_the_tournament_only_its_judges_gold_counts(tournament):
    judge, stranger = WorkerFactory(), WorkerFactory()
    # Judged before the stage had a test, which would send a new worker to it first.
    submit_pairwise_judgement(assignment_id=next_assignment(worker=judge, stage=Stage.PAIRWISE).pk, worker=judge,
                              choice="left")
    gold_answers(stranger, right=5, wrong=35)
    gold_answers(judge, right=160, wrong=40)  # 80%
    assert stated_accuracy_warning(tournament) == ""
    gold_answers(judge, right=0, wrong=120)  # now 50%
    assert "its judges' gold answers" in stated_accuracy_warning(tournament)


def test_nothing_is_said_without_gold_without_a_stated_accuracy_or_when_not_asking_until_decided(tournament):
    assert stated_accuracy_warning(tournament) == ""
    gold_answers(WorkerFactory(), right=10, wrong=30)
    assert stated_accuracy_warning(tournament)
    tournament.adaptive = False
    assert stated_accuracy_warning(tournament) == ""
    tournament.adaptive, tournament.judgement_accuracy = True, None
    assert stated_accuracy_warning(tournament) == ""


def test_the_workflow_page_shows_the_warning(tournament, admin_client):
    gold_answers(WorkerFactory(), right=20, wrong=20)
    page = admin_client.get(reverse("admin:annotation_tournament_workflow", args=[tournament.pk])).content.decode()
    assert "workflow-warning" in page and "right 20 of 40 times (50%" in page


def test_the_advice_is_an_accuracy_a_tournament_takes_or_none_at_all(tournament):
    # A tournament states an accuracy strictly between 0.5 and 1 (its constraint).
    gold_answers(WorkerFactory(), right=40, wrong=0)
    assert "about 0.99" in stated_accuracy_warning(tournament)
    gold_answers(WorkerFactory(), right=0, wrong=60)  # 40%
    warning = stated_accuracy_warning(tournament)
    assert "no better than a coin toss" in warning and "about" not in warning
