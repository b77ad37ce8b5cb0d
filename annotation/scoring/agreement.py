"""How far a judge agrees with people, and how consistent either is.

- ``majority_agreement``: VisIT-Bench §4.3 / Fig. 9, how often a judge reconstructs the majority
  of five crowd votes, per majority strength (5/5, 4/5, 3/5), beside a random and a length
  baseline.
- ``cohen_kappa``: agreement beyond chance (CHIRP §6.2.1, Appendix C.2.5).
- ``nominal_alpha``: Krippendorff's alpha among many annotators on shared units (verifiers on a
  reference, workers on a battle), with the units and answers it rests on.
- ``ranking_spearman``: do two leaderboards order the systems alike (VisIT-Bench reports rho=1.0
  between human and GPT-4 Elo rankings).
- ``contradictions``: intransitive preferences on one question, and the share of questions
  that have any (CHIRP Appendix C.2.8).
- ``rubric_correlations``: Pearson, Kendall tau and Spearman between two sets of 1-5 rubric scores
  (Prometheus-Vision §5).

Frames follow ``annotation.scoring.ratings``: one row per judgement with ``model_a``, ``model_b``,
``winner`` in {"model_a", "model_b", "tie"}, keyed to an instance by ``question_id``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import cohen_kappa_score

from annotation.scoring import AlphaResult
from annotation.scoring.ratings import WINNER_SCORES

RANDOM_BASELINE = 0.5


class CorrelationResult(NamedTuple):
    statistic: float
    pvalue: float
    n: int


def _oriented(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """Each judgement as (key, low model, high model, score of the low model).

    Sides are randomised per judgement (and a judge sees both orderings), so a pair is named by
    its two models in sorted order and the outcome is re-expressed for the first of them.
    """
    missing = {key, "model_a", "model_b", "winner"} - set(frame.columns)
    if missing:
        raise ValueError(f"judgements lack the column(s) {sorted(missing)}")
    score_a = frame["winner"].map(WINNER_SCORES).to_numpy(dtype=np.float64)
    if np.isnan(score_a).any():
        raise ValueError(f"unknown winner value(s); expected one of {list(WINNER_SCORES)}")
    a = frame["model_a"].astype(str).to_numpy()
    b = frame["model_b"].astype(str).to_numpy()
    a_is_low = a <= b
    out = pd.DataFrame(
        {
            "key": frame[key].to_numpy(),
            "low": np.where(a_is_low, a, b),
            "high": np.where(a_is_low, b, a),
            "score_low": np.where(a_is_low, score_a, 1.0 - score_a),
        },
        index=frame.index,
    )
    if {"response_a_len", "response_b_len"} <= set(frame.columns):
        len_a = frame["response_a_len"].to_numpy(dtype=np.float64)
        len_b = frame["response_b_len"].to_numpy(dtype=np.float64)
        out["len_low"] = np.where(a_is_low, len_a, len_b)
        out["len_high"] = np.where(a_is_low, len_b, len_a)
    return out


_PAIR = ["key", "low", "high"]


def _lengths(*frames: pd.DataFrame) -> pd.DataFrame | None:
    """Both responses' lengths per (question, pair), from whichever frame carries them."""
    with_lengths = [f[_PAIR + ["len_low", "len_high"]] for f in frames if "len_low" in f]
    if not with_lengths:
        return None
    lengths = pd.concat(with_lengths).dropna(subset=["len_low", "len_high"])
    return lengths.groupby(_PAIR).first()


