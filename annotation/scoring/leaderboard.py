"""The leaderboard of a tournament: VisIT-Bench Tables 3 and 4, for the crowd and each judge,
with each evaluator's 1-5 rubric scores per model and criterion and their Spearman's rho against
its Elo, and the judges' agreement with the crowd.

The numbers come from ratings.py, bradley_terry.py, tables.py, rubrics.py and agreement.py beside
this module.
A leaderboard is computed once per state of the judgements, by a background job, and stored
(LeaderboardResult, keyed by the fingerprint of that state): freshness.py says when a stored result
is current and runs the computation; the dashboard, its figures, the API and the `leaderboard`
command read that one result (as leaderboard_display.py shapes it), so the 1,000-round bootstraps
never run in a request.
"""

from dataclasses import dataclass

import pandas as pd
from scipy import stats

from annotation import worker_models
from annotation.models import REFERENCE_MODEL_NAME, JudgeRun, Tournament
from annotation.scoring import (
    HUMAN_KEY,
    agreement,
    judge_report,
    rubrics,
    tables,
)
from annotation.scoring.battles import (
    finished_runs,
    human_battles,
    human_rubric_scores,
    judge_battles,
    judge_orderings,
    judge_rubric_scores,
)

WORKER_MODEL_TITLES = {
    Tournament.Aggregation.BRADLEY_TERRY: "Bradley-Terry (crowd-kit)",
    Tournament.Aggregation.NOISY_BT: "noisy Bradley-Terry (crowd-kit)",
}
# Fewer scored responses than this, or scores that never vary, give no correlation worth a number.
MIN_SCORED_RESPONSES = 3


@dataclass
class Evaluator:
    """Whose verdicts a board shows: the crowd, or one finished judge run."""

    key: str
    title: str
    battles: pd.DataFrame
    judgements: int
    orderings: pd.DataFrame | None = None
    judge: str = ""
    # 1-5 rubric scores (annotation/scoring/battles.py SCORE_COLUMNS), where the evaluator gave any.
    scores: pd.DataFrame | None = None
    # The run's judge model, mode, prompt fingerprint and what its calls cost (the judge report).
    engine: str = ""
    mode: str = ""
    prompts_sha256: str = ""
    cost_usd: float | None = None
    unpriced_calls: int = 0
    # How its verdicts were aggregated into the board, said on the board.
    aggregation: str = ""
    # crowd-kit's pairwise model (Tournament.Aggregation) whose board this is; `battles` is then
    # its worker, left, right, label frame (annotation/worker_models.py).
    worker_model: str = ""


def evaluators(*, tournament, criterion="overall"):
    human = human_battles(tournament=tournament, criterion=criterion)
    found = [Evaluator(key=HUMAN_KEY, title="Human judgements", battles=human, judgements=len(human),
                       scores=human_rubric_scores(tournament=tournament),
                       aggregation=Tournament.Aggregation.JUDGEMENTS.label)]
    if tournament.aggregation != Tournament.Aggregation.JUDGEMENTS:
        choices = worker_models.pairwise_frame(tournament=tournament, criterion=criterion)
        found.append(Evaluator(key=f"{HUMAN_KEY}-{tournament.aggregation}",
                               title=f"Human judgements: {WORKER_MODEL_TITLES[tournament.aggregation]}",
                               battles=choices, judgements=len(choices),
                               aggregation=tournament.get_aggregation_display(),
                               worker_model=tournament.aggregation))
    for run in finished_runs(tournament=tournament):
        orderings = judge_orderings(run=run, criterion=criterion)
        found.append(
            Evaluator(
                key=f"run-{run.pk}",
                title=f"LLM judge: {run.engine}, {run.get_mode_display()}",
                battles=judge_battles(run=run, criterion=criterion, orderings=orderings),
                judgements=len(orderings),
                orderings=orderings,
                judge=f"{run.engine}, {run.get_mode_display()}",
                scores=judge_rubric_scores(run=run) if run.mode == JudgeRun.Mode.PROMETHEUS else None,
                engine=run.engine,
                mode=run.mode,
                prompts_sha256=run.prompts_sha256,
                cost_usd=float(run.cost_usd), unpriced_calls=run.unpriced_calls,
                aggregation="Each battle's two orderings combined by the VisIT-Bench tie rule",
            )
        )
    return found


