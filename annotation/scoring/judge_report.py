"""The judge report: how far each judge run of a tournament can stand in for its crowd, and what
it leans on besides the answers' quality (issue 27, item 3).

Per run, from the same frames the leaderboard reads (annotation/scoring/battles.py): position bias
(the verdict flipping when the answers swap places; the share of verdicts for the answer shown
first), length bias (how often the longer answer wins, by how much longer it is), self-preference
where the judge model is also a contestant, agreement with the crowd's majority by its strength
and Cohen's kappa per instruction family category, Spearman's rho between its Elo and the crowd's,
and its cost. Every rate carries its n and a 95% Wilson interval.
"""

import numpy as np
import pandas as pd

from annotation.scoring import agreement

# Bins of "tokens longer" (non-whitespace tokens, as battles.py counts them): [1, 10), [10, 30)...
LENGTH_BIN_EDGES = [1, 10, 30, 100, np.inf]
# Fewer verdicts than this in a category give a kappa that says nothing; it is left out.
MIN_CATEGORY_BATTLES = 5


def rate(successes, n):
    """A share with its n and 95% Wilson interval (None where n is 0)."""
    if not n:
        return {"rate": None, "lower": None, "upper": None, "n": 0}
    lower, upper = agreement.wilson_interval(successes, n)
    return {"rate": successes / n, "lower": float(lower), "upper": float(upper), "n": int(n)}


def position_bias(orderings):
    """Where the judge saw a battle in both orderings: the share of those battles whose verdict
    (by model) changes with the order, and the share of decisive verdicts that went to the answer
    shown first. An unbiased judge flips only where it is undecided, and its first-position share
    is near 0.5."""
    decisive = orderings[orderings["winner"] != "tie"]
    first = ((decisive["ordering"] == "ab") & (decisive["winner"] == "model_a")) | (
        (decisive["ordering"] == "ba") & (decisive["winner"] == "model_b"))
    per_battle = orderings.groupby("battle_id").agg(orders=("ordering", "nunique"), verdicts=("winner", "nunique"))
    verdicts = per_battle.loc[per_battle["orders"] == 2, "verdicts"]
    return {"first_position_wins": rate(int(first.sum()), len(decisive)),
            "flips": rate(int((verdicts > 1).sum()), len(verdicts))}


def length_bias(verdicts):
    """How often the longer answer wins a decisive verdict, over all and binned by how many tokens
    longer it is (answers of equal length are left out)."""
    difference = verdicts["response_a_len"] - verdicts["response_b_len"]
    decided = verdicts[(verdicts["winner"] != "tie") & (difference != 0)]
    difference = difference[decided.index]
    longer_won = np.where(difference > 0, decided["winner"] == "model_a", decided["winner"] == "model_b")
    frame = pd.DataFrame({"longer_by": difference.abs(), "longer_won": longer_won})
    bins = []
    for low, high in zip(LENGTH_BIN_EDGES, LENGTH_BIN_EDGES[1:], strict=False):
        part = frame[(frame["longer_by"] >= low) & (frame["longer_by"] < high)]
        label = f"{low}+" if high == np.inf else f"{low}-{int(high) - 1}"
        bins.append({"longer_by": label, **rate(int(part["longer_won"].sum()), len(part))})
    return {"longer_wins": rate(int(frame["longer_won"].sum()), len(frame)), "bins": bins}


def _wins_of(battles, model):
    """The model's decisive battles and how many it won."""
    mine = battles[((battles["model_a"] == model) | (battles["model_b"] == model)) & (battles["winner"] != "tie")]
    won = ((mine["winner"] == "model_a") & (mine["model_a"] == model)) | (
        (mine["winner"] == "model_b") & (mine["model_b"] == model))
    return int(won.sum()), len(mine)


def self_preference(judge_battles, human, *, model):
    """Where the judge model is also a contestant: its win rate on the battles it played, as the
    judge itself decided them and as the crowd did (each worker's verdict counted), or None."""
    played = judge_battles[(judge_battles["model_a"] == model) | (judge_battles["model_b"] == model)]
    if played.empty:
        return None
    crowd = human[human["battle_id"].isin(played["battle_id"])]
    return {"model": model, "by_judge": rate(*_wins_of(played, model)), "by_crowd": rate(*_wins_of(crowd, model))}