def majority_agreement(
    human_votes: pd.DataFrame, judge_battles: pd.DataFrame, *, key: str = "question_id"
) -> pd.DataFrame:
    """Judge accuracy at reconstructing the crowd's majority, per majority strength.

    ``human_votes`` holds several votes per (question, pair), typically five; ``judge_battles``
    the judge's verdicts on the same pairs (one row per ordering it was asked). Returns one row
    per strength ("5/5", "4/5", "3/5", ... strongest first) and "all", with n_pairs,
    judge_accuracy and its 95% Wilson interval, random_baseline and length_baseline.

    Choices, each from the paper where it speaks:
    - Pairs whose votes split evenly have no majority and are left out, as are pairs the judge
      never saw; n_pairs counts what was scored.
    - A judge tie scores 0.5: VisIT-Bench breaks GPT-4's ties by a coin flip (§4.3), and 0.5 is
      that flip's expected value, without the noise. When the judge saw both orderings each one
      counts half, so two orderings that disagree also score 0.5.
    - Random is 50% in a forced choice (Fig. 9's bottom line). Length prefers the longer
      response (§4.3: "a score equal to the number of non-whitespace tokens"); equal lengths
      score 0.5. It needs response_a_len and response_b_len in either frame, NaN otherwise.
    """
    human = _oriented(human_votes, key)
    judge = _oriented(judge_battles, key)

    human["for_low"] = (human["score_low"] == 1.0).astype(int)
    human["for_high"] = (human["score_low"] == 0.0).astype(int)
    votes = human.groupby(_PAIR).agg(
        votes=("score_low", "size"), for_low=("for_low", "sum"), for_high=("for_high", "sum")
    )
    votes = votes[votes["for_low"] != votes["for_high"]]
    votes["majority_low"] = votes["for_low"] > votes["for_high"]
    votes["top"] = votes[["for_low", "for_high"]].max(axis=1)
    votes["strength"] = votes["top"].astype(str) + "/" + votes["votes"].astype(str)

    judged = judge.groupby(_PAIR)["score_low"].mean().rename("judge_low")
    scored = votes.join(judged, how="inner")
    scored["judge_credit"] = np.where(scored["majority_low"], scored["judge_low"], 1.0 - scored["judge_low"])

    lengths = _lengths(human, judge)
    if lengths is not None:
        scored = scored.join(lengths, how="left")
        longer_low = np.sign(scored["len_low"] - scored["len_high"])
        credit_low = (longer_low + 1.0) / 2.0  # 1 if low is longer, 0 if shorter, 0.5 if equal
        scored["length_credit"] = np.where(scored["majority_low"], credit_low, 1.0 - credit_low)
    else:
        scored["length_credit"] = np.nan

    buckets = scored.sort_values(["top", "votes"], ascending=[False, True])["strength"].unique()
    rows = []
    for label, part in [(b, scored[scored["strength"] == b]) for b in buckets] + [("all", scored)]:
        rows.append(_agreement_row(label, part))
    return pd.DataFrame(rows)


