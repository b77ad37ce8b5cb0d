"""A stored leaderboard as the pages, the API and the `leaderboard` command read it: the boards'
rows in the paper's form, the agreement rows and the judge report, from the result leaderboard.py
computed and a background job stored (LeaderboardResult)."""

from dataclasses import dataclass, field

from annotation.figures import dollars, number_text
from annotation.models import JudgeRun
from annotation.scoring import (
    ALL_IMAGES,
    ALL_RUBRICS,
    BT_PRIOR_SD,
    HUMAN_KEY,
    INITIAL_RATING,
    MIN_MATCHES,
    MIN_MODELS,
    MIN_RATED_MATCHES,
    MULTI_IMAGE,
    SINGLE_IMAGE,
    AlphaResult,
)

SPLIT_LABELS = {
    ALL_IMAGES: "All images",
    SINGLE_IMAGE: "Single Image",
    MULTI_IMAGE: "Multiple Images",
}

def _number(value, form="{:.0f}"):
    return number_text(value, form)


def _interval(lower, upper):
    return "" if lower is None or upper is None else f"{lower:.0f} to {upper:.0f}"


def bt_rated(row):
    """Whether a row's Bradley-Terry rating rests on enough matches to be shown as a rating."""
    return row["matches"] >= MIN_RATED_MATCHES


# The prior of every Bradley-Terry rating (bradley_terry.py), as the API names it and the page
# and the command say it.
BT_PRIOR = {"distribution": "normal", "mean": INITIAL_RATING, "sd": BT_PRIOR_SD}
BT_PRIOR_TEXT = (
    f"Bradley-Terry shows the most probable ratings under a Gaussian prior centred on "
    f"{INITIAL_RATING:.0f} with a standard deviation of {BT_PRIOR_SD:.0f} points (the gap at "
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
    worker_model_warning: str = ""

    @property
    def table(self):
        """The rows as a frame, for the figures the leaderboard job draws: pandas is loaded there,
        never by a page that shows a stored result (a web worker grew by about 250 MB)."""
        import pandas as pd

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
        import pandas as pd

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
               if row.get("split", ALL_IMAGES) == ALL_IMAGES}
        return [
            {
                "rubric": row["rubric"],
                "all_rubrics": row["rubric"] == ALL_RUBRICS,
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
        if self.rubric_models < MIN_MODELS:
            return (f"none: {self.rubric_models} model{'' if self.rubric_models == 1 else 's'} "
                    f"with both a rubric score and an Elo, fewer than {MIN_MODELS}")
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
        import pandas as pd

        return pd.DataFrame(self.agreement(key)["majority"])

    @property
    def crowd_alpha_text(self):
        """Krippendorff's alpha among the crowd's judgements of this criterion, beside the judges' kappa."""
        return AlphaResult(**self.crowd_alpha).text("battle")

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
