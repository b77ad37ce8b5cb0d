"""The side and option flags look both ways (issue 41): a verifier who answers "Incorrect" to
everything is flagged as one who answers "Correct" to everything is, a judge who always clicks the
right-hand response as one who always clicks the left, and a careful verifier beside a crowd that
under-says "Correct" is not flagged for saying it more often than they do."""

import numpy as np
import pytest
from scipy.stats import binomtest

from annotation import worker_report
from annotation.models import HumanJudgement, Stage, Verification, WorkUnit
from tests.factories import FamilyFactory, ReferenceFactory, WorkerFactory
from tests.scoring_factories import create_tournament, verified_instance, with_responses
from tests.worker_page_support import answer, flags_in, make_reviewer_who_sees_workers, page_of

pytestmark = pytest.mark.django_db
REFERENCES = 40


@pytest.fixture
def researcher(client):
    client.force_login(make_reviewer_who_sees_workers())
    return client


def verified(votes_of):
    """REFERENCES references, each answered by every worker in `votes_of` as `votes_of[worker](n)`
    says for reference n."""
    family = FamilyFactory()
    for number in range(REFERENCES):
        reference = ReferenceFactory(instance__family=family)
        unit = WorkUnit.objects.create(stage=Stage.VERIFICATION, key=f"reference:{reference.pk}", family=family,
                                       reference=reference, overlap=len(votes_of))
        for worker, votes in votes_of.items():
            vote = votes(number)
            Verification.objects.create(reference=reference, worker=worker, is_correct=vote,
                                        problem_in_response=not vote, assignment=answer(worker, unit, seconds=50))


def correct(number):
    """The truth the careful verifiers find: seven references in ten are correct."""
    return number % 10 < 7


@pytest.mark.parametrize("always", [True, False], ids=["correct", "incorrect"])
def test_a_verifier_who_gives_one_answer_to_everything_is_flagged_whichever_answer_it_is(researcher, always):
    careful = WorkerFactory.create_batch(3)
    lazy = WorkerFactory()
    verified({**{worker: correct for worker in careful}, lazy: lambda number: always})

    text = page_of(researcher, lazy)

    assert flags_in(text) == {"one_option"}
    said, crowd_said, times = ("Correct", "Incorrect", 12) if always else ("Incorrect", "Correct", 28)
    assert f"Leans to “{said}”" in text
    assert (f"said “{said}” of {times} of the {times} references the other verifiers' majority called "
            f"“{crowd_said}”, over {REFERENCES} answers compared with theirs") in text
    assert f"p = {1 / 2 ** times:.2g}" in text


def test_a_careful_verifier_is_not_flagged_for_saying_correct_more_often_than_a_crowd_that_under_says_it(researcher):
    # Each of five others misses two fifths of the correct references (says "Incorrect"), a
    # different two for each, so each says "Correct" on 42% of references where 70% are correct;
    # their majority, three to two, still finds every correct one. The careful verifier errs
    # twice, once each way.
    others = [WorkerFactory() for _ in range(5)]
    careful = WorkerFactory()

    def under_says(index):
        return lambda number: correct(number) and number % 5 not in (index, (index + 1) % 5)

    def careful_votes(number):
        return not correct(number) if number in (3, 8) else correct(number)

    verified({**{worker: under_says(index) for index, worker in enumerate(others)}, careful: careful_votes})

    # What the one-sided test against the other verifiers' rate of "Correct" saw: 28 of 40 against
    # 42%, below its p of 0.001, so it flagged this verifier.
    answers = Verification.objects.exclude(worker=careful)
    others_rate = answers.filter(is_correct=True).count() / answers.count()
    said_correct = Verification.objects.filter(worker=careful, is_correct=True).count()
    assert binomtest(said_correct, REFERENCES, others_rate, alternative="greater").pvalue < worker_report.P_VALUE

    assert flags_in(page_of(researcher, careful)) == set()


def test_a_careful_verifier_beside_a_crowd_whose_majority_misses_sound_references_is_not_flagged(researcher):
    # Three others each miss 45% of the correct references, at random and apart: their majority
    # calls 13 correct references "Incorrect". The careful verifier is right on all 40, so they
    # disagree with that majority 13 times one way and never the other, which setting the two kinds
    # of disagreement against each other (McNemar's test) took for a lean. But of the 25 references
    # the majority called "Incorrect" they said "Correct" of 13, about half.
    rng = np.random.default_rng(7)
    misses = rng.random((3, REFERENCES)) < 0.45
    others = [WorkerFactory() for _ in range(3)]
    careful = WorkerFactory()

    def under_says(index):
        return lambda number: correct(number) and not misses[index, number]

    verified({**{worker: under_says(index) for index, worker in enumerate(others)}, careful: correct})

    crowd_missed = sum(correct(number) and misses[:, number].sum() >= 2 for number in range(REFERENCES))
    assert crowd_missed == 13 and binomtest(crowd_missed, crowd_missed, 0.5).pvalue < worker_report.P_VALUE
    assert flags_in(page_of(researcher, careful)) == set()


def test_a_judge_who_always_clicks_the_right_hand_response_is_flagged_like_one_who_clicks_the_left(researcher):
    family = FamilyFactory()
    with_responses(verified_instance(family=family), "llava", "otter", "blip2", "instructblip", "mplug", "gpt4v")
    tournament = create_tournament(name="Right-hand clicks", include_reference=False)
    fair, always_right = WorkerFactory(), WorkerFactory()
    for number, battle in enumerate(tournament.battles.order_by("pk")):
        unit = WorkUnit.objects.create(stage=Stage.PAIRWISE, key=f"battle:{battle.pk}", family=family,
                                       battle=battle, overlap=2)
        shown_left = HumanJudgement.ShownLeft.A if number % 2 else HumanJudgement.ShownLeft.B
        for worker, choice in ((fair, "left" if shown_left == "a" else "right"), (always_right, "right")):
            HumanJudgement.objects.create(battle=battle, worker=worker, shown_left=shown_left, choice=choice,
                                          assignment=answer(worker, unit, seconds=50))

    text = page_of(researcher, always_right)

    assert flags_in(text) == {"same_side"}
    assert "chose the right response 15 of 15 times (100%)" in text and f"p = {2 / 2 ** 15:.2g}" in text
    assert flags_in(page_of(researcher, fair)) == set()
