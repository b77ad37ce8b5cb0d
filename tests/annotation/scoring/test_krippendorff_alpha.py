"""Krippendorff's alpha among annotators: verifiers per family (the verification stage), workers per
battle (each criterion of a tournament), beside Cohen's kappa on the dashboard, the family's page
and in the API."""

import html
from io import StringIO

import krippendorff
import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.urls import reverse

from annotation.collection import progress
from annotation.crowdwork import review
from annotation.crowdwork.queue import next_assignment
from annotation.models import Assignment, HumanJudgement, Stage, Verification, WorkUnit
from annotation.preferences.judgements import pairwise_task, submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring import agreement
from annotation.scoring.freshness import refresh_leaderboard
from tests.factories import FamilyFactory, ReferenceFactory, WorkerFactory, launch
from tests.scoring_factories import create_tournament, verified_instance, with_responses

# The package's own example (its docstring, from Krippendorff's "Computing Krippendorff's
# alpha-reliability"): three coders, fifteen units, nominal alpha 0.691358.
DOCS_RELIABILITY_DATA = [
    [np.nan, np.nan, np.nan, np.nan, np.nan, 3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
    [1, np.nan, 2, 1, 3, 3, 4, 3, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
    [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
]


def _answers(reliability_data):
    """(unit, value) per answer of a coders x units matrix."""
    return [(unit, int(value)) for row in reliability_data for unit, value in enumerate(row) if value == value]


def test_nominal_alpha_gives_the_packages_documented_value_and_what_it_rests_on():
    units, values = zip(*_answers(DOCS_RELIABILITY_DATA), strict=True)
    found = agreement.nominal_alpha(units, values)
    assert found.alpha == pytest.approx(0.691358, abs=1e-6)
    assert found.alpha == pytest.approx(krippendorff.alpha(reliability_data=DOCS_RELIABILITY_DATA,
                                                           level_of_measurement="nominal"))
    # Units 0 (one answer), 1 and 13 (none) cannot be paired.
    assert (found.units, found.answers) == (12, 26)


def test_nominal_alpha_from_grouped_counts_equals_alpha_from_single_answers():
    answers = _answers(DOCS_RELIABILITY_DATA)
    grouped = {}
    for answer in answers:
        grouped[answer] = grouped.get(answer, 0) + 1
    units, values = zip(*grouped, strict=True)
    assert agreement.nominal_alpha(units, values, counts=list(grouped.values())) == agreement.nominal_alpha(
        *zip(*answers, strict=True))


def test_nominal_alpha_is_none_without_pairs_or_without_any_disagreement_to_expect():
    assert agreement.nominal_alpha([1, 2], ["a", "b"]) == (None, 0, 0)
    assert agreement.nominal_alpha([1, 1, 2, 2], ["a", "a", "a", "a"]) == (None, 2, 4)
    assert agreement.nominal_alpha([], []) == (None, 0, 0)


# --- verification: the family's verifiers ------------------------------------------------------

VOTES = [[True, True, True], [True, True, False], [False, False, False], [True, False, False]]


@pytest.fixture
def verified_by_three(db):
    """Four references of one family, each voted on by the same three verifiers (VOTES)."""
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=3)
    workers = [WorkerFactory() for _ in range(3)]
    for votes in VOTES:
        reference = ReferenceFactory(instance__family=family)
        for worker, vote in zip(workers, votes, strict=True):
            Verification.objects.create(reference=reference, worker=worker, is_correct=vote,
                                        problem_in_response=not vote)
    return family


@pytest.fixture
def researcher_client(client):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=[
        "view_tournament", "view_instructionfamily", "change_instructionfamily"]))
    client.force_login(user)
    return client


def _expected_verification_alpha(votes):
    reliability = np.array(votes, dtype=float).T  # verifiers x references
    return krippendorff.alpha(reliability_data=reliability, level_of_measurement="nominal")


