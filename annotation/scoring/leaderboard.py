"""The leaderboard of a tournament: VisIT-Bench Tables 3 and 4, for the crowd and each judge,
with each evaluator's 1-5 rubric scores per model and criterion and their Spearman's rho against
its Elo, and the judges' agreement with the crowd.

The numbers come from ratings.py, bradley_terry.py, tables.py, rubrics.py and agreement.py beside
this module.
A leaderboard is computed once per state of the judgements, by a background job, and stored
(LeaderboardResult, keyed by the fingerprint of that state): freshness.py says when a stored result
is current and runs the computation; the dashboard, its figures, the API and the `leaderboard`
command read that one result, so the 1,000-round bootstraps never run in a request.
"""

from dataclasses import dataclass, field

import pandas as pd
from scipy import stats

from annotation import worker_models
from annotation.figures import dollars, number_text
from annotation.models import REFERENCE_MODEL_NAME, JudgeRun, LeaderboardResult, Tournament
from annotation.scoring import (
    BT_PRIOR_SD,
    MIN_MATCHES,
    MIN_RATED_MATCHES,
    agreement,
    judge_report,
    ratings,
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

SPLIT_LABELS = {
    tables.ALL_IMAGES: "All images",
    tables.SINGLE_IMAGE: "Single Image",
    tables.MULTI_IMAGE: "Multiple Images",
}
HUMAN_KEY = "human"
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


def _worker_model_board(evaluator):
    """A board of crowd-kit's pairwise model: each model's score (0 to 1) from the crowd's choices,
    and, for noisy Bradley-Terry, the skill of the workers it weighed most and least."""
    board = {"key": evaluator.key, "title": evaluator.title, "battles": 0, "judgements": evaluator.judgements,
             "rows": [], "categories": [], "aggregation": evaluator.aggregation, "worker_model_scores": [],
             **_rubric_part(None, pd.Series(dtype=float))}
    if evaluator.battles.empty:
        return board
    fit = worker_models.fit_pairwise(evaluator.battles, evaluator.worker_model)
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



# --- what the pages read -----------------------------------------------------------------------


def _number(value, form="{:.0f}"):
    return number_text(value, form)


def _interval(lower, upper):
    return "" if lower is None or upper is None else f"{lower:.0f} to {upper:.0f}"


def bt_rated(row):
    """Whether a row's Bradley-Terry rating rests on enough matches to be shown as a rating."""
    return row["matches"] >= MIN_RATED_MATCHES


# The prior of every Bradley-Terry rating (bradley_terry.py), as the API names it and the page
# and the command say it.
BT_PRIOR = {"distribution": "normal", "mean": ratings.INITIAL_RATING, "sd": BT_PRIOR_SD}
BT_PRIOR_TEXT = (
    f"Bradley-Terry shows the most probable ratings under a Gaussian prior centred on "
    f"{ratings.INITIAL_RATING:.0f} with a standard deviation of {BT_PRIOR_SD:.0f} points (the gap at "
    f"which the stronger model is expected to win 10 to 1), so a model that won or lost every match "
    f"still gets a finite rating and many matches outweigh the prior; a model with fewer than "
    f"{MIN_RATED_MATCHES} matches is not yet rated."
)


def _percent_with_n(rate, n):
    if n is None:
        return ""
    if rate is None:
        return f"– (n={n})"
    return f"{rate:.2%} (n={n})"


@dataclass
class Board:
    key: str
    title: str
    battles: int
    judgements: int
    rows: list
    categories: list
    rubric_scores: list = field(default_factory=list)
    rubric_criteria: list = field(default_factory=list)
    rubric_correlation: float | None = None
    rubric_models: int = 0
    agreement: dict | None = None
    aggregation: str = ""
    worker_model_scores: list = field(default_factory=list)

    @property
    def table(self):
        return pd.DataFrame(self.rows)

    @property
    def rated_table(self):
        """The rows as a frame with no Bradley-Terry rating where there is none yet, for figures."""
        table = self.table
        if not table.empty:
            table.loc[table["matches"] < MIN_RATED_MATCHES, ["bt", "bt_lower", "bt_upper"]] = float("nan")
        return table

    @property
    def category_table(self):
        return pd.DataFrame(self.categories)

    @property
    def display_rows(self):
        """Rows as the paper prints them: split, model, Elo (interval), Bradley-Terry (interval,
        or "not yet rated" below MIN_RATED_MATCHES), matches, win-rate vs. reference (n), and
        whether the matches are too few for Elo to mean much."""
        return [
            {
                "split": SPLIT_LABELS.get(row.get("split"), "All images"),
                "model": row["model"],
                "elo": _number(row["elo"]),
                "elo_interval": _interval(row["elo_lower"], row["elo_upper"]),
                "bt_rated": bt_rated(row),
                "bt": _number(row["bt"]) if bt_rated(row) else "not yet rated",
                "bt_interval": _interval(row["bt_lower"], row["bt_upper"]) if bt_rated(row) else "",
                "matches": row["matches"],
                "few_matches": row["matches"] < MIN_MATCHES,
                "win_rate": _percent_with_n(row["win_rate_vs_reference"], row["n_vs_reference"]),
            }
            for row in self.rows
        ]

    @property
    def rubric_rows(self):
        """Mean 1-5 rubric score per model, over every rubric and then per criterion (when there
        are several), with its 95% interval, the responses and scores it rests on, and the
        model's Elo on this board."""
        elo = {row["model"]: _number(row["elo"]) for row in self.rows
               if row.get("split", tables.ALL_IMAGES) == tables.ALL_IMAGES}
        return [
            {
                "rubric": row["rubric"],
                "all_rubrics": row["rubric"] == rubrics.ALL_RUBRICS,
                "model": row["model"],
                "mean": f"{row['mean']:.2f}",
                "interval": "" if row["lower"] is None else f"{row['lower']:.2f} to {row['upper']:.2f}",
                "responses": row["responses"],
                "scores": row["scores"],
                "elo": elo.get(row["model"], ""),
            }
            for row in self.rubric_scores
        ]

    @property
    def rubric_correlation_text(self):
        """Spearman's rho of the models' mean rubric score against their Elo, or why there is none."""
        if self.rubric_correlation is not None:
            return f"{self.rubric_correlation:.2f} over {self.rubric_models} models"
        if self.rubric_models < rubrics.MIN_MODELS:
            return (f"none: {self.rubric_models} model{'' if self.rubric_models == 1 else 's'} "
                    f"with both a rubric score and an Elo, fewer than {rubrics.MIN_MODELS}")
        return "none: the mean scores or the ratings do not vary, so there is no order to correlate"

    @property
    def few_matches(self):
        return any(row["matches"] < MIN_MATCHES for row in self.rows)

    @property
    def per_battle(self):
        return f"{self.judgements / self.battles:.3g}" if self.battles else "0"


@dataclass
class TournamentLeaderboard:
    data_key: str
    criterion: str
    rounds: int
    computed_at: object
    seconds: float
    judgements: int = 0
    boards: list[Board] = field(default_factory=list)
    agreements: list[dict] = field(default_factory=list)
    rubric_correlations: list[dict] = field(default_factory=list)
    crowd_alpha: dict | None = None
    judge_report: list[dict] = field(default_factory=list)

    @classmethod
    def from_stored(cls, stored):
        by_key = {a["key"]: a for a in stored.result["agreements"]}
        boards = [
            Board(**board, agreement=agreement_row(by_key[board["key"]]) if board["key"] in by_key else None)
            for board in stored.result["boards"]
        ]
        return cls(data_key=stored.data_key, criterion=stored.criterion, rounds=stored.rounds,
                   computed_at=stored.computed_at, seconds=stored.seconds, judgements=stored.judgements,
                   boards=boards,
                   agreements=stored.result["agreements"],
                   rubric_correlations=stored.result["rubric_correlations"],
                   crowd_alpha=stored.result["crowd_alpha"],
                   judge_report=stored.result["judge_report"])

    # Constants of the code, on the result so that the page and the API read them with it (a
    # stored result was computed by the code of its COMPUTATION_VERSION).
    bt_prior = BT_PRIOR
    bt_prior_text = BT_PRIOR_TEXT
    min_rated_matches = MIN_RATED_MATCHES

    def board(self, key):
        return next((board for board in self.boards if board.key == key), None)

    def agreement(self, key):
        return next((found for found in self.agreements if found["key"] == key), None)

    def majority_table(self, key):
        """The judge's agreement with the crowd by majority strength, as a frame."""
        return pd.DataFrame(self.agreement(key)["majority"])

    @property
    def crowd_alpha_text(self):
        """Krippendorff's alpha among the crowd's judgements of this criterion, beside the judges' kappa."""
        return agreement.AlphaResult(**self.crowd_alpha).text("battle")

    @property
    def agreement_rows(self):
        return [agreement_row(found) for found in self.agreements]

    def judge_report_row(self, key):
        return next((row for row in self.judge_report if row["key"] == key), None)

    @property
    def judge_report_table(self):
        """The judge report as the page prints it: an evaluator per column (the crowd first), so the
        judges are read side by side, and a measure per row."""
        crowd = self.board(HUMAN_KEY)
        columns = [judge_report_column(row, crowd_judgements=crowd.judgements if crowd else None)
                   for row in self.judge_report]
        return {"columns": columns,
                "rows": [{"key": key, "label": label, "cells": [column["cells"][key] for column in columns]}
                         for key, label in JUDGE_REPORT_MEASURES]}

    def rubric_vs_crowd(self, key):
        """A judge's 1-5 scores against the crowd's, response by response (Prometheus-Vision §5)."""
        return next((found for found in self.rubric_correlations if found["key"] == key), None)

    @property
    def rubric_vs_crowd_rows(self):
        return [{**found, "enough": found["pearson"] is not None,
                 **{name: _number(found[name], "{:.2f}") for name in ("pearson", "kendall", "spearman")}}
                for found in self.rubric_correlations]


def _contradiction_text(found):
    """CHIRP's share of questions with a contradiction, with what it rests on."""
    if found["share"] is None:
        return "– (no question with 3 models)"
    cycles = found["three_cycles"]
    return (f"{found['share']:.1%} of {found['questions']} "
            f"({cycles} three-cycle{'' if cycles == 1 else 's'})")


# The judge report's measures, a row each in the order the page prints them.
JUDGE_REPORT_MEASURES = (
    ("verdicts", "Verdicts"),
    ("first_position_wins", "First-position wins"),
    ("flips", "Verdict flips on swap"),
    ("longer_wins", "Longer answer wins"),
    ("self_preference", "Self-preference"),
    ("majority", "Agreement with the crowd majority, by strength"),
    ("kappa_by_category", "Cohen's κ per category"),
    ("spearman", "Spearman of Elo with the crowd's"),
    ("cost", "Cost (USD)"),
)


def _rate_line(found, label=""):
    """A rate as one line of a judge report cell: the rate, and below it its interval and n."""
    if found["rate"] is None:
        return {"label": label, "text": "–", "detail": "n=0"}
    return {"label": label, "text": f"{found['rate']:.1%}",
            "detail": f"{found['lower']:.1%} to {found['upper']:.1%}, n={found['n']}"}


def judge_report_column(row, *, crowd_judgements=None):
    """One evaluator of the judge report (annotation/scoring/judge_report.py) as the page prints it:
    its heading, and per measure the lines of its cell (none where the measure does not apply)."""
    cells = {key: [] for key, _ in JUDGE_REPORT_MEASURES}
    cells["longer_wins"] = [_rate_line(row["length"]["longer_wins"])]
    if row["key"] == HUMAN_KEY:
        if crowd_judgements is not None:
            cells["verdicts"] = [{"text": str(crowd_judgements)}]
        return {"key": row["key"], "crowd": True, "judge": row["judge"], "mode": "the reference", "prompts": "",
                "cells": cells}
    own = row["self_preference"]
    spearman = row["spearman"]
    cells.update(
        verdicts=[{"text": str(row["judgements"])}],
        first_position_wins=[_rate_line(row["position"]["first_position_wins"])],
        flips=[_rate_line(row["position"]["flips"])],
        self_preference=([_rate_line(own["by_judge"], f"{own['model']} by itself"),
                          _rate_line(own["by_crowd"], "by the crowd")] if own
                         else [{"text": "not a contestant", "quiet": True}]),
        majority=[_rate_line(found, found["strength"]) for found in row["majority"]],
        kappa_by_category=[{"label": found["category"], "text": _number(found["kappa"], "{:.2f}") or "–",
                            "detail": f"n={found['n']}"} for found in row["kappa_by_category"]],
        spearman=[] if spearman is None else [{"text": _number(spearman["rho"], "{:.2f}") or "–",
                                               "detail": f"over {spearman['models']} models"}],
        cost=[{"text": dollars(row["cost_usd"], unpriced=row.get("unpriced_calls", 0))}],
    )
    return {"key": row["key"], "crowd": False, "judge": row["engine"], "mode": JudgeRun.Mode(row["mode"]).label,
            "prompts": row["prompts_sha256"][:12], "cells": cells}


def agreement_row(found):
    return {
        "key": found["key"],
        "judge": found["judge"],
        "shared": found["shared"],
        "with_majority": found.get("with_majority"),
        "agreement": _number(found["accuracy"], "{:.1%}"),
        "kappa": _number(found["kappa"], "{:.2f}"),
        "spearman": _number(found["spearman"], "{:.2f}"),
        "contradictions": f"{_contradiction_text(found['judge_contradictions'])} / "
                          f"{_contradiction_text(found['human_contradictions'])}",
    }


def stored_leaderboard(*, tournament, criterion, rounds, data_key):
    """A stored result by its key (the figures of a page ask for the result the page showed),
    or None when it has been replaced since."""
    stored = LeaderboardResult.objects.filter(
        tournament=tournament, criterion=criterion, rounds=rounds, data_key=data_key
    ).first()
    return TournamentLeaderboard.from_stored(stored) if stored else None
