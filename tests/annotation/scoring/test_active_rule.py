"""Active sampling's rule (issues 26, 41): a pair's weight is p(1 - p) times the variance of its
rating difference (annotation/scoring/active.py), so a round goes where the order is still open."""

import itertools
from collections import Counter

import numpy as np
import pandas as pd

from annotation.scoring.active import draw_pairs, pair_weights

MODELS = ["strong", "close-a", "close-b", "weak"]


def battles(record):
    """{(a, b): (a's wins, b's wins)} as the scoring functions' frame."""
    rows = []
    for (a, b), (wins, losses) in record.items():
        rows += [(a, b, "model_a")] * wins + [(a, b, "model_b")] * losses
    return pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])


# The strong model beat everyone and the weak one lost to everyone, six battles a pair; the two
# close ones split theirs 4 to 2. Rows in two orders: the rule reads counts, not row order.
RECORD = {
    ("strong", "close-a"): (6, 0), ("strong", "close-b"): (6, 0), ("strong", "weak"): (6, 0),
    ("close-a", "weak"): (6, 0), ("close-b", "weak"): (6, 0), ("close-a", "close-b"): (4, 2),
}
SETTLED_BUT_ONE = battles(RECORD)


def test_the_pair_whose_order_is_open_weighs_most_and_the_settled_pair_least():
    weights = pair_weights(SETTLED_BUT_ONE, MODELS, seed=0)
    assert max(weights, key=weights.get) == ("close-a", "close-b")
    assert min(weights, key=weights.get) == ("strong", "weak")
    assert weights[("strong", "weak")] < weights[("close-a", "close-b")] / 20


def test_a_round_concentrates_on_the_close_pair():
    weights = pair_weights(SETTLED_BUT_ONE, MODELS, seed=0)
    chosen = Counter(draw_pairs(weights, 200, np.random.default_rng(0)))
    assert chosen.most_common(1)[0][0] == ("close-a", "close-b")
    assert chosen[("strong", "weak")] < chosen[("close-a", "close-b")] / 10


def test_the_weights_and_the_round_are_the_same_under_the_same_seeds_whatever_the_row_order():
    shuffled = SETTLED_BUT_ONE.sample(frac=1.0, random_state=3).reset_index(drop=True)
    weights, again = pair_weights(SETTLED_BUT_ONE, MODELS, seed=5), pair_weights(shuffled, MODELS, seed=5)
    assert weights.keys() == again.keys()
    np.testing.assert_allclose([weights[p] for p in weights], [again[p] for p in weights], rtol=1e-9)
    assert draw_pairs(weights, 30, np.random.default_rng(7)) == draw_pairs(again, 30, np.random.default_rng(7))


def test_before_any_judgement_every_pair_weighs_the_same():
    weights = pair_weights(battles({}), MODELS)
    assert set(weights) == set(itertools.combinations(MODELS, 2))
    assert len(set(weights.values())) == 1
