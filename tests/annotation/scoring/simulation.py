"""Battles simulated from known strengths, for the scoring tests."""

import numpy as np
import pandas as pd


def simulated_battles(strengths, n, *, seed, tie_rate=0.1):
    """Battles between uniformly drawn pairs, won with Bradley-Terry probabilities on the Elo
    scale, with a share of ties that carries no information about strength."""
    rng = np.random.default_rng(seed)
    names = np.array(list(strengths))
    elo = np.array(list(strengths.values()), dtype=float)
    a = rng.integers(0, len(names), n)
    b = (a + rng.integers(1, len(names), n)) % len(names)
    p_a = 1.0 / (1.0 + 10.0 ** ((elo[b] - elo[a]) / 400.0))
    winner = np.where(rng.random(n) < p_a, "model_a", "model_b")
    winner = np.where(rng.random(n) < tie_rate, "tie", winner)
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})
