"""Active battle sampling (issue 26, issue 41): where the next battles tell the most about the ranking.

A leaderboard is read as an order, so the rule asks of every candidate battle how much it is
expected to put right in that order. Bradley-Terry with its prior (bradley_terry.py) has an
approximately Gaussian posterior (Laplace: its mean is the fit, its precision the prior's plus
each judgement's Fisher information k^2 p(1 - p) along r_a - r_b, k = ln(base) / scale). Under
it, two models i, j whose rating difference is Delta +- sigma are in the wrong order with
probability Phi(-|Delta| / sigma), and the sum over the pairs is the expected number of pairs
the ranking has wrong (Kendall's distance to the truth). Judgements about to be asked shrink the
posterior along their pairs (a rank-one update each) and, before they are answered, move the
fitted difference to Delta' ~ N(Delta, sigma^2 - sigma'^2); the loss after them is
E[Phi(-|Delta'| / sigma')] (the preposterior expected loss). A round is chosen greedily: each
next battle is the one that lowers the round's expected loss the most, given the battles already
chosen for it. Pairs whose order is settled gain nothing; close pairs gain, but a pair whose
difference is already known to be near zero stops gaining (its order is a coin toss and costs a
ranking almost nothing), and every chosen battle lowers the gain of its own pair and of the pairs
that share its models, so a round spreads over the pairs where the order is open.

Chatbot Arena's rule, p(1 - p) * Var(r_a - r_b), which this replaces, weighs the information of a
battle and the uncertainty of one pair but not what the battle does to the order: over 120
simulated seeds it was worse than uniform sampling on 50 (benchmarks/quality_active.py).

Before any judgement the rule has nothing to go on, and a uniform draw of a first round is
uneven: 45 battles among 15 models leave some models in one battle or none, and the next rounds
spend their judgements finding where those belong. So the first round is balanced instead: every
model in as many battles as every other (to within one), no pair twice while another is left.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pandas as pd
from scipy.special import expit, ndtr, owens_t

from annotation.scoring import BT_PRIOR_SD
from annotation.scoring.bradley_terry import bradley_terry, pair_counts
from annotation.scoring.ratings import BASE, INITIAL_RATING, SCALE

# The slope of Bradley-Terry's log-odds per Elo point.
LOG_ODDS_PER_POINT = math.log(BASE) / SCALE
# Gauss-Hermite nodes for the expectation over where an unanswered battle moves a difference;
# the integrand is a smooth, bounded function of one normal, and more nodes changed no choice.
# Pairs more surely ordered than this are left out of the loss: no battle can gain there.
SETTLED = 1e-6


def ranking_posterior(battles: pd.DataFrame, models) -> tuple[np.ndarray, np.ndarray]:
    """The Laplace posterior of the ratings of `models` (in their order; Elo points): the
    Bradley-Terry fit with its prior as the mean and the inverse of the log-posterior's Hessian
    as the covariance. A model with no battle has the initial rating and the prior's variance."""
    models = list(models)
    index = {model: i for i, model in enumerate(models)}
    mean = np.full(len(models), INITIAL_RATING)
    precision = np.eye(len(models)) / BT_PRIOR_SD ** 2
    if len(battles):
        fitted = bradley_terry(battles)
        for model, rating in fitted.items():
            if model in index:
                mean[index[model]] = rating
        counts = pair_counts(battles)
        for low, high, n in zip(counts.low, counts.high, counts.low_wins + counts.ties + counts.high_wins, strict=True):
            a, b = counts.models[low], counts.models[high]
            if a in index and b in index:
                i, j = index[a], index[b]
                p = expit(LOG_ODDS_PER_POINT * (mean[i] - mean[j]))
                information = n * LOG_ODDS_PER_POINT ** 2 * p * (1.0 - p)
                precision[[i, j], [i, j]] += information
                precision[[i, j], [j, i]] -= information
    return mean, np.linalg.inv(precision)


