"""Win-rates against the reference (overall and per instruction category) and the leaderboard's
table of Elo and Bradley-Terry ratings with their intervals, per image split (VisIT-Bench Tables 3-4)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from annotation.scoring import ALL_IMAGES, MULTI_IMAGE, SINGLE_IMAGE
from annotation.scoring.bradley_terry import bootstrap_bradley_terry, bradley_terry
from annotation.scoring.ratings import WINNER_SCORES, bootstrap_elo


def _outcomes_vs_reference(battles: pd.DataFrame, reference_model: str, carry: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per battle against the reference: the other model, its result and the ``carry``
    columns."""
    is_a = battles["model_a"] == reference_model
    is_b = battles["model_b"] == reference_model
    rows = battles[is_a ^ is_b]
    ref_is_a = (rows["model_a"] == reference_model).to_numpy()
    score_a = rows["winner"].map(WINNER_SCORES).to_numpy(dtype=np.float64)
    if np.isnan(score_a).any():
        raise ValueError(f"unknown winner value(s); expected one of {list(WINNER_SCORES)}")
    score = np.where(ref_is_a, 1.0 - score_a, score_a)
    out = pd.DataFrame(
        {
            "model": np.where(ref_is_a, rows["model_b"], rows["model_a"]),
            "wins": score == 1.0,
            "ties": score == 0.5,
            "losses": score == 0.0,
        }
    )
    for column in carry:
        out[column] = rows[column].to_numpy()
    return out


def _win_rate_table(outcomes: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    table = outcomes.groupby(keys, sort=False)[["wins", "ties", "losses"]].sum().astype(int)
    table["n"] = table["wins"] + table["ties"] + table["losses"]
    table["win_rate"] = table["wins"] / table["n"]
    return table.reset_index()


def win_rate_vs_reference(battles: pd.DataFrame, *, reference_model: str) -> pd.DataFrame:
    """Each model's record against the reference: model, wins, ties, losses, n, win_rate.

    win_rate = wins / n, ties counted in n but not as wins. VisIT-Bench reports "the percent of
    cases where the judge prefers the output from that model" (§4.2); its human judgements are
    forced choice, and the judge's ties (undecided after the fallback prompt, Appendix F) are no
    preference for the model, so they are kept visible in their own column rather than halved.
    """
    outcomes = _outcomes_vs_reference(battles, reference_model)
    table = _win_rate_table(outcomes, ["model"])
    return table.sort_values(["win_rate", "n"], ascending=False, ignore_index=True)


def category_win_rate_table(battles: pd.DataFrame, *, reference_model: str) -> pd.DataFrame:
    """Each model's record against the reference per instruction category (VisIT-Bench Fig. 8),
    long form: model, instruction_category, wins, ties, losses, n, win_rate. Every model that met
    the reference and every category in the battles appear, n=0 (win_rate NaN) where they never
    met, so a reader can tell "no battles" from "lost every time"."""
    if "instruction_category" not in battles.columns:
        raise ValueError("battles lack the column 'instruction_category'")
    outcomes = _outcomes_vs_reference(battles, reference_model, ("instruction_category",))
    table = _win_rate_table(outcomes, ["model", "instruction_category"])
    models = sorted(set(outcomes["model"]), key=str)
    categories = sorted(set(battles["instruction_category"]), key=str)
    full = pd.MultiIndex.from_product([models, categories], names=["model", "instruction_category"])
    table = table.set_index(["model", "instruction_category"]).reindex(full)
    for column in ("wins", "ties", "losses", "n"):
        table[column] = table[column].fillna(0).astype(int)
    return table.reset_index()


def category_win_rates(battles: pd.DataFrame, *, reference_model: str) -> pd.DataFrame:
    """Win-rate against the reference per model (rows) and instruction category (columns), as
    in VisIT-Bench Fig. 8; NaN where a model met the reference in no battle of that category."""
    table = category_win_rate_table(battles, reference_model=reference_model)
    wide = table.pivot(index="model", columns="instruction_category", values="win_rate")
    order = wide.mean(axis=1).sort_values(ascending=False).index
    return wide.loc[order].sort_index(axis=1)



def _rated_part(part: pd.DataFrame, *, reference_model: str, rounds: int, seed: int) -> pd.DataFrame:
    elo = bootstrap_elo(part, rounds=rounds, seed=seed).rename(
        columns={"rating": "elo", "lower": "elo_lower", "upper": "elo_upper"}
    )
    # Bradley-Terry as FastChat reports it, the full-data fit with the bootstrap's percentile interval,
    # but with a stated prior (bradley_terry.py).
    elo["bt"] = elo["model"].map(bradley_terry(part))
    bt_interval = bootstrap_bradley_terry(part, rounds=rounds, seed=seed).set_index("model")
    elo["bt_lower"] = elo["model"].map(bt_interval["lower"])
    elo["bt_upper"] = elo["model"].map(bt_interval["upper"])
    matches = pd.concat([part["model_a"], part["model_b"]]).value_counts()
    elo["matches"] = elo["model"].map(matches).astype(int)
    vs_ref = win_rate_vs_reference(part, reference_model=reference_model).set_index("model")
    elo["wins_vs_reference"] = elo["model"].map(vs_ref["wins"]).astype("Int64")
    elo["n_vs_reference"] = elo["model"].map(vs_ref["n"]).astype("Int64")
    elo["win_rate_vs_reference"] = elo["model"].map(vs_ref["win_rate"])
    return elo


def leaderboard_table(
    battles: pd.DataFrame, *, reference_model: str, rounds: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """The layout of VisIT-Bench Tables 3-4: per model the bootstrapped Elo with its interval,
    the Bradley-Terry fit (with its prior) and its bootstrap interval, the number of matches it
    took part in, and its win-rate against the reference with n.

    With an ``is_multi_image`` column the table has three splits (column ``split``): all battles
    together, then the single- and multi-image battles rated separately, as the paper does (the
    two sets share few models and no instances).
    """
    if "is_multi_image" in battles.columns:
        multi = battles["is_multi_image"].fillna(False).astype(bool)
        parts = [(ALL_IMAGES, battles), (SINGLE_IMAGE, battles[~multi]), (MULTI_IMAGE, battles[multi])]
    else:
        parts = [(None, battles)]
    tables = []
    for split, part in parts:
        if part.empty:
            continue
        table = _rated_part(part, reference_model=reference_model, rounds=rounds, seed=seed)
        if split is not None:
            table.insert(0, "split", split)
        tables.append(table)
    if not tables:
        raise ValueError("no battles to rate")
    return pd.concat(tables, ignore_index=True)
