"""Active battle sampling (issue 26): where the next battles tell the most about the ranking.

The rule, as Chatbot Arena's active sampling uses it: a pair of models is drawn with probability
proportional to p(1 - p) * Var(r_a - r_b), where p is the fitted chance that a beats b and the
variance is that of their rating difference. p(1 - p) is the Fisher information of one more
battle of the pair (largest when they are close), and the variance is how much is still unknown
about their order (largest when they have met little). Both come from the project's Bradley-Terry
with its prior (bradley_terry.py): the point fit gives p, its bootstrap the variance (with the
covariance of the two ratings, which the per-model intervals alone would lose). A model with no
battle yet has the prior's variance and the initial rating.

Before any judgement the rule has nothing to go on, and a uniform draw of a first round is
uneven: 45 battles among 15 models leave some models in one battle or none, and the next rounds
spend their judgements finding where those belong. So the first round is balanced instead: every
model in as many battles as every other (to within one), no pair twice while another is left.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pandas as pd

from annotation.scoring import BT_PRIOR_SD
from annotation.scoring.bradley_terry import bootstrap_bradley_terry_samples, bradley_terry
from annotation.scoring.ratings import BASE, INITIAL_RATING, SCALE

# Enough bootstrap rounds for a variance to within about 10%; the weights only steer a draw.
ACTIVE_ROUNDS = 200


def pair_weights(battles: pd.DataFrame, models, *, seed: int = 0, rounds: int = ACTIVE_ROUNDS) -> dict:
    """{(a, b): p(1 - p) * Var(r_a - r_b)} for every unordered pair of `models` (in their order);
    with no battles every pair weighs the same, so the draw is uniform."""
    models = list(models)
    if len(battles):
        # The bootstrap codes the models in order of first appearance and draws its multinomial
        # over cells in that order, so the same judgements in another row order (a query without
        # an order) gave other weights, by up to a quarter: the rows are put in one order first.
        battles = battles.sort_values(["model_a", "model_b", "winner"], kind="stable", ignore_index=True)
        point = bradley_terry(battles)
        samples = bootstrap_bradley_terry_samples(battles, rounds=rounds, seed=seed)
    else:
        point, samples = pd.Series(dtype=float), pd.DataFrame()
    prior_variance = BT_PRIOR_SD ** 2
    weights = {}
    for a, b in itertools.combinations(models, 2):
        if a in samples.columns and b in samples.columns:
            variance = float((samples[a] - samples[b]).var())
        else:
            variance = sum(float(samples[m].var()) if m in samples.columns else prior_variance for m in (a, b))
        gap = point.get(b, INITIAL_RATING) - point.get(a, INITIAL_RATING)
        p = 1.0 / (1.0 + BASE ** (gap / SCALE))
        weights[(a, b)] = p * (1.0 - p) * variance
    return weights


def draw_pairs(weights: dict, n: int, rng: np.random.Generator) -> list:
    """`n` pairs drawn with replacement, each with probability proportional to its weight."""
    pairs = list(weights)
    if not pairs or n < 1:
        return []
    w = np.array([weights[pair] for pair in pairs], dtype=float)
    total = w.sum()
    p = w / total if total > 0 else None
    return [pairs[i] for i in rng.choice(len(pairs), size=n, replace=True, p=p)]


def balanced_pairs(available: dict, n: int, rng: np.random.Generator) -> list:
    """`n` pairs for a first round, from `available` ({pair: how many battles it may still have}):
    each next pair is one drawn least so far, then one whose busier model has the fewest battles,
    then the fewest between them, ties drawn at random; so every model is in as many battles as
    every other, to within one, wherever the pairs allow."""
    left = {pair: count for pair, count in available.items() if count > 0}
    battles, drawn, chosen = Counter(), Counter(), []
    while left and len(chosen) < n:
        keys = {pair: (drawn[pair], max(battles[pair[0]], battles[pair[1]]), battles[pair[0]] + battles[pair[1]])
                for pair in left}
        fewest = min(keys.values())
        options = [pair for pair, key in keys.items() if key == fewest]
        pair = options[rng.integers(len(options))]
        chosen.append(pair)
        drawn[pair] += 1
        battles.update(pair)
        left[pair] -= 1
        if not left[pair]:
            del left[pair]
    return chosen
