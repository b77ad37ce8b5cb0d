"""The Bradley-Terry ratings over battles, on the Elo scale, fitted with a stated Gaussian prior
(maximum a posteriori), and their bootstrap over the same resampled battles as online Elo's
(ratings.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit, log_expit
from threadpoolctl import threadpool_limits

from annotation.scoring import BT_PRIOR_SD
from annotation.scoring.ratings import (
    BASE,
    INITIAL_RATING,
    SCALE,
    encode_battles,
    rating_series,
    summarise_samples,
)

# Newton stops when no rating moves by more than this (natural units: 4e-11 Elo points).
NEWTON_STEP_TOL = 1e-13
NEWTON_MAX_STEPS = 50


@dataclass(frozen=True)
class PairCounts:
    """Battles aggregated per unordered pair (low code, high code): how often each side won and
    how often they tied. The likelihood depends on the battles only through these counts."""

    low: np.ndarray
    high: np.ndarray
    low_wins: np.ndarray
    ties: np.ndarray
    high_wins: np.ndarray
    models: list[str]


def pair_counts(battles: pd.DataFrame) -> PairCounts:
    """Aggregate the battles per unordered pair; a million battles among 15 models become at most
    105 rows, so the fit and its bootstrap cost the same whatever the number of battles."""
    enc = encode_battles(battles)
    n_models = len(enc.models)
    low = np.minimum(enc.model_a, enc.model_b)
    high = np.maximum(enc.model_a, enc.model_b)
    score_low = np.where(enc.model_a == low, enc.score_a, 1.0 - enc.score_a)
    cell = low * n_models + high
    size = n_models * n_models
    low_wins = np.bincount(cell, weights=score_low == 1.0, minlength=size)
    ties = np.bincount(cell, weights=score_low == 0.5, minlength=size)
    high_wins = np.bincount(cell, weights=score_low == 0.0, minlength=size)
    seen = np.flatnonzero(low_wins + ties + high_wins)
    return PairCounts(
        low=seen // n_models,
        high=seen % n_models,
        low_wins=low_wins[seen],
        ties=ties[seen],
        high_wins=high_wins[seen],
        models=enc.models,
    )


def _incidence(low, high, n_models):
    """Pair x model matrix: +1 at the pair's low model, -1 at its high model."""
    rows = np.arange(len(low))
    incidence = np.zeros((len(low), n_models))
    incidence[rows, low] = 1.0
    incidence[rows, high] = -1.0
    return incidence


def _bt_losses(x, incidence, won_low, won_high, alpha, precision):
    """Negative log-posterior (up to a constant) per row, and each pair's margin."""
    margin = alpha * x @ incidence.T
    likelihood = (won_low * log_expit(margin) + won_high * log_expit(-margin)).sum(axis=1)
    return -likelihood + 0.5 * precision[:, 0] * (x * x).sum(axis=1), margin


def _newton_bt(x, incidence, won_low, won_high, alpha, precision):
    """Newton's method on the (concave) log-posterior, to the exact maximum, for many count
    vectors at once (one row of ``x``, ``won_low``, ``won_high`` and ``precision`` per fit).

    L-BFGS stops where its line search can no longer tell two losses apart, which left the
    ratings about 1e-6 Elo points off; Newton converges quadratically to rounding. The Hessian
    is a weighted graph Laplacian plus the prior's precision on the diagonal, so it is positive
    definite and the maximum exists whatever the counts. The likelihood's gradient sums to zero
    over the models, so at the maximum the prior's does too: the ratings' mean is 0.
    """
    x = x.copy()
    n_models = x.shape[1]
    identity = np.eye(n_models)
    active = np.ones(len(x), dtype=bool)
    for _ in range(NEWTON_MAX_STEPS):
        rows = np.flatnonzero(active)
        if not len(rows):
            break
        here, low_won, high_won, prior = x[rows], won_low[rows], won_high[rows], precision[rows]
        loss, margin = _bt_losses(here, incidence, low_won, high_won, alpha, prior)
        p = expit(margin)
        gradient = (-alpha * (low_won - (low_won + high_won) * p)) @ incidence + prior * here
        weight = alpha * alpha * (low_won + high_won) * p * (1.0 - p)
        hessian = (incidence.T[None, :, :] * weight[:, None, :]) @ incidence + prior[:, :, None] * identity
        step = np.linalg.solve(hessian, -gradient[..., None])[..., 0]
        # Far from the optimum a full step can overshoot; near it the losses agree to rounding,
        # so a step is only halved when it clearly makes things worse.
        for _ in range(30):
            trial, _ = _bt_losses(here + step, incidence, low_won, high_won, alpha, prior)
            worse = trial > loss + 1e-12 * np.abs(loss)
            if not worse.any():
                break
            step[worse] /= 2.0
        x[rows] = here + step
        active[rows] = np.abs(step).max(axis=1) >= NEWTON_STEP_TOL
    return x