def _labels_by_model(frame):
    winner = np.where(frame["winner"] == "model_a", frame["model_a"],
                      np.where(frame["winner"] == "model_b", frame["model_b"], "tie"))
    return pd.Series(winner, index=frame.index)


def kappa_by_category(human, judge_battles):
    """Cohen's kappa between each worker's verdict and the judge's on the same battle, chance taken
    per matchup (CHIRP C.2.5), per instruction family category."""
    verdict = pd.Series(_labels_by_model(judge_battles).to_numpy(), index=judge_battles["battle_id"].to_numpy())
    shared = human[human["battle_id"].isin(verdict.index)]
    a, b = shared["model_a"].astype(str), shared["model_b"].astype(str)
    shared = shared.assign(crowd=_labels_by_model(shared), judge=shared["battle_id"].map(verdict).to_numpy(),
                           matchup=np.where(a <= b, a + " vs " + b, b + " vs " + a))
    found = []
    for category, part in shared.groupby("instruction_category"):
        if len(part) < MIN_CATEGORY_BATTLES:
            continue
        kappa = agreement.cohen_kappa(part["crowd"].to_numpy(), part["judge"].to_numpy(),
                                      matchups=part["matchup"].to_numpy())
        found.append({"category": category, "kappa": kappa, "n": len(part)})
    return found


def majority_by_strength(human, orderings):
    """VisIT-Bench Fig. 9: the judge's agreement with the crowd majority per majority strength."""
    shared = orderings[orderings["battle_id"].isin(human["battle_id"])]
    if shared.empty:
        return []
    table = agreement.majority_agreement(human, shared)
    return [{"strength": row["strength"], **rate(row["judge_accuracy"] * row["n_pairs"], row["n_pairs"])}
            for row in table.to_dict(orient="records")]


def spearman_of_shown_elo(elo_by_key, crowd_key, key):
    """Spearman's rho between the crowd's Elo and evaluator `key`'s, over the models both rated: of
    the Elo their leaderboard boards show (`elo_by_key`: board key -> Elo by model), so the figure
    never contradicts the ratings beside it."""
    empty = pd.Series(dtype=float)
    found = agreement.ranking_spearman(elo_by_key.get(crowd_key, empty), elo_by_key.get(key, empty))
    return {"rho": found.statistic, "models": found.n}


def crowd_row(human):
    """The crowd as the reference: what of the report applies to people's own judgements."""
    return {"key": "human", "judge": "Human judgements", "length": length_bias(human)}


def judge_row(evaluator, human, elo_by_key, crowd_key):
    """One judge run's row of the report, against the crowd's judgements of the same battles."""
    row = {
        "key": evaluator.key, "judge": evaluator.judge, "engine": evaluator.engine, "mode": evaluator.mode,
        "prompts_sha256": evaluator.prompts_sha256, "cost_usd": evaluator.cost_usd,
        "unpriced_calls": evaluator.unpriced_calls,
        "judgements": evaluator.judgements,
        "position": position_bias(evaluator.orderings),
        "length": length_bias(evaluator.orderings),
        "self_preference": self_preference(evaluator.battles, human, model=evaluator.engine),
        "majority": [], "kappa_by_category": [], "spearman": None,
    }
    if not human.empty and not evaluator.battles.empty:
        row.update(majority=majority_by_strength(human, evaluator.orderings),
                   kappa_by_category=kappa_by_category(human, evaluator.battles),
                   spearman=spearman_of_shown_elo(elo_by_key, crowd_key, evaluator.key))
    return row


def judge_report(found, *, elo_by_key):
    """Every judge run of the tournament in one table, the crowd first as the reference.
    `elo_by_key`: each board's Elo as the leaderboard shows it (leaderboard.compute)."""
    human = found[0].battles
    return [crowd_row(human), *(judge_row(evaluator, human, elo_by_key, found[0].key) for evaluator in found[1:])]
