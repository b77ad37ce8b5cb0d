"""The Bradley-Terry fit reaches the exact maximum of its posterior (issue 9, fidelity; issue 27,
the prior), and the prior keeps ratings on few battles near the scale while changing ratings on
many battles by a fraction of a point.

The check is an independent Newton solve of the same likelihood written battle by battle (no
pair aggregation), with the Gaussian prior's term or, for the maximum-likelihood ratings, one
model pinned at zero instead of a centring constraint, iterated until the step is below rounding.
"""

import numpy as np
import pandas as pd
import pytest

from annotation.scoring import BT_PRIOR_SD, bradley_terry
from tests.annotation.scoring.simulation import simulated_battles

TOLERANCE_ELO = 1e-8


def newton_solve(battles, scale=400.0, base=10.0, initial=1000.0, prior_sd=BT_PRIOR_SD):
    """The maximum of the log-likelihood plus, unless ``prior_sd`` is None, a Gaussian log-prior
    on each rating (Elo points around ``initial``)."""
    models = sorted(set(battles["model_a"]) | set(battles["model_b"]))
    index = {m: i for i, m in enumerate(models)}
    a = np.array([index[m] for m in battles["model_a"]])
    b = np.array([index[m] for m in battles["model_b"]])
    score = battles["winner"].map({"model_a": 1.0, "model_b": 0.0, "tie": 0.5}).to_numpy()
    c = np.log(base) / scale  # Elo points to natural log-odds
    # without a prior the likelihood is flat along a common shift: the last model is pinned at 0
    free = len(models) if prior_sd is not None else len(models) - 1
    theta = np.zeros(len(models))
    for _ in range(200):
        p = 1.0 / (1.0 + np.exp(-c * (theta[a] - theta[b])))
        residual = score - p
        gradient = np.zeros(len(models))
        hessian = np.zeros((len(models), len(models)))
        for i in range(len(score)):
            gradient[a[i]] += c * residual[i]
            gradient[b[i]] -= c * residual[i]
            w = c * c * p[i] * (1.0 - p[i])
            hessian[a[i], a[i]] -= w
            hessian[b[i], b[i]] -= w
            hessian[a[i], b[i]] += w
            hessian[b[i], a[i]] += w
        if prior_sd is not None:
            gradient -= theta / prior_sd**2
            hessian -= np.eye(len(models)) / prior_sd**2
        step = np.linalg.solve(hessian[:free, :free], -gradient[:free])
        theta[:free] += step
        if np.abs(step).max() < 1e-12:
            break
    else:
        raise AssertionError("the reference Newton solve did not converge")
    if prior_sd is None:
        theta = theta - theta.mean()
    return pd.Series(theta + initial, index=models)


@pytest.mark.parametrize(
    ("strengths", "n", "seed"),
    [
        ({"reference": 1250, "llava": 1100, "adapter": 1060, "owl": 1020, "blip": 970, "panda": 820}, 3000, 1),
        ({"a": 1000, "b": 990, "c": 700}, 60, 7),
        ({"x": 1400, "y": 1000, "z": 1010, "w": 600, "v": 1200}, 400, 3),
    ],
)
def test_bradley_terry_equals_independent_posterior_newton_solve_within_1e_8(strengths, n, seed):
    battles = simulated_battles(strengths, n, seed=seed, tie_rate=0.15)
    ours = bradley_terry.bradley_terry(battles).sort_index()
    exact = newton_solve(battles).sort_index()
    difference = float((ours - exact).abs().max())
    print(f"max |BT - Newton| = {difference:.3e} Elo points")
    assert difference < TOLERANCE_ELO


def test_each_bootstrap_round_is_an_exact_fit_of_its_resampled_counts():
    battles = simulated_battles({"a": 1100, "b": 1000, "c": 950, "d": 900}, 500, seed=5, tie_rate=0.15)
    samples = bradley_terry.bootstrap_bradley_terry_samples(battles, rounds=3, seed=11)
    # Rebuild round 0's resampled counts exactly as the bootstrap draws them.
    counts = bradley_terry.pair_counts(battles)
    cells = np.concatenate([counts.low_wins, counts.ties, counts.high_wins])
    draw = np.random.default_rng(11).multinomial(int(cells.sum()), cells / cells.sum(), size=3)[0]
    k = len(counts.low)
    rows = []
    for pair in range(k):
        low, high = counts.models[counts.low[pair]], counts.models[counts.high[pair]]
        rows += [(low, high, "model_a")] * int(draw[pair])
        rows += [(low, high, "tie")] * int(draw[k + pair])
        rows += [(low, high, "model_b")] * int(draw[2 * k + pair])
    resampled = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])
    exact = newton_solve(resampled)
    assert float((samples.iloc[0][exact.index] - exact).abs().max()) < TOLERANCE_ELO


def test_a_model_that_won_every_battle_gets_a_finite_moderate_rating():
    battles = pd.DataFrame(
        [("a", "b", "model_a")] * 5 + [("b", "c", "model_a"), ("c", "b", "model_a")] * 3,
        columns=["model_a", "model_b", "winner"],
    )
    bt = bradley_terry.bradley_terry(battles)
    assert np.isfinite(bt).all()
    assert bt.index[0] == "a"
    # five wins lift it clearly above the rest, but by less than the prior's one sd
    assert 1000 < bt["a"] < 1000 + BT_PRIOR_SD
    boot = bradley_terry.bootstrap_bradley_terry(battles, rounds=50, seed=0)
    assert np.isfinite(boot[["rating", "lower", "upper"]].to_numpy()).all()
    assert (boot[["lower", "upper"]] - 1000).abs().max().max() < 2 * BT_PRIOR_SD


def test_twenty_four_random_judgements_give_ratings_near_the_scale():
    # The board: 24 judgements gave 6829 and -4781 where Elo sat near 1000. Coin-flip
    # verdicts among five models: some of these tournaments have a model that won or lost every
    # match, which has no maximum-likelihood rating at all.
    unbounded = 0
    for seed in range(20):
        battles = simulated_battles(dict.fromkeys("abcde", 1000), 24, seed=seed, tie_rate=0.0)
        matches = pd.concat([battles["model_a"], battles["model_b"]]).value_counts()
        wins = battles.apply(lambda row: row[row["winner"]], axis=1).value_counts()
        unbounded += int(((wins.reindex(matches.index, fill_value=0) % matches) == 0).any())
        bt = bradley_terry.bradley_terry(battles)
        assert (bt - 1000).abs().max() < 500, (seed, bt.to_dict())
    assert unbounded > 0


def test_with_plenty_of_battles_the_prior_moves_ratings_by_a_fraction_of_a_point():
    strengths = {"a": 1300, "b": 1100, "c": 1000, "d": 950, "e": 700}
    battles = simulated_battles(strengths, 10_000, seed=2, tie_rate=0.1)
    posterior = bradley_terry.bradley_terry(battles).sort_index()
    likelihood = newton_solve(battles, prior_sd=None).sort_index()
    difference = float((posterior - likelihood).abs().max())
    print(f"max |MAP - MLE| at 10,000 battles = {difference:.3f} Elo points")
    assert difference < 1.0