def _fit_bt(low, high, won_low, won_high, n_models, alpha, x0, precision):
    """Natural-scale ratings for each row of counts (``won_*``: fits x pairs), centred on 0,
    under a Gaussian prior of the given precision (1 / variance, natural units) on each rating.

    Counts are normalised to proportions so the tolerances mean the same for 100 battles and
    for 1,000,000; the prior is divided by the same total, so it stays worth the same number
    of battles.
    """
    total = won_low.sum(axis=1, keepdims=True) + won_high.sum(axis=1, keepdims=True)
    won_low, won_high = won_low / total, won_high / total
    x = np.tile(x0 - x0.mean(), (len(won_low), 1))
    # These are problems of a few models: a BLAS call on them costs microseconds on one thread,
    # while handing it to OpenBLAS's threads costs milliseconds (far more on a busy machine).
    with threadpool_limits(limits=1, user_api="blas"):
        x = _newton_bt(x, _incidence(low, high, n_models), won_low, won_high, alpha, precision / total)
    return x - x.mean(axis=1, keepdims=True)


def _precision(prior_sd: float, scale: float) -> float:
    """The prior's precision on the natural scale (a rating of 1 there is ``scale`` Elo points)."""
    if not prior_sd > 0:
        raise ValueError("the prior's standard deviation must be positive")
    return (scale / prior_sd) ** 2


def _to_elo_scale(natural: np.ndarray, scale: float, initial: float) -> np.ndarray:
    return natural * scale + initial


def bradley_terry(
    battles: pd.DataFrame,
    *,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL_RATING,
    prior_sd: float = BT_PRIOR_SD,
) -> pd.Series:
    """Bradley-Terry ratings on the Elo scale (P(a beats b) = 1 / (1 + base ** ((rb - ra) /
    scale))), ties as half wins: the most probable ratings (maximum a posteriori) under a
    Gaussian prior centred on ``initial`` with standard deviation ``prior_sd`` Elo points.

    Unlike online Elo it ignores battle order. The maximum-likelihood ratings are what the
    prior's mode tends to with many battles (at 10,000 battles among five models they differ by
    a fraction of a point), but on few battles they can be anything: a model that won (or lost)
    every battle has none, and later FastChat's ``compute_mle_elo`` (scikit-learn's penalty off)
    walks towards infinity until its optimiser stops. A Gaussian prior is the L2 penalty of a
    logistic regression: fschat 0.2.36's ``compute_elo_mle_with_tie`` (the release VisIT-Bench
    cites) and FastChat's style-controlled ``fit_mle_elo`` have one without saying so
    (scikit-learn's default C=1 on every battle counted twice, a prior with sd sqrt(2) * 400
    points); with that prior this fit and 0.2.36's agree to scikit-learn's tolerance
    (benchmarks/ratings.py). Newton's method finds the maximum to about 1e-10 Elo points.
    """
    counts = pair_counts(battles)
    n_models = len(counts.models)
    natural = _fit_bt(
        counts.low,
        counts.high,
        (counts.low_wins + counts.ties / 2.0)[None, :],
        (counts.high_wins + counts.ties / 2.0)[None, :],
        n_models,
        math.log(base),
        np.zeros(n_models),
        np.full((1, 1), _precision(prior_sd, scale)),
    )[0]
    return rating_series(_to_elo_scale(natural, scale, initial), counts.models, "bt")


def bootstrap_bradley_terry_samples(
    battles: pd.DataFrame,
    *,
    rounds: int = 1000,
    seed: int = 0,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL_RATING,
    prior_sd: float = BT_PRIOR_SD,
) -> pd.DataFrame:
    """Bradley-Terry, with the same prior, on bootstrap rounds: one row per round, one column
    per model.

    Resampling n battles with replacement only changes how often each (pair, outcome) cell
    occurs, and those counts are multinomial; drawing them directly (as FastChat does) makes a
    round cost the same for 1,000 battles as for 1,000,000. Each fit starts from the full-data
    fit, which is close, and all rounds take their Newton steps together as array operations.
    """
    counts = pair_counts(battles)
    n_models = len(counts.models)
    n_pairs = len(counts.low)
    alpha = math.log(base)
    precision = _precision(prior_sd, scale)
    cells = np.concatenate([counts.low_wins, counts.ties, counts.high_wins])
    n = int(cells.sum())
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, cells / n, size=int(rounds)).astype(np.float64)
    low_wins, ties, high_wins = draws[:, :n_pairs], draws[:, n_pairs : 2 * n_pairs], draws[:, 2 * n_pairs :]
    start = _fit_bt(
        counts.low,
        counts.high,
        (counts.low_wins + counts.ties / 2.0)[None, :],
        (counts.high_wins + counts.ties / 2.0)[None, :],
        n_models,
        alpha,
        np.zeros(n_models),
        np.full((1, 1), precision),
    )[0]
    samples = _fit_bt(
        counts.low, counts.high, low_wins + ties / 2.0, high_wins + ties / 2.0, n_models, alpha, start,
        np.full((len(draws), 1), precision),
    )
    return pd.DataFrame(_to_elo_scale(samples, scale, initial), columns=pd.Index(counts.models, name="model"))


def bootstrap_bradley_terry(
    battles: pd.DataFrame,
    *,
    rounds: int = 1000,
    seed: int = 0,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL_RATING,
    prior_sd: float = BT_PRIOR_SD,
    level: float = 0.95,
) -> pd.DataFrame:
    """Bootstrapped Bradley-Terry: columns model, rating (median), lower, upper."""
    samples = bootstrap_bradley_terry_samples(
        battles, rounds=rounds, seed=seed, scale=scale, base=base, initial=initial, prior_sd=prior_sd
    )
    return summarise_samples(samples, level=level)
