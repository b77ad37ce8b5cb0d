"""Rubric scores on the leaderboard (Prometheus-Vision §3, §5): each model's mean 1-5 score per
rubric criterion with n and a 95% interval, and how the models' mean scores rank against their
pairwise rating.

A scores frame (annotation/scoring/battles.py SCORE_COLUMNS) has one row per score a response
got: from each worker who judged a battle it was in (HumanJudgement.rubric_scores, keyed by the
side it was shown on), or once from a Prometheus judge (JudgeJudgement.score_a / score_b). A
response, one model's answer to one instance, is the unit sampled: its scores are averaged first,
so a response several workers scored, or that met several opponents, counts once, and the
interval is Student's t over the responses' means, clipped to the 1-5 scale.
"""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats

from annotation.scoring import ALL_RUBRICS, MIN_MODELS
from annotation.scoring.agreement import ranking_spearman

CONFIDENCE = 0.95
LOWEST, HIGHEST = 1.0, 5.0
_CRITERION_CHARS = 100


def rubric_criterion(text):
    """The criterion a rubric scores, named by its first line: Prometheus-Vision's rubrics open
    with the criterion's question in brackets, then one line per score."""
    line = next((line.strip() for line in (text or "").splitlines() if line.strip()), "")
    if line.startswith("[") and line.endswith("]"):
        line = line[1:-1].strip()
    if len(line) > _CRITERION_CHARS:
        line = line[: _CRITERION_CHARS - 1].rstrip() + "…"
    return line or "(no rubric)"


def _summary(response_means, n_scores):
    n = len(response_means)
    mean = float(response_means.mean())
    lower = upper = None
    sem = float(response_means.std(ddof=1)) / math.sqrt(n) if n >= 2 else 0.0
    # Responses that all got the same score give a t interval of no width, which would claim a
    # certainty a few responses cannot give: no interval then, as below two responses.
    if sem > 0:
        lower, upper = stats.t.interval(CONFIDENCE, n - 1, loc=mean, scale=sem)
        # A few responses give t intervals past the scale's ends, where no mean can lie.
        lower, upper = max(float(lower), LOWEST), min(float(upper), HIGHEST)
    return {"mean": mean, "lower": lower, "upper": upper, "responses": n, "scores": int(n_scores)}


def rubric_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Per model and rubric criterion (``rubric``), then per model over every rubric
    (``ALL_RUBRICS``): the mean score, its 95% t interval over responses (clipped to 1-5; None
    below two responses, or when every response got the same mean), and how many responses and
    scores it rests on. Models by mean, best first."""
    columns = ["rubric", "model", "mean", "lower", "upper", "responses", "scores"]
    if scores is None or scores.empty:
        return pd.DataFrame(columns=columns)
    scores = scores.assign(score=scores["score"].astype(float))
    rows = []
    groups = [(ALL_RUBRICS, scores)]
    if scores["rubric"].nunique() > 1:
        groups += sorted(scores.groupby("rubric"), key=lambda group: str(group[0]))
    for rubric, part in groups:
        per_response = part.groupby(["model", "question_id"])["score"].agg(["mean", "size"])
        for model, responses in per_response.groupby(level="model"):
            rows.append({"rubric": rubric, "model": model,
                         **_summary(responses["mean"], responses["size"].sum())})
    table = pd.DataFrame(rows, columns=columns)
    order = {rubric: position for position, (rubric, _) in enumerate(groups)}
    table["_order"] = table["rubric"].map(order)
    table = table.sort_values(["_order", "mean", "model"], ascending=[True, False, True])
    return table.drop(columns="_order").reset_index(drop=True)


def rating_correlation(table: pd.DataFrame, ratings: pd.Series) -> dict:
    """Spearman's rho between the models' mean score over every rubric and their pairwise rating
    (a Series by model), over the models that have both: ``rho`` is None below ``MIN_MODELS``
    models, or when the scores or the ratings do not vary (no order to correlate). No p-value:
    over the handful of models a leaderboard has, SciPy's t approximation says p = 0 for four
    models in the same order, where the exact chance is 1 in 24."""
    overall = table[table["rubric"] == ALL_RUBRICS].set_index("model")["mean"]
    result = ranking_spearman(overall.astype(float), ratings.astype(float))
    rho = None if result.n < MIN_MODELS or math.isnan(result.statistic) else result.statistic
    return {"rho": rho, "models": result.n}
