"""The leaderboard of a tournament: VisIT-Bench Tables 3 and 4, for the crowd and each judge,
with each evaluator's 1-5 rubric scores per model and criterion and their Spearman's rho against
its Elo, and the judges' agreement with the crowd.

The numbers come from ratings.py, bradley_terry.py, tables.py, rubrics.py and agreement.py beside
this module.
A leaderboard is computed once per state of the judgements and stored (LeaderboardResult), keyed
by a hash of the battles it was computed from: the dashboard, its figures, the API and the
`leaderboard` command read that one result, and a new or changed judgement makes a new key, so
nothing stale is ever shown and the 1,000-round bootstraps do not rerun for each figure or request.
"""

import hashlib
import time
from dataclasses import dataclass, field

import pandas as pd
from django.db import IntegrityError, transaction
from scipy import stats

from annotation import worker_models
from annotation.models import REFERENCE_MODEL_NAME, JudgeRun, LeaderboardResult, Tournament
from annotation.scoring import DEFAULT_ROUNDS, MIN_MATCHES, agreement, ratings, rubrics, tables
from annotation.scoring.battles import (
    finished_runs,
    human_battles,
    human_rubric_scores,
    judge_battles,
    judge_orderings,
    judge_rubric_scores,
)

# Bump when the computation or the stored layout changes, so older stored results are not read.
COMPUTATION_VERSION = 5
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
                battles=judge_battles(run=run, criterion=criterion),
                judgements=len(orderings),
                orderings=orderings,
                judge=f"{run.engine}, {run.get_mode_display()}",
                scores=judge_rubric_scores(run=run) if run.mode == JudgeRun.Mode.PROMETHEUS else None,
                aggregation="Each battle's two orderings combined by the VisIT-Bench tie rule",
            )
        )
    return found


def data_key(found, *, tournament, criterion, rounds):
    """sha256 of everything the result depends on: the battles of every evaluator (and each
    judge's orderings, which the agreement measures read), the parameters and the code version."""
    digest = hashlib.sha256()
    digest.update(repr((COMPUTATION_VERSION, tournament.seed, criterion, rounds, REFERENCE_MODEL_NAME)).encode())
    for evaluator in found:
        digest.update(repr((evaluator.key, evaluator.title, evaluator.judgements)).encode())
        for frame in (evaluator.battles, evaluator.orderings, evaluator.scores):
            if frame is not None:
                digest.update(frame.to_csv(index=False).encode())
    return digest.hexdigest()


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


def _agreement(human, human_elo, human_cycles, judge):
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
        "accuracy": float(overall["judge_accuracy"].iloc[0]) if len(overall) else None,
        "kappa": kappa,
        "spearman": agreement.ranking_spearman(human_elo, ratings.online_elo(verdicts)).statistic,
        "judge_cycles": int(agreement.contradiction_cycles(verdicts)["n_cycles"].sum()),
        "human_cycles": human_cycles,
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
    agreements = []
    human = found[0].battles
    # The judges: a crowd-kit board is the crowd's, aggregated another way.
    found = [found[0], *(evaluator for evaluator in found[1:] if evaluator.judge)]
    if not human.empty:
        human_cycles = int(agreement.contradiction_cycles(human)["n_cycles"].sum())
        human_elo = ratings.online_elo(human)
        for judge in found[1:]:
            result = _agreement(human, human_elo, human_cycles, judge)
            if result is not None:
                agreements.append(_plain(result))
    correlations = []
    crowd_scores = found[0].scores
    if crowd_scores is not None and not crowd_scores.empty:
        for judge in found[1:]:
            if judge.scores is not None and not judge.scores.empty:
                correlations.append(_plain({"key": judge.key, "judge": judge.judge,
                                            **rubric_correlation(crowd_scores, judge.scores)}))
    return {"boards": boards, "agreements": agreements, "rubric_correlations": correlations}


# --- what the pages read -----------------------------------------------------------------------


def _number(value, form="{:.0f}"):
    return "" if value is None else form.format(value)