def test_the_family_api_and_workflow_page_show_the_verifiers_alpha(verified_by_three, researcher_client):
    family = verified_by_three
    api = researcher_client.get(f"/api/families/{family.pk}/agreement/").json()
    page = researcher_client.get(reverse("admin:annotation_instructionfamily_workflow", args=[family.pk]))

    assert api["alpha"] == pytest.approx(_expected_verification_alpha(VOTES))
    assert (api["units"], api["answers"]) == (4, 12)
    assert f"Krippendorff's α {api['alpha']:.2f} over 4 references (12 answers)" in html.unescape(page.content.decode())


def test_a_rejected_vote_leaves_the_verifiers_alpha(verified_by_three):
    family = verified_by_three
    worker = WorkerFactory()
    reference = ReferenceFactory(instance__family=family)
    unit_votes = [True, False]
    for vote in unit_votes:
        Verification.objects.create(reference=reference, worker=WorkerFactory(), is_correct=vote,
                                    problem_in_response=not vote)
    unit = WorkUnit.objects.create(stage=Stage.VERIFICATION, key=f"extra-{reference.pk}", family=family,
                                   reference=reference)
    lease = Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                      lease_expires_at=unit.created_at)
    Verification.objects.create(reference=reference, worker=worker, assignment=lease, is_correct=True)
    assert progress.verification_agreement(family=family).answers == 15

    review.reject_work(assignments=[lease], reason="Opened no image.")

    found = progress.verification_agreement(family=family)
    assert found.alpha == pytest.approx(_expected_verification_alpha(VOTES + [[True, False, np.nan]]))
    assert (found.units, found.answers) == (5, 14)


# --- pairwise: the crowd per battle -------------------------------------------------------------


@pytest.fixture
def judged_by_three(db):
    """Six battles (four models on one instance), each judged by three workers through the real
    queue: one always prefers the shorter model name, one the longer, one always clicks left."""
    instance = verified_instance()
    with_responses(instance, "llava", "otter-large", "blip", "instructblip")
    tournament = create_tournament(name="Alpha pilot", judgements_per_pair=3, include_reference=False)
    launch_tournament(tournament=tournament)
    for habit in ("short", "long", "left"):
        worker = WorkerFactory()
        while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
            task = pairwise_task(assignment=assignment)
            left, right = len(task["left"].model_name), len(task["right"].model_name)
            choice = {"short": "left" if left < right else "right", "long": "left" if left > right else "right",
                      "left": "left"}[habit]
            submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice=choice)
    return tournament


def _expected_pairwise_alpha(tournament):
    judgements = list(HumanJudgement.objects.filter(battle__tournament=tournament))
    workers = sorted({j.worker_id for j in judgements})
    battles = sorted({j.battle_id for j in judgements})
    reliability = np.full((len(workers), len(battles)), np.nan)
    for judgement in judgements:
        # The side the worker saw, turned back into the battle's own A or B.
        won_a = judgement.winner_side(judgement.choice) == "model_a"
        reliability[workers.index(judgement.worker_id), battles.index(judgement.battle_id)] = 0 if won_a else 1
    return krippendorff.alpha(reliability_data=reliability, level_of_measurement="nominal")


def test_the_leaderboard_api_and_page_show_the_crowds_alpha_beside_the_judges_kappa(judged_by_three,
                                                                                       researcher_client):
    tournament = judged_by_three
    # What the background job does once judgements change, for the page's and the API's rounds.
    refresh_leaderboard(tournament=tournament)
    refresh_leaderboard(tournament=tournament, rounds=20)
    api = researcher_client.get(f"/api/tournaments/{tournament.pk}/leaderboard/?rounds=20").json()
    page = html.unescape(researcher_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode())

    human = next(board for board in api if board["key"] == "human")
    assert human["alpha"]["alpha"] == pytest.approx(_expected_pairwise_alpha(tournament))
    assert (human["alpha"]["units"], human["alpha"]["answers"]) == (6, 18)
    assert f"Krippendorff's α {human['alpha']['alpha']:.2f} over 6 battles (18 answers)" in page
    printed = StringIO()
    call_command("leaderboard", tournament.name, "--rounds", "20", stdout=printed)
    assert (f"Among the crowd themselves: Krippendorff's α {human['alpha']['alpha']:.2f} over 6 battles "
            "(18 answers)") in printed.getvalue()