# --- the computation ---------------------------------------------------------------------------


def _plain(value):
    """A JSON value from a pandas or numpy one; NaN and NA become None (PostgreSQL's jsonb has
    no NaN)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def _records(frame):
    return [_plain(record) for record in frame.to_dict(orient="records")]


def _labels_by_model(frame):
    """A winner as the name of the model that won (or "tie"), the same whatever side it was on."""
    return frame.apply(lambda row: row[row["winner"]] if row["winner"] != "tie" else "tie", axis=1)


def _agreement(human, elo_by_key, human_contradictions, judge):
    """How one judge agrees with the crowd on the battles both judged (paper §4.3; CHIRP C.2),
    or None when they share none."""
    verdicts = judge.battles
    shared_ids = set(verdicts["battle_id"]) & set(human["battle_id"])
    if not shared_ids:
        return None
    shared_human = human[human["battle_id"].isin(shared_ids)]
    # CHIRP C.2.5: each person's answer against the judge's verdict on the same battle, with
    # chance agreement taken per matchup.
    verdict_by_battle = dict(zip(verdicts["battle_id"], _labels_by_model(verdicts), strict=True))
    pairs = zip(shared_human["model_a"], shared_human["model_b"], strict=True)
    matchups = [" vs ".join(sorted(pair)) for pair in pairs]
    kappa = agreement.cohen_kappa(
        list(_labels_by_model(shared_human)),
        [verdict_by_battle[b] for b in shared_human["battle_id"]],
        matchups=matchups,
    )
    majority = agreement.majority_agreement(
        shared_human, judge.orderings[judge.orderings["battle_id"].isin(shared_ids)]
    )
    overall = majority[majority["strength"] == "all"]
    return {
        "key": judge.key,
        "judge": judge.judge,
        "shared": len(shared_ids),
        # The accuracy's denominator: the shared battles whose crowd votes have a majority.
        "with_majority": int(overall["n_pairs"].iloc[0]) if len(overall) else 0,
        "accuracy": float(overall["judge_accuracy"].iloc[0]) if len(overall) else None,
        "kappa": kappa,
        # Of the Elo the boards beside it show (one computation per figure), not another Elo.
        "spearman": judge_report.spearman_of_shown_elo(elo_by_key, HUMAN_KEY, judge.key)["rho"],
        "judge_contradictions": agreement.contradiction_share(agreement.contradictions(verdicts)),
        "human_contradictions": human_contradictions,
        "majority": _records(majority),
    }


def rubric_correlation(crowd_scores, judge_scores):
    """A judge's 1-5 rubric scores against the crowd's mean score of the same responses, with
    Prometheus-Vision's three measures: Pearson's r, Kendall's tau and Spearman's rho, and n."""
    crowd = crowd_scores.groupby(["question_id", "model"], as_index=False)["score"].mean()
    pairs = crowd.merge(judge_scores[["question_id", "model", "score"]], on=["question_id", "model"],
                        suffixes=("_crowd", "_judge"))
    found = {"n": len(pairs), "pearson": None, "kendall": None, "spearman": None}
    judge, crowd = pairs["score_judge"].astype(float), pairs["score_crowd"].astype(float)
    if len(pairs) >= MIN_SCORED_RESPONSES and judge.nunique() > 1 and crowd.nunique() > 1:
        found.update(pearson=stats.pearsonr(judge, crowd).statistic,
                     kendall=stats.kendalltau(judge, crowd).statistic,
                     spearman=stats.spearmanr(judge, crowd).statistic)
    return found


UNSETTLED_WARNING = (
    "No scores yet: on the crowd's choices so far noisy Bradley-Terry has no settled fit (as long as one "
    "model has always beaten another, its scores run off and stop anywhere), and where it stopped would "
    "rank the models wrongly. Scores appear once judgements go both ways between the models.")


def _worker_model_board(evaluator):
    """A board of crowd-kit's pairwise model: each model's score (0 to 1) from the crowd's choices,
    and, for noisy Bradley-Terry, the skill of the workers it weighed most and least."""
    board = {"key": evaluator.key, "title": evaluator.title, "battles": 0, "judgements": evaluator.judgements,
             "rows": [], "categories": [], "aggregation": evaluator.aggregation, "worker_model_scores": [],
             "worker_model_warning": "", **_rubric_part(None, pd.Series(dtype=float))}
    if evaluator.battles.empty:
        return board
    fit = worker_models.fit_pairwise(evaluator.battles, evaluator.worker_model)
    if fit.unsettled:
        # Where an optimiser stopped is no ranking.
        board["worker_model_warning"] = UNSETTLED_WARNING
        return board
    board["worker_model_scores"] = [{"model": str(model), "score": float(score)} for model, score in fit.scores.items()]
    return board


def _board(evaluator, *, rounds, seed):
    if evaluator.worker_model:
        return _worker_model_board(evaluator)
    battles = evaluator.battles
    board = {
        "key": evaluator.key,
        "title": evaluator.title,
        "battles": int(battles["battle_id"].nunique()),
        "judgements": evaluator.judgements,
        "rows": [],
        "categories": [],
        "aggregation": evaluator.aggregation,
    }
    elo = pd.Series(dtype=float)
    if not battles.empty:
        table = tables.leaderboard_table(battles, reference_model=REFERENCE_MODEL_NAME, rounds=rounds, seed=seed)
        board["rows"] = _records(table)
        board["categories"] = _records(
            tables.category_win_rate_table(battles, reference_model=REFERENCE_MODEL_NAME)
        )
        all_images = table[table["split"] == tables.ALL_IMAGES] if "split" in table else table
        elo = all_images.set_index("model")["elo"]
    return {**board, **_rubric_part(evaluator.scores, elo)}


def _rubric_part(scores, elo):
    """The evaluator's own rubric scores per model and criterion, and Spearman's rho between the
    models' mean score and their Elo on the same board (All images)."""
    table = rubrics.rubric_table(scores)
    found = rubrics.rating_correlation(table, elo) if len(table) else {"rho": None, "models": 0}
    criteria = sorted(set(scores["rubric"])) if scores is not None and not scores.empty else []
    return {"rubric_scores": _records(table), "rubric_criteria": criteria,
            "rubric_correlation": found["rho"], "rubric_models": found["models"]}


