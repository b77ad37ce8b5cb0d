"""Leaderboard figures as PNG bytes, for the dashboard and the exports.

Figures are built with matplotlib's object API on the Agg canvas rather than through pyplot:
pyplot keeps global state that is not safe across the threads of a web server, and a server
has no display anyway.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_DPI = 120


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight")
    return buffer.getvalue()


def elo_interval_plot(df: pd.DataFrame, *, title: str = "Elo rating with 95% interval") -> bytes:
    """Ratings with their bootstrap intervals, best model on top.

    Takes ``bootstrap_elo`` / ``bootstrap_bradley_terry`` output (model, rating, lower, upper)
    or ``leaderboard_table`` output (model, elo, elo_lower, elo_upper, optionally split).
    """
    frame = df.rename(columns={"elo": "rating", "elo_lower": "lower", "elo_upper": "upper"})
    if "split" in frame.columns:
        labels = frame["model"].astype(str) + " (" + frame["split"].astype(str) + ")"
    else:
        labels = frame["model"].astype(str)
    frame = frame.assign(label=labels.to_numpy()).sort_values("rating")
    y = np.arange(len(frame))
    rating = frame["rating"].to_numpy(dtype=float)
    errors = np.vstack([rating - frame["lower"].to_numpy(dtype=float), frame["upper"].to_numpy(dtype=float) - rating])
    fig = Figure(figsize=(7, 0.35 * len(frame) + 1.2))
    ax = fig.add_subplot()
    ax.errorbar(rating, y, xerr=errors, fmt="o", color="tab:blue", ecolor="tab:gray", capsize=3)
    ax.set_yticks(y, frame["label"])
    ax.set_xlabel("rating")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def category_heatmap(df: pd.DataFrame, *, title: str = "Win-rate vs. reference") -> bytes:
    """``category_win_rates`` output (models x instruction categories) as an annotated heatmap
    (VisIT-Bench Fig. 8 shows the same numbers as bars)."""
    values = df.to_numpy(dtype=float)
    fig = Figure(figsize=(max(6.0, 0.45 * df.shape[1] + 3), max(3.0, 0.4 * df.shape[0] + 1.5)))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(np.arange(df.shape[1]), [str(c) for c in df.columns], rotation=60, ha="right")
    ax.set_yticks(np.arange(df.shape[0]), [str(i) for i in df.index])
    if values.size <= 400:
        for (row, col), value in np.ndenumerate(values):
            if not np.isnan(value):
                colour = "black" if value > 0.6 else "white"
                ax.text(col, row, f"{value:.0%}", ha="center", va="center", fontsize=7, color=colour)
    fig.colorbar(image, ax=ax, label="win-rate")
    ax.set_title(title)
    return _png(fig)


def agreement_bars(df: pd.DataFrame, *, title: str = "Agreement with the crowd majority") -> bytes:
    """``majority_agreement`` output as grouped bars per majority strength: the judge (with its
    Wilson interval), the length baseline and the 50% random line, as in VisIT-Bench Fig. 9."""
    x = np.arange(len(df))
    width = 0.38
    judge = df["judge_accuracy"].to_numpy(dtype=float)
    errors = np.vstack(
        [
            judge - df["judge_ci_lower"].to_numpy(dtype=float),
            df["judge_ci_upper"].to_numpy(dtype=float) - judge,
        ]
    )
    fig = Figure(figsize=(max(5.0, 1.3 * len(df) + 2), 4))
    ax = fig.add_subplot()
    ax.bar(x - width / 2, judge, width, yerr=errors, capsize=3, label="judge")
    length = df["length_baseline"].to_numpy(dtype=float)
    if not np.isnan(length).all():
        ax.bar(x + width / 2, np.nan_to_num(length), width, label="length baseline")
    ax.axhline(float(df["random_baseline"].iloc[0]), color="black", linestyle="--", label="random")
    labels = [f"{s}\n(n={n})" for s, n in zip(df["strength"], df["n_pairs"], strict=True)]
    ax.set_xticks(x, labels)
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("reconstructs majority")
    ax.set_xlabel("majority strength")
    ax.legend(loc="lower right")
    ax.set_title(title)
    return _png(fig)
