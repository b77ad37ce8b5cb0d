"""Active battle sampling (issue 26): rounds of battles drawn where they tell the most."""

import itertools
from collections import Counter

import numpy as np
import pytest

from annotation.crowdwork.queue import next_assignment
from annotation.models import Battle, Stage, Tournament
from annotation.preferences.judgements import pairwise_task, submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament, make_next_round, round_due
from annotation.scoring.active import balanced_pairs
from crowdbench.celery import app
from tests.factories import FamilyFactory, WorkerFactory
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db

# Two models of the same strength and three far from them and from each other (Elo points).
STRENGTHS = {"twin-a": 1000, "twin-b": 1000, "strong": 1800, "weak": 200, "strongest": 2600}


def active_tournament(*, instances=25, battles_per_round=60):
    family = FamilyFactory()
    for _ in range(instances):
        with_responses(verified_instance(family=family), *STRENGTHS)
    tournament = create_tournament(name="Active", sampling=Tournament.Sampling.ACTIVE, battle_count=1000,
                                   battles_per_round=battles_per_round, judgements_per_pair=1,
                                   include_reference=False)
    return launch_tournament(tournament=tournament)


def judge_everything():
    """One simulated worker answers every open battle: the stronger model wins, and twins take turns
    winning, so that their judgements say they are even (a coin can make them look far apart in
    the few battles a balanced first round gives them). The turns go by name, not by the side a
    twin is shown on: the side is drawn from the assignment's id, and turns by side once gave one
    twin five of six."""
    worker = WorkerFactory()
    twin_battles = 0
    while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
        task = pairwise_task(assignment=assignment)
        left, right = (STRENGTHS[task[side].model_name] for side in ("left", "right"))
        twin_battles += left == right
        twin_winning = "twin-a" if twin_battles % 2 == 1 else "twin-b"
        better_left = left > right or (left == right and task["left"].model_name == twin_winning)
        submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker,
                                  choice="left" if better_left else "right")


def pairs_of(battles):
    return Counter(tuple(sorted((b.response_a.model_name, b.response_b.model_name)))
                   for b in battles.select_related("response_a", "response_b"))


def test_an_active_tournament_starts_with_one_balanced_round():
    tournament = active_tournament(battles_per_round=100)
    assert set(tournament.battles.values_list("round", flat=True)) == {1}
    counts = pairs_of(tournament.battles.all())
    # Ten pairs, a hundred battles: every pair ten times, so every model is in forty.
    assert counts == dict.fromkeys(itertools.combinations(sorted(STRENGTHS), 2), 10)


def test_a_first_round_smaller_than_the_pairs_puts_every_model_in_as_many_battles():
    models = [f"model-{n:02d}" for n in range(15)]
    pairs = balanced_pairs(dict.fromkeys(itertools.combinations(models, 2), 3), 45, np.random.default_rng(26))
    assert len(set(pairs)) == 45
    assert set(Counter(model for pair in pairs for model in pair).values()) == {6}


def test_a_balanced_round_spreads_over_the_pairs_it_may_still_use():
    available = {("a", "b"): 1, ("a", "c"): 5, ("b", "c"): 5}
    pairs = balanced_pairs(available, 7, np.random.default_rng(0))
    assert Counter(pairs) == {("a", "b"): 1, ("a", "c"): 3, ("b", "c"): 3}


def test_the_second_round_concentrates_on_the_closest_pair():
    tournament = active_tournament()
    judge_everything()
    assert make_next_round(tournament_id=tournament.pk) == 60
    first = pairs_of(tournament.battles.filter(round=1))
    second = pairs_of(tournament.battles.filter(round=2))
    twins = ("twin-a", "twin-b")
    assert second[twins] > 2 * first[twins]
    assert second[twins] == max(second.values())
    # The two models 2400 points apart are settled: they are hardly drawn again.
    assert second[("strongest", "weak")] < first[("strongest", "weak")]


def test_making_the_next_round_twice_makes_one_round():
    tournament = active_tournament()
    assert not round_due(tournament)
    judge_everything()
    assert round_due(tournament)
    assert make_next_round(tournament_id=tournament.pk) == 60
    assert make_next_round(tournament_id=tournament.pk) == 0
    assert sorted(set(Battle.objects.filter(tournament=tournament).values_list("round", flat=True))) == [1, 2]
    # The new round is in the queue, so it is no longer due until it is answered.
    assert not round_due(tournament)
    assert tournament.battles.filter(round=2, work_units__status="open").count() == 60


def test_the_outbox_owes_an_answered_active_tournament_its_next_round():
    from tasks.outbox import owed_jobs

    tournament = active_tournament()
    assert not [job for job in owed_jobs() if job[0] == "tasks.next_battle_round"]
    judge_everything()
    assert [job[:2] for job in owed_jobs() if job[0] == "tasks.next_battle_round"] == [
        ("tasks.next_battle_round", (tournament.pk,))]


def test_the_workflow_page_says_which_round_an_active_tournament_is_on(admin_client):
    from django.urls import reverse

    tournament = active_tournament()
    judge_everything()
    make_next_round(tournament_id=tournament.pk)
    page = admin_client.get(reverse("admin:annotation_tournament_workflow", args=[tournament.pk])).content.decode()
    assert "120 battles, round 2 (active sampling, at most 1000)" in page


def test_the_tournament_form_offers_active_sampling_with_its_help(admin_client):
    from django.urls import reverse

    page = admin_client.get(reverse("admin:annotation_tournament_add")).content.decode()
    assert 'value="active"' in page
    assert "Active sampling: battles per round." in page


@pytest.mark.django_db(transaction=True)
def test_the_answer_that_closes_a_round_brings_the_next_one(request):
    """The last battle of a round answered, the next round's job runs (here where it is queued, as
    a worker would a moment later) and its battles are open at once, without waiting for the sweep;
    so one worker answering all they are offered goes through round after round."""
    app.conf.task_always_eager = True
    request.addfinalizer(lambda: setattr(app.conf, "task_always_eager", False))
    tournament = active_tournament(instances=2, battles_per_round=4)
    judge_everything()  # answers whatever the queue offers, the rounds that follow included
    per_round = Counter(Battle.objects.filter(tournament=tournament).values_list("round", flat=True))
    assert len(per_round) >= 2 and sorted(per_round) == list(range(1, len(per_round) + 1))
    assert max(per_round.values()) <= 4
