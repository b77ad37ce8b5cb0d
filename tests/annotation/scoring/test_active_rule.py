"""Active sampling's rule (issue 41): each round's battles go where they are expected to put the
most of the ranking's order right, under Bradley-Terry's posterior (annotation/scoring/active.py)."""

import itertools
from collections import Counter

import numpy as np
import pandas as pd
from scipy.special import expit

from annotation.scoring import BT_PRIOR_SD
from annotation.scoring.active import LOG_ODDS_PER_POINT, informative_pairs, ranking_posterior

MODELS = ["strong", "close-a", "close-b", "weak"]


def battles(record):
    """{(a, b): (a's wins, b's wins)} as the scoring functions' frame."""
    rows = []
    for (a, b), (wins, losses) in record.items():
        rows += [(a, b, "model_a")] * wins + [(a, b, "model_b")] * losses
    return pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])


# The strong model beat everyone and the weak one lost to everyone, six battles a pair; the two
# close ones split theirs 4 to 2.
SETTLED_BUT_ONE = battles({
    ("strong", "close-a"): (6, 0), ("strong", "close-b"): (6, 0), ("strong", "weak"): (6, 0),
    ("close-a", "weak"): (6, 0), ("close-b", "weak"): (6, 0), ("close-a", "close-b"): (4, 2),
})


def every_pair(count):
    return dict.fromkeys(itertools.combinations(MODELS, 2), count)


def test_a_round_goes_to_the_pair_whose_order_is_open():
    chosen = Counter(informative_pairs(SETTLED_BUT_ONE, MODELS, every_pair(20), 12, np.random.default_rng(0)))
    assert chosen.most_common(1)[0][0] == ("close-a", "close-b")
    assert chosen[("close-a", "close-b")] > 12 / 2
    # The models furthest apart are in the right order beyond doubt: no battle of theirs can help.
    assert chosen[("strong", "weak")] == 0


def test_a_round_is_the_same_under_the_same_seed():
    def draw(seed):
        return informative_pairs(SETTLED_BUT_ONE, MODELS, every_pair(20), 12, np.random.default_rng(seed))

    assert draw(7) == draw(7)


def test_a_round_takes_no_pair_more_often_than_it_may_still_have():
    available = every_pair(20) | {("close-a", "close-b"): 2}
    chosen = Counter(informative_pairs(SETTLED_BUT_ONE, MODELS, available, 12, np.random.default_rng(0)))
    assert chosen[("close-a", "close-b")] == 2
    assert sum(chosen.values()) == 12


def test_before_any_judgement_a_round_spreads_over_distinct_pairs():
    models = [f"model-{n:02d}" for n in range(15)]
    pairs = dict.fromkeys(itertools.combinations(models, 2), 45)
    chosen = informative_pairs(battles({}), models, pairs, 45, np.random.default_rng(26))
    # Every battle chosen makes the next battle of its models worth less, so none is asked twice.
    assert len(set(chosen)) == 45
    assert max(Counter(model for pair in chosen for model in pair).values()) <= 8


def test_the_posterior_is_the_prior_for_a_model_never_judged_and_narrows_with_judgements():
    mean, covariance = ranking_posterior(SETTLED_BUT_ONE, [*MODELS, "unseen"])
    assert mean[-1] == 1000.0
    assert covariance[-1, -1] == BT_PRIOR_SD ** 2
    assert mean[0] > mean[1] > mean[3] and mean[0] > mean[2] > mean[3]
    more = battles({("close-a", "close-b"): (40, 20)})
    _, narrower = ranking_posterior(pd.concat([SETTLED_BUT_ONE, more]), MODELS)
    gap_variance = np.array([0, 1, -1, 0]) @ covariance[:4, :4] @ np.array([0, 1, -1, 0])
    assert np.array([0, 1, -1, 0]) @ narrower @ np.array([0, 1, -1, 0]) < gap_variance / 5


def test_the_posterior_precision_is_the_prior_plus_each_judgements_fisher_information():
    two = battles({("close-a", "close-b"): (3, 1)})
    mean, covariance = ranking_posterior(two, ["close-a", "close-b"])
    p = expit(LOG_ODDS_PER_POINT * (mean[0] - mean[1]))
    information = 4 * LOG_ODDS_PER_POINT ** 2 * p * (1 - p)
    expected = np.eye(2) / BT_PRIOR_SD ** 2 + information * np.array([[1, -1], [-1, 1]])
    np.testing.assert_allclose(np.linalg.inv(covariance), expected, rtol=1e-10)
