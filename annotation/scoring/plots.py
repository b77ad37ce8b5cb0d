"""Leaderboard figures as PNG bytes, for the dashboard and the exports.

Figures are built with matplotlib's object API on the Agg canvas rather than through pyplot:
pyplot keeps global state that is not safe across the threads of a web server, and a server
has no display anyway.

Every text drawn from data (model names, categories, judge names) is drawn with
``parse_math=False``: matplotlib otherwise reads "$...$" as TeX, and a model called "$x^$" would
stop the figure with a parse error (issue 10).
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

_DPI = 120


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight")
    return buffer.getvalue()


def elo_interval_plot(df: pd.DataFrame, *, title: str = "Ratings with 95% interval") -> bytes:
    """Ratings with their bootstrap intervals, best model on top.

    Takes ``bootstrap_elo`` / ``bootstrap_bradley_terry`` output (model, rating, lower, upper) or
    ``leaderboard_table`` output (model, elo, elo_lower, elo_upper, optionally split and the
    Bradley-Terry columns bt, bt_lower, bt_upper, drawn beside Elo).
    """
    frame = df.rename(columns={"elo": "rating", "elo_lower": "lower", "elo_upper": "upper"})
    if "split" in frame.columns:
        labels = frame["model"].astype(str) + " (" + frame["split"].astype(str) + ")"
    else:
        labels = frame["model"].astype(str)
    frame = frame.assign(label=labels.to_numpy()).sort_values("rating")
    y = np.arange(len(frame))
    fig = Figure(figsize=(7, 0.4 * len(frame) + 1.4))
    ax = fig.add_subplot()
    series = [("rating", "lower", "upper", "Elo", "tab:blue", 0.0)]
    # Bradley-Terry beside Elo only where some model is rated on it: a legend naming a series
    # with no point drawn (every model "not yet rated") said there was something to see.
    if "bt" in frame.columns and frame["bt"].notna().any():
        series = [("rating", "lower", "upper", "Elo", "tab:blue", 0.12),
                  ("bt", "bt_lower", "bt_upper", "Bradley-Terry", "tab:orange", -0.12)]
    for point, lower, upper, name, colour, offset in series:
        # The interval drawn from its own ends: with few battles the point rating (from the battles
        # in their order) can lie outside the bootstrap's interval, which an error bar cannot show.
        ax.hlines(y + offset, frame[lower].to_numpy(dtype=float), frame[upper].to_numpy(dtype=float), color=colour)
        for end in (lower, upper):
            ax.plot(frame[end].to_numpy(dtype=float), y + offset, "|", color=colour, markersize=8)
        ax.plot(frame[point].to_numpy(dtype=float), y + offset, "o", color=colour, label=name)
    ax.set_yticks(y, frame["label"], parse_math=False)
    ax.set_xlabel("rating (Elo scale)")
    ax.set_title(title, parse_math=False)
    ax.grid(axis="x", alpha=0.3)
    if len(series) > 1:
        ax.legend(loc="lower right")
    return _png(fig)


def category_heatmap(table: pd.DataFrame, *, title: str = "Win-rate vs. reference") -> bytes:
    """``category_win_rate_table`` output (model, instruction_category, n, win_rate) as an
    annotated heatmap of models x categories (VisIT-Bench Fig. 8 shows the same numbers as bars).
    Every cell shows its n; a cell where the model never met the reference is hatched and
    says so, not left blank."""
    rates = table.pivot(index="model", columns="instruction_category", values="win_rate")
    counts = table.pivot(index="model", columns="instruction_category", values="n").fillna(0)
    order = rates.mean(axis=1).sort_values(ascending=False, na_position="last").index
    rates, counts = rates.loc[order].sort_index(axis=1), counts.loc[order].sort_index(axis=1)
    values = rates.to_numpy(dtype=float)
    fig = Figure(figsize=(max(6.0, 0.8 * rates.shape[1] + 3), max(3.0, 0.5 * rates.shape[0] + 1.5)))
    ax = fig.add_subplot()
    ax.set_facecolor("#f2f2f2")
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(np.arange(rates.shape[1]), [str(c) for c in rates.columns], rotation=60, ha="right",
                  parse_math=False)
    ax.set_yticks(np.arange(rates.shape[0]), [str(i) for i in rates.index], parse_math=False)
    if values.size <= 400:
        for (row, col), value in np.ndenumerate(values):
            n = int(counts.iat[row, col])
            if np.isnan(value):
                ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#bbbbbb",
                                       linewidth=0))
                ax.text(col, row, "no battles\nn=0", ha="center", va="center", fontsize=7, color="#555555",
                        parse_math=False)
            else:
                colour = "black" if value > 0.6 else "white"
                ax.text(col, row, f"{value:.0%}\nn={n}", ha="center", va="center", fontsize=7, color=colour,
                        parse_math=False)
    fig.colorbar(image, ax=ax, label="win-rate")
    ax.set_title(title, parse_math=False)
    return _png(fig)


def _error_bars(rates, lower, upper):
    """matplotlib's yerr for rates and their interval bounds. At a rate of 0 or 1, Wilson's bound
    comes back a rounding error beyond the rate itself (7 of 7: 1 - 1.1e-16), and matplotlib refuses
    a negative error bar (the plot answered 500)."""
    rates = np.asarray(rates, dtype=float)
    return np.clip(np.vstack([rates - np.asarray(lower, dtype=float), np.asarray(upper, dtype=float) - rates]),
                   0.0, None)


def agreement_bars(df: pd.DataFrame, *, title: str = "Agreement with the crowd majority") -> bytes:
    """``majority_agreement`` output as grouped bars per majority strength: the judge (with its
    Wilson interval), the length baseline and the 50% random line, as in VisIT-Bench Fig. 9."""
    x = np.arange(len(df))
    width = 0.38
    judge = df["judge_accuracy"].to_numpy(dtype=float)
    errors = _error_bars(judge, df["judge_ci_lower"], df["judge_ci_upper"])
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
    ax.set_title(title, parse_math=False)
    return _png(fig)


def length_bias_plot(report: list[dict], *, title: str = "Win rate of the longer answer") -> bytes:
    """The judge report's length bias (annotation/scoring/judge_report.py): per evaluator, how often
    the longer answer won, by how many tokens longer it was, with 95% Wilson intervals; bins
    without verdicts are left out, and 50% (no preference) is drawn."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    labels = [found["longer_by"] for found in report[0]["length"]["bins"]] if report else []
    x = np.arange(len(labels))
    offsets = np.linspace(-0.2, 0.2, len(report)) if len(report) > 1 else [0.0]
    drawn = 0
    for row, offset in zip(report, offsets, strict=True):
        bins = [(n, found) for n, found in enumerate(row["length"]["bins"]) if found["n"]]
        if not bins:
            continue
        drawn += 1
        rates = np.array([found["rate"] for _, found in bins])
        errors = _error_bars(rates, [found["lower"] for _, found in bins], [found["upper"] for _, found in bins])
        ax.errorbar(x[[n for n, _ in bins]] + offset, rates, yerr=errors, fmt="o-", capsize=3,
                    label=row["judge"])
    ax.axhline(0.5, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(x, labels)
    # Half a bin either side, so the evaluators' offset points of the first and last bins are not
    # drawn on the frame; a little above 1 and below 0, so a rate of 100% or 0% is a whole dot.
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("longer answer by (tokens)")
    ax.set_ylabel("longer answer wins")
    if drawn:
        legend = ax.legend(loc="lower right", fontsize=8)
        for text in legend.get_texts():
            text.set_parse_math(False)
    else:
        # An empty frame with an empty legend said nothing; this says why.
        ax.text(0.5, 0.75, "No verdict yet between answers of different lengths", ha="center", va="center",
                transform=ax.transAxes, parse_math=False)
    ax.set_title(title, parse_math=False)
    return _png(fig)