def _expected_wrong_pairs(gap, before, after):
    """Expected number of pairs in the wrong order once the chosen battles are answered: per pair,
    E[Phi(-|gap'| / sd_after)] with gap' ~ N(gap, before - after) (variances; any leading axes).

    That is the chance that the true difference (~ N(gap, before)) and the fitted one after the
    battles (gap', correlated with it by sqrt((before - after) / before)) differ in sign, which for
    a bivariate normal is 2 T(|gap| / sd_before, sd_after / sd_moved), T Owen's function: the
    chance of the wrong order now, Phi(-|gap| / sd_before), when no battle touches the pair, and 0
    when the battles would settle it."""
    moved = np.sqrt(np.maximum(before - after, 1e-300))
    return 2.0 * owens_t(np.abs(gap) / np.sqrt(before), np.sqrt(np.maximum(after, 0.0)) / moved).sum(axis=-1)


def choose_pairs(mean, covariance, models, available: dict, n: int, rng: np.random.Generator) -> list:
    """`n` pairs from `available` ({pair: how many battles it may still have}, pairs of `models`),
    chosen one by one, each the battle that most lowers the expected number of pairs in the wrong
    order after the round, under the Gaussian posterior (`mean`, `covariance`; Elo points, in the
    order of `models`). Ties (as between models nothing is known of) go to a seeded shuffle."""
    models = list(models)
    index = {model: i for i, model in enumerate(models)}
    left = {pair: count for pair, count in available.items() if count > 0}
    if not left or n < 1:
        return []
    candidates = [list(left)[i] for i in rng.permutation(len(left))]
    targets = list(itertools.combinations(range(len(models)), 2))
    target_rows = np.zeros((len(targets), len(models)))
    target_rows[np.arange(len(targets)), [i for i, _ in targets]] = 1.0
    target_rows[np.arange(len(targets)), [j for _, j in targets]] = -1.0
    gap = target_rows @ mean
    before = np.einsum("tm,mn,tn->t", target_rows, covariance, target_rows)
    # Only pairs whose order is still open can gain; the rest add a constant to every candidate.
    open_ = ndtr(-np.abs(gap) / np.sqrt(before)) > SETTLED
    target_rows, gap, before = target_rows[open_], gap[open_], before[open_]
    rows = np.zeros((len(candidates), len(models)))
    rows[np.arange(len(candidates)), [index[a] for a, _ in candidates]] = 1.0
    rows[np.arange(len(candidates)), [index[b] for _, b in candidates]] = -1.0
    p = expit(LOG_ODDS_PER_POINT * (rows @ mean))
    information = LOG_ODDS_PER_POINT ** 2 * p * (1.0 - p)
    # Covariances between each candidate's difference and each target's (and with itself), kept
    # current by the rank-one update each chosen battle makes to the posterior.
    cross = rows @ covariance @ target_rows.T
    own = np.einsum("cm,mn,dn->cd", rows, covariance, rows)
    after = before.copy()
    usable = np.ones(len(candidates), dtype=bool)
    remaining = [left[pair] for pair in candidates]
    chosen = []
    while len(chosen) < n and usable.any():
        shrink = information / (1.0 + information * np.diag(own))
        loss = _expected_wrong_pairs(gap, before, after - shrink[:, None] * cross ** 2)
        best = int(np.argmin(np.where(usable, loss, np.inf)))
        chosen.append(candidates[best])
        after = after - shrink[best] * cross[best] ** 2
        cross = cross - shrink[best] * own[:, best, None] * cross[best]
        own = own - shrink[best] * np.outer(own[:, best], own[best])
        remaining[best] -= 1
        usable[best] = remaining[best] > 0
    return chosen


def informative_pairs(battles: pd.DataFrame, models, available: dict, n: int, rng: np.random.Generator) -> list:
    """`n` pairs for the next round by the rule above, from the judgements so far (`battles`)."""
    mean, covariance = ranking_posterior(battles, models)
    return choose_pairs(mean, covariance, models, available, n, rng)


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