def _interval(lower, upper):
    return "" if lower is None or upper is None else f"{lower:.0f} to {upper:.0f}"


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
    def category_table(self):
        return pd.DataFrame(self.categories)

    @property
    def display_rows(self):
        """Rows as the paper prints them: split, model, Elo (interval), Bradley-Terry (interval),
        matches, win-rate vs. reference (n), and whether the matches are too few to mean much."""
        return [
            {
                "split": SPLIT_LABELS.get(row.get("split"), "All images"),
                "model": row["model"],
                "elo": _number(row["elo"]),
                "elo_interval": _interval(row["elo_lower"], row["elo_upper"]),
                "bt": _number(row["bt"]),
                "bt_interval": _interval(row["bt_lower"], row["bt_upper"]),
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
    boards: list[Board] = field(default_factory=list)
    agreements: list[dict] = field(default_factory=list)
    rubric_correlations: list[dict] = field(default_factory=list)

    @classmethod
    def from_stored(cls, stored):
        by_key = {a["key"]: a for a in stored.result["agreements"]}
        boards = [
            Board(**board, agreement=agreement_row(by_key[board["key"]]) if board["key"] in by_key else None)
            for board in stored.result["boards"]
        ]
        return cls(data_key=stored.data_key, criterion=stored.criterion, rounds=stored.rounds,
                   computed_at=stored.computed_at, seconds=stored.seconds, boards=boards,
                   agreements=stored.result["agreements"],
                   rubric_correlations=stored.result["rubric_correlations"])

    def board(self, key):
        return next((board for board in self.boards if board.key == key), None)

    def agreement(self, key):
        return next((found for found in self.agreements if found["key"] == key), None)

    def majority_table(self, key):
        """The judge's agreement with the crowd by majority strength, as a frame."""
        return pd.DataFrame(self.agreement(key)["majority"])

    @property
    def agreement_rows(self):
        return [agreement_row(found) for found in self.agreements]

    def rubric_vs_crowd(self, key):
        """A judge's 1-5 scores against the crowd's, response by response (Prometheus-Vision §5)."""
        return next((found for found in self.rubric_correlations if found["key"] == key), None)

    @property
    def rubric_vs_crowd_rows(self):
        return [{**found, "enough": found["pearson"] is not None,
                 **{name: _number(found[name], "{:.2f}") for name in ("pearson", "kendall", "spearman")}}
                for found in self.rubric_correlations]


def agreement_row(found):
    return {
        "key": found["key"],
        "judge": found["judge"],
        "shared": found["shared"],
        "agreement": _number(found["accuracy"], "{:.1%}"),
        "kappa": _number(found["kappa"], "{:.2f}"),
        "spearman": _number(found["spearman"], "{:.2f}"),
        "cycles": f"{found['judge_cycles']} / {found['human_cycles']}",
    }


def tournament_leaderboard(*, tournament, criterion="overall", rounds=DEFAULT_ROUNDS):
    """The tournament's leaderboard for the judgements as they are now: the stored result when one
    was computed from the same battles, else computed and stored (older results of the same
    tournament, criterion and rounds are dropped then)."""
    found = evaluators(tournament=tournament, criterion=criterion)
    key = data_key(found, tournament=tournament, criterion=criterion, rounds=rounds)
    same_board = {"tournament": tournament, "criterion": criterion, "rounds": rounds}
    stored = LeaderboardResult.objects.filter(**same_board, data_key=key).first()
    if stored is None:
        started = time.perf_counter()
        result = compute(found, seed=tournament.seed, rounds=rounds)
        seconds = time.perf_counter() - started
        try:
            with transaction.atomic():
                stored = LeaderboardResult.objects.create(**same_board, data_key=key, result=result,
                                                          seconds=seconds)
        except IntegrityError:
            # Another request computed the same result meanwhile; the numbers are the same.
            stored = LeaderboardResult.objects.get(**same_board, data_key=key)
        LeaderboardResult.objects.filter(**same_board).exclude(
            data_key=key
        ).delete()
    return TournamentLeaderboard.from_stored(stored)


def stored_leaderboard(*, tournament, criterion, rounds, data_key):
    """A stored result by its key (the figures of a page ask for the result the page showed),
    or None when it has been replaced since."""
    stored = LeaderboardResult.objects.filter(
        tournament=tournament, criterion=criterion, rounds=rounds, data_key=data_key
    ).first()
    return TournamentLeaderboard.from_stored(stored) if stored else None