def compute(found, *, seed, rounds):
    """The whole leaderboard of one state of the judgements, as JSON-ready data."""
    boards = [_board(evaluator, rounds=rounds, seed=seed) for evaluator in found]
    elo_by_key = {board["key"]: _shown_elo(board) for board in boards}
    agreements = []
    human = found[0].battles
    # Among the crowd themselves: units are battles, the value the response chosen (sides are
    # drawn per worker, so "left" means a different response to different workers).
    crowd_alpha = agreement.nominal_alpha(human["battle_id"], human["winner"])._asdict()
    # The judges: a crowd-kit board is the crowd's, aggregated another way.
    found = [found[0], *(evaluator for evaluator in found[1:] if evaluator.judge)]
    if not human.empty:
        human_contradictions = agreement.contradiction_share(agreement.contradictions(human))
        for judge in found[1:]:
            result = _agreement(human, elo_by_key, human_contradictions, judge)
            if result is not None:
                agreements.append(_plain(result))
    correlations = []
    crowd_scores = found[0].scores
    if crowd_scores is not None and not crowd_scores.empty:
        for judge in found[1:]:
            if judge.scores is not None and not judge.scores.empty:
                correlations.append(_plain({"key": judge.key, "judge": judge.judge,
                                            **rubric_correlation(crowd_scores, judge.scores)}))
    return {"boards": boards, "agreements": agreements, "rubric_correlations": correlations,
            "crowd_alpha": _plain(crowd_alpha),
            "judge_report": _plain(judge_report.judge_report(found, elo_by_key=elo_by_key))}


def _shown_elo(board):
    """A board's Elo as its table shows it (All images), by model."""
    rows = [row for row in board["rows"] if row.get("split") in (None, tables.ALL_IMAGES)]
    return pd.Series({row["model"]: row["elo"] for row in rows}, dtype=float)
