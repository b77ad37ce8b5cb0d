"""The Bradley-Terry maximum-likelihood ratings over battles, on the Elo scale, and their
bootstrap over the same resampled battles as online Elo's (ratings.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from threadpoolctl import threadpool_limits

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


def _bt_loss_and_grad(ratings, low, high, won_low, won_high, alpha):
    # A tie is half a win for each side, so each pair contributes won_low = wins + ties / 2.
    margin = alpha * (ratings[low] - ratings[high])
    loss = -(won_low * log_expit(margin) + won_high * log_expit(-margin)).sum()
    pair_grad = -alpha * (won_low - (won_low + won_high) * expit(margin))
    n_models = ratings.shape[0]
    grad = np.bincount(low, weights=pair_grad, minlength=n_models) - np.bincount(
        high, weights=pair_grad, minlength=n_models
    )
    return loss, grad


def _incidence(low, high, n_models):
    """Pair x model matrix: +1 at the pair's low model, -1 at its high model."""
    rows = np.arange(len(low))
    incidence = np.zeros((len(low), n_models))
    incidence[rows, low] = 1.0
    incidence[rows, high] = -1.0
    return incidence


def _bt_losses(x, incidence, won_low, won_high, alpha):
    margin = alpha * x @ incidence.T
    return -(won_low * log_expit(margin) + won_high * log_expit(-margin)).sum(axis=1), margin


def _newton_bt(x, incidence, won_low, won_high, alpha):
    """Newton's method on the (concave) log-likelihood, to the exact MLE, for many count vectors
    at once (one row of ``x``, ``won_low`` and ``won_high`` per fit).

    L-BFGS stops where its line search can no longer tell two losses apart, which left the
    ratings about 1e-6 Elo points off; Newton converges quadratically to rounding. The Hessian
    is a weighted graph Laplacian whose null space is the common shift of all ratings; adding
    the all-ones matrix fixes that shift, and since the gradient sums to zero every step keeps
    the ratings' mean.
    """
    x = x.copy()
    n_models = x.shape[1]
    shift = np.ones((n_models, n_models))
    active = np.ones(len(x), dtype=bool)
    for _ in range(NEWTON_MAX_STEPS):
        rows = np.flatnonzero(active)
        if not len(rows):
            break
        here, low_won, high_won = x[rows], won_low[rows], won_high[rows]
        loss, margin = _bt_losses(here, incidence, low_won, high_won, alpha)
        p = expit(margin)
        gradient = (-alpha * (low_won - (low_won + high_won) * p)) @ incidence
        weight = alpha * alpha * (low_won + high_won) * p * (1.0 - p)
        hessian = (incidence.T[None, :, :] * weight[:, None, :]) @ incidence + shift
        step = np.linalg.solve(hessian, -gradient[..., None])[..., 0]
        # Far from the optimum a full step can overshoot; near it the losses agree to rounding,
        # so a step is only halved when it clearly makes things worse.
        for _ in range(30):
            trial, _ = _bt_losses(here + step, incidence, low_won, high_won, alpha)
            worse = trial > loss + 1e-12 * np.abs(loss)
            if not worse.any():
                break
            step[worse] /= 2.0
        x[rows] = here + step
        active[rows] = np.abs(step).max(axis=1) >= NEWTON_STEP_TOL
    return x


def _mle_exists(low, high, won_low, won_high, n_models):
    """Zermelo's condition, per row of counts: the ratings have a finite maximum only when every
    model can be reached from every other along "took points from" edges (a tie takes points
    both ways)."""
    took = np.zeros((len(won_low), n_models, n_models), dtype=bool)
    took[:, low, high] = won_low > 0
    took[:, high, low] = won_high > 0
    exists = np.ones(len(won_low), dtype=bool)
    for graph in (took, took.transpose(0, 2, 1)):
        reached = np.zeros((len(won_low), n_models), dtype=bool)
        reached[:, 0] = True
        for _ in range(n_models):
            reached = reached | (reached[:, :, None] & graph).any(axis=1)
        exists &= reached.all(axis=1)
    return exists


def _fit_bt(low, high, won_low, won_high, n_models, alpha, x0, tol, max_iter):
    """Natural-scale ratings for each row of counts (``won_*``: fits x pairs), centred on 0.

    Counts are normalised to proportions so the tolerances mean the same for 100 battles and
    for 1,000,000. Where the MLE exists Newton's method reaches it from ``x0`` in a few steps;
    elsewhere there is no maximum and L-BFGS walks towards infinity until its gradient falls
    below ``tol``, as FastChat's fit does.
    """
    total = won_low.sum(axis=1, keepdims=True) + won_high.sum(axis=1, keepdims=True)
    won_low, won_high = won_low / total, won_high / total
    x = np.tile(x0 - x0.mean(), (len(won_low), 1))
    exists = _mle_exists(low, high, won_low, won_high, n_models)
    # These are problems of a few models: a BLAS call on them costs microseconds on one thread,
    # while handing it to OpenBLAS's threads costs milliseconds (far more on a busy machine), and
    # L-BFGS makes thousands of such calls when no MLE exists (a model that always lost): one
    # thread turns a 9-judgement leaderboard from minutes into about a second.
    with threadpool_limits(limits=1, user_api="blas"):
        if exists.any():
            x[exists] = _newton_bt(x[exists], _incidence(low, high, n_models), won_low[exists],
                                   won_high[exists], alpha)
        for row in np.flatnonzero(~exists):
            x[row] = minimize(
                _bt_loss_and_grad,
                x[row],
                args=(low, high, won_low[row], won_high[row], alpha),
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-15},
            ).x
    return x - x.mean(axis=1, keepdims=True)


def _to_elo_scale(natural: np.ndarray, scale: float, initial: float) -> np.ndarray:
    return natural * scale + initial


def bradley_terry(
    battles: pd.DataFrame,
    *,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL_RATING,
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> pd.Series:
    """Maximum-likelihood Bradley-Terry ratings on the Elo scale (P(a beats b) =
    1 / (1 + base ** ((rb - ra) / scale))), ties as half wins, centred on ``initial``.

    Unlike online Elo it ignores battle order. Newton's method finds the exact maximum (to about
    1e-10 Elo points). A model that won (or lost) every battle has no finite MLE; L-BFGS then
    stops at a large but finite rating, where its gradient falls below ``tol``.
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
        tol,
        max_iter,
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
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> pd.DataFrame:
    """Bradley-Terry on bootstrap rounds: one row per round, one column per model.

    Resampling n battles with replacement only changes how often each (pair, outcome) cell
    occurs, and those counts are multinomial; drawing them directly (as FastChat does) makes a
    round cost the same for 1,000 battles as for 1,000,000. Each fit starts from the full-data
    MLE, which is close, and all rounds take their Newton steps together as array operations.
    """
    counts = pair_counts(battles)
    n_models = len(counts.models)
    n_pairs = len(counts.low)
    alpha = math.log(base)
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
        tol,
        max_iter,
    )[0]
    samples = _fit_bt(
        counts.low, counts.high, low_wins + ties / 2.0, high_wins + ties / 2.0, n_models, alpha, start, tol, max_iter
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
    level: float = 0.95,
) -> pd.DataFrame:
    """Bootstrapped Bradley-Terry: columns model, rating (median), lower, upper."""
    samples = bootstrap_bradley_terry_samples(
        battles, rounds=rounds, seed=seed, scale=scale, base=base, initial=initial
    )
    return summarise_samples(samples, level=level)
