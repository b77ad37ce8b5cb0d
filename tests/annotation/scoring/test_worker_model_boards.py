"""The leaderboard says how the crowd's judgements were aggregated, and a tournament may add
crowd-kit's pairwise model as a board of its own, whose worker skills the worker-model job stores."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from annotation import worker_models
from annotation.crowdwork.queue import next_assignment
from annotation.models import Stage, Tournament, WorkerReliability
from annotation.preferences.judgements import shown_left_for, submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring.freshness import refresh_leaderboard
from tests.factories import FamilyFactory, WorkerFactory
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db


def judged(aggregation, *, careless=True, name="Crowd boards"):
    """Two instances with three models each; three careful workers choose the better response
    (llava over instructblip over otter), a fourth (`careless`) the worse one. The choices are of
    responses, not sides (which side is left is drawn from the assignment's id, which depends on
    the tests run before), so every run makes the same choices."""
    order = {"llava": 0, "instructblip": 1, "otter": 2}
    for family in (FamilyFactory(), FamilyFactory()):
        with_responses(verified_instance(family=family), *order)
    tournament = create_tournament(name=name, judgements_per_pair=4, include_reference=False,
                                   aggregation=aggregation)
    launch_tournament(tournament=tournament)
    careful, careless = WorkerFactory.create_batch(3), (WorkerFactory() if careless else None)
    for worker in (*careful, careless) if careless else careful:
        while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
            battle = assignment.unit.battle
            better_is_a = order[battle.response_a.model_name] < order[battle.response_b.model_name]
            shown_a_left = shown_left_for(assignment=assignment, tournament=tournament) == "a"
            better = "left" if better_is_a == shown_a_left else "right"
            choice = better if worker != careless else {"left": "right", "right": "left"}[better]
            submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice=choice)
    return tournament, careful, careless


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_tournament"))
    client.force_login(user)
    return client


def test_the_crowd_board_says_how_it_aggregated(staff_client):
    tournament, _, _ = judged(Tournament.Aggregation.JUDGEMENTS)
    refresh_leaderboard(tournament=tournament)  # the background job, once judgements change
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()
    assert "Aggregation: Each judgement a battle (Elo, Bradley-Terry)." in page
    assert "crowd-kit" not in page


def test_a_noisy_bradley_terry_tournament_adds_crowd_kits_board(staff_client):
    tournament, _, _ = judged(Tournament.Aggregation.NOISY_BT)
    refresh_leaderboard(tournament=tournament)  # the background job, once judgements change
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()
    assert "Human judgements: noisy Bradley-Terry (crowd-kit)" in page
    assert "Aggregation: Also crowd-kit&#x27;s noisy Bradley-Terry, weighing workers by skill." in page
    board = page.split("board-human-noisy_bt")[1]
    assert board.index("llava") < board.index("instructblip") < board.index("otter")


def test_a_noisy_bradley_terry_board_shows_no_scores_while_its_fit_does_not_settle(staff_client):
    # Only the careful workers: llava always beat instructblip, which always beat otter. Noisy
    # Bradley-Terry's optimiser overflows on such judgements and stops anywhere.
    tournament, _, _ = judged(Tournament.Aggregation.NOISY_BT, careless=False)
    refresh_leaderboard(tournament=tournament)
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()
    board = page.split("board-human-noisy_bt")[1].split("<section")[0]
    assert "No scores yet: on the crowd&#x27;s choices so far noisy Bradley-Terry has no settled fit" in board
    assert "worker-model-scores" not in board
    assert "Each judgement a battle" in page.split("board-human-noisy_bt")[0]  # the Elo board beside it stands


def test_the_job_stores_each_workers_noisy_bradley_terry_skill():
    tournament, careful, careless = judged(Tournament.Aggregation.NOISY_BT)
    assert worker_models.store_pairwise_skills() == 4
    skills = dict(WorkerReliability.objects.filter(stage=Stage.PAIRWISE, model="noisy_bt")
                  .values_list("worker_id", "reliability"))
    assert set(skills) == {worker.pk for worker in (*careful, careless)}
    answers = WorkerReliability.objects.get(worker=careless, stage=Stage.PAIRWISE).answers
    assert answers == tournament.battles.count()


def test_a_fit_that_did_not_settle_stores_no_skills_and_keeps_the_last_settled_ones():
    tournament, careful, careless = judged(Tournament.Aggregation.NOISY_BT)
    assert worker_models.store_pairwise_skills() == 4
    stored = dict(WorkerReliability.objects.filter(stage=Stage.PAIRWISE).values_list("worker_id", "reliability"))
    # The first tournament leaves noisy Bradley-Terry, and one the careful workers alone judge takes
    # it up: its models separate completely, and the fit does not settle.
    Tournament.objects.filter(pk=tournament.pk).update(aggregation=Tournament.Aggregation.JUDGEMENTS)
    judged(Tournament.Aggregation.NOISY_BT, careless=False, name="Careful only")
    assert worker_models.store_pairwise_skills() == 0
    assert dict(WorkerReliability.objects.filter(stage=Stage.PAIRWISE).values_list("worker_id", "reliability")) \
        == stored