def wilson_interval(successes: float, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a share, clipped to [0, 1] against rounding (the formula of
    statsmodels' ``proportion_confint(method="wilson")``, which was a dependency for this alone).

    ``successes`` may be fractional: a tie counts half a success.
    """
    z = float(stats.norm.isf((1.0 - confidence) / 2.0))
    share = successes / n
    denominator = 1.0 + z * z / n
    centre = (share + z * z / (2.0 * n)) / denominator
    half_width = z * math.sqrt(share * (1.0 - share) / n + z * z / (4.0 * n * n)) / denominator
    return max(0.0, centre - half_width), min(1.0, centre + half_width)


def _agreement_row(label: str, part: pd.DataFrame) -> dict:
    n = len(part)
    credit = float(part["judge_credit"].sum())
    if n:
        lower, upper = wilson_interval(credit, n)
    else:
        lower = upper = np.nan
    length = part["length_credit"].dropna()
    return {
        "strength": label,
        "n_pairs": n,
        "judge_accuracy": credit / n if n else np.nan,
        "judge_ci_lower": lower,
        "judge_ci_upper": upper,
        "random_baseline": RANDOM_BASELINE,
        "length_baseline": float(length.mean()) if len(length) else np.nan,
        "n_length": len(length),
    }


def cohen_kappa(a, b, *, matchups=None) -> float:
    """Cohen's kappa between two evaluators' labels for the same judgements.

    Without ``matchups`` it is the textbook statistic (scikit-learn). With ``matchups`` (one
    label per judgement naming the model pair) chance agreement is computed per matchup and
    averaged by matchup frequency, as CHIRP does (Appendix C.2.5): an evaluator that always
    prefers the stronger model of a pair then gets no credit for agreeing by that bias alone.
    """
    a = np.asarray(a, dtype=object)
    b = np.asarray(b, dtype=object)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("cohen_kappa needs two equally long, non-empty label sequences")
    if matchups is None:
        return float(cohen_kappa_score(a, b))
    frame = pd.DataFrame({"a": a, "b": b, "matchup": np.asarray(matchups, dtype=object)})
    observed = float((frame["a"] == frame["b"]).mean())
    chance = 0.0
    for _, group in frame.groupby("matchup", sort=False):
        share_a = group["a"].value_counts(normalize=True)
        share_b = group["b"].value_counts(normalize=True)
        agree = share_a.mul(share_b, fill_value=0.0).sum()
        chance += len(group) / len(frame) * agree
    if chance == 1.0:
        return float("nan")
    return (observed - chance) / (1.0 - chance)


def nominal_alpha(units, values, *, counts=None) -> AlphaResult:
    """Krippendorff's alpha, nominal, over answers given as the unit each is on (a reference, a
    battle) and its value (a label, the response chosen); ``counts`` weighs rows that already
    count several equal answers (a SQL ``GROUP BY unit, value``).

    Only units with two or more answers can be paired, so ``units`` and ``answers`` count those.
    The package takes them as ``value_counts`` (units x values), the same numbers as its
    ``reliability_data`` (annotators x units) without a row per annotator: ten thousand crowd
    workers on a hundred thousand references would be a billion cells, nearly all empty. Alpha is
    None with nothing to pair or a single value throughout (no disagreement to expect).
    """
    frame = pd.DataFrame({"unit": np.asarray(units, dtype=object), "value": np.asarray(values, dtype=object)})
    frame["n"] = 1 if counts is None else np.asarray(counts, dtype=np.int64)
    table = frame.pivot_table(index="unit", columns="value", values="n", aggfunc="sum", fill_value=0)
    return nominal_alpha_of_value_counts(table.to_numpy())


def nominal_alpha_of_value_counts(value_counts) -> AlphaResult:
    """`nominal_alpha` over a table counted already: a row per unit, a column per value, each cell
    the answers giving that value on that unit (what a SQL count per unit of each value returns)."""
    table = np.asarray(value_counts, dtype=np.int64)
    if table.ndim != 2:  # no unit at all
        return AlphaResult(None, 0, 0)
    table = table[table.sum(axis=1) >= 2]
    found = AlphaResult(None, len(table), int(table.sum()))
    if not len(table) or (table.sum(axis=0) > 0).sum() < 2:
        return found
    alpha = krippendorff.alpha(value_counts=table, level_of_measurement="nominal")
    return found._replace(alpha=float(alpha))


def ranking_spearman(ratings_a: pd.Series, ratings_b: pd.Series) -> CorrelationResult:
    """Spearman's rho between two rating series (indexed by model) over the models in both."""
    joined = pd.concat([ratings_a.rename("a"), ratings_b.rename("b")], axis=1, join="inner")
    joined = joined.dropna()
    if joined["a"].nunique() < 2 or joined["b"].nunique() < 2:
        # A ranking where every model ties (e.g. before any battle) has no order to correlate.
        return CorrelationResult(float("nan"), float("nan"), len(joined))
    result = stats.spearmanr(joined["a"], joined["b"])
    return CorrelationResult(float(result.statistic), float(result.pvalue), len(joined))


def rubric_correlations(scores_a, scores_b) -> pd.DataFrame:
    """Pearson, Kendall tau-b and Spearman between paired scores, with p-values; pairs with a
    missing score are dropped."""
    frame = pd.DataFrame({"a": np.asarray(scores_a, float), "b": np.asarray(scores_b, float)})
    frame = frame.dropna()
    rows = []
    for name, func in (
        ("pearson", stats.pearsonr),
        ("kendall", stats.kendalltau),
        ("spearman", stats.spearmanr),
    ):
        result = func(frame["a"], frame["b"])
        rows.append(
            {
                "method": name,
                "statistic": float(result.statistic),
                "pvalue": float(result.pvalue),
                "n": len(frame),
            }
        )
    return pd.DataFrame(rows).set_index("method")


def contradictions(battles: pd.DataFrame, *, key: str = "question_id") -> pd.DataFrame:
    """Intransitive preferences among the models compared on each question (CHIRP Appendix C.2.8).

    Per question (and per ``criterion`` when that column exists) a directed graph gets an edge
    from the loser to the winner of each pair. Repeated judgements of one pair are first reduced
    to their majority, with ties and even splits giving no edge: two evaluators disagreeing on
    one pair is disagreement, whereas a cycle A>B>C>A is a contradiction no single ranking can
    explain. Returns per group n_models, n_edges, has_contradiction (the graph has a cycle) and
    n_three_cycles (directed 3-cycles).

    CHIRP reports whether a question's graph has a cycle, which its strongly connected components answer in
    linear time. Counting every simple cycle instead grows exponentially: 15 models judged at
    random on one question have 24.8 million of them (82 s). Where a count is wanted, 3-cycles
    are the one a polynomial algorithm gives: trace(A^3) / 3, each cycle once per rotation, and
    since a pair has at most one edge no 2-cycle is counted.
    """
    groups = ["key"] + (["criterion"] if "criterion" in battles.columns else [])
    oriented = _oriented(battles, key)
    for extra in groups[1:]:
        oriented[extra] = battles[extra].to_numpy()
    margin = oriented.assign(margin=oriented["score_low"] - 0.5)
    per_pair = margin.groupby(groups + ["low", "high"], sort=True)["margin"].sum().reset_index()
    # Plain arrays split by group: a pandas selection per question cost milliseconds, which at
    # 10,000 questions was most of the time.
    group_of = per_pair.groupby(groups, sort=False).ngroup().to_numpy()
    codes, _ = pd.factorize(pd.concat([per_pair["low"], per_pair["high"]]))
    low, high = codes[: len(per_pair)], codes[len(per_pair) :]
    pair_margin = per_pair["margin"].to_numpy()
    group_values = [per_pair[column].to_numpy(dtype=object) for column in groups]
    starts = np.flatnonzero(np.r_[True, group_of[1:] != group_of[:-1]])
    rows = []
    for first, last in zip(starts, np.r_[starts[1:], len(per_pair)], strict=True):
        nodes, local = np.unique(np.r_[low[first:last], high[first:last]], return_inverse=True)
        local_low, local_high = local[: last - first], local[last - first :]
        m = pair_margin[first:last]
        # an edge from the loser to the winner of each pair the majority decided
        losers = np.r_[local_high[m > 0], local_low[m < 0]]
        winners = np.r_[local_low[m > 0], local_high[m < 0]]
        adjacency = np.zeros((len(nodes), len(nodes)))
        adjacency[losers, winners] = 1.0
        row = {column: values[first] for column, values in zip(groups, group_values, strict=True)}
        row.update(
            n_models=len(nodes),
            n_edges=len(losers),
            has_contradiction=_has_cycle(adjacency),
            n_three_cycles=int(round(np.trace(adjacency @ adjacency @ adjacency) / 3)),
        )
        rows.append(row)
    columns = groups + ["n_models", "n_edges", "has_contradiction", "n_three_cycles"]
    return pd.DataFrame(rows, columns=columns).rename(columns={"key": key})


def _has_cycle(adjacency: np.ndarray) -> bool:
    """Whether a directed graph has a cycle: a strongly connected component of two or more
    nodes holds one, and a self-loop (a model compared with itself) is one."""
    n_components, _ = connected_components(adjacency, directed=True, connection="strong")
    return n_components < len(adjacency) or bool(adjacency.diagonal().any())


def contradiction_share(table: pd.DataFrame) -> dict:
    """CHIRP's headline from ``contradictions``: the share of questions whose preferences contain
    a cycle, over the questions where one is possible (at least three models compared), with
    the counts it rests on and the directed 3-cycles among them; share is None without such a
    question."""
    possible = table[table["n_models"] >= 3]
    contradicted = int(possible["has_contradiction"].sum())
    return {
        "questions": len(possible),
        "contradicted": contradicted,
        "share": contradicted / len(possible) if len(possible) else None,
        "three_cycles": int(possible["n_three_cycles"].sum()),
    }
