"""The leaderboard of a preference study: VisIT-Bench Tables 3 and 4, for the crowd and each judge.

The numbers come from annotation/ratings.py; this module only gathers the battles of each
evaluator and lays the tables out the way the paper prints them.
"""

from dataclasses import dataclass

import pandas as pd

from annotation import agreement, ratings
from annotation.models import REFERENCE_MODEL_NAME
from annotation.selectors_scoring import (
    finished_runs,
    human_battles,
    judge_battles,
    judge_orderings,
)

DEFAULT_ROUNDS = 1000


@dataclass
class Leaderboard:
    title: str
    key: str
    battles: pd.DataFrame
    table: pd.DataFrame | None

    @property
    def rows(self):
        return format_rows(self.table) if self.table is not None else []


def evaluator_battles(*, study, criterion="overall"):
    """[(title, key, battles frame)] for the crowd ("human") and every finished run ("run-<id>")."""
    evaluators = [("Human judgements", "human", human_battles(study=study, criterion=criterion))]
    for run in finished_runs(study=study):
        evaluators.append(
            (
                f"LLM judge: {run.engine}, {run.get_mode_display()}",
                f"run-{run.pk}",
                judge_battles(run=run, criterion=criterion),
            )
        )
    return evaluators


def study_leaderboards(*, study, criterion="overall", rounds=DEFAULT_ROUNDS):
    boards = []
    for title, key, battles in evaluator_battles(study=study, criterion=criterion):
        table = (
            ratings.leaderboard_table(
                battles, reference_model=REFERENCE_MODEL_NAME, rounds=rounds, seed=study.seed
            )
            if not battles.empty
            else None
        )
        boards.append(Leaderboard(title=title, key=key, battles=battles, table=table))
    return boards


@dataclass
class Agreement:
    """How one judge agrees with the crowd on the battles both judged (paper §4.3; CHIRP C.2)."""

    key: str
    judge: str
    shared: int
    majority: pd.DataFrame
    kappa: float
    spearman: float
    judge_cycles: int
    human_cycles: int

    @property
    def accuracy(self):
        overall = self.majority[self.majority["strength"] == "all"]
        return float(overall["judge_accuracy"].iloc[0]) if len(overall) else float("nan")


def _labels_by_model(frame):
    """A winner as the name of the model that won (or "tie"), the same whatever side it was on."""
    return frame.apply(lambda row: row[row["winner"]] if row["winner"] != "tie" else "tie", axis=1)


def study_agreements(*, study, criterion="overall"):
    """One Agreement per finished judge run that shares battles with the crowd."""
    human = human_battles(study=study, criterion=criterion)
    results = []
    if human.empty:
        return results
    human_cycles = int(agreement.contradiction_cycles(human)["n_cycles"].sum())
    human_elo = ratings.online_elo(human)
    for run in finished_runs(study=study):
        verdicts = judge_battles(run=run, criterion=criterion)
        shared_ids = set(verdicts["battle_id"]) & set(human["battle_id"])
        if not shared_ids:
            continue
        shared_human = human[human["battle_id"].isin(shared_ids)]
        orderings = judge_orderings(run=run, criterion=criterion)
        # CHIRP C.2.5: each person's answer against the judge's verdict on the same battle, with
        # chance agreement taken per matchup.
        verdict_by_battle = dict(
            zip(verdicts["battle_id"], _labels_by_model(verdicts), strict=True)
        )
        matchups = [
            " vs ".join(sorted(pair))
            for pair in zip(shared_human["model_a"], shared_human["model_b"], strict=True)
        ]
        kappa = agreement.cohen_kappa(
            list(_labels_by_model(shared_human)),
            [verdict_by_battle[b] for b in shared_human["battle_id"]],
            matchups=matchups,
        )
        spearman = agreement.ranking_spearman(human_elo, ratings.online_elo(verdicts)).statistic
        results.append(
            Agreement(
                key=f"run-{run.pk}",
                judge=f"{run.engine}, {run.get_mode_display()}",
                shared=len(shared_ids),
                majority=agreement.majority_agreement(
                    shared_human, orderings[orderings["battle_id"].isin(shared_ids)]
                ),
                kappa=kappa,
                spearman=spearman,
                judge_cycles=int(agreement.contradiction_cycles(verdicts)["n_cycles"].sum()),
                human_cycles=human_cycles,
            )
        )
    return results


def _number(value, form="{:.2f}"):
    return "" if value is None or pd.isna(value) else form.format(value)


def agreement_rows(agreements):
    return [
        {
            "key": a.key,
            "judge": a.judge,
            "shared": a.shared,
            "agreement": _number(a.accuracy, "{:.1%}"),
            "kappa": _number(a.kappa),
            "spearman": _number(a.spearman),
            "cycles": f"{a.judge_cycles} / {a.human_cycles}",
        }
        for a in agreements
    ]


def _percent_with_n(rate, n):
    if pd.isna(rate) or pd.isna(n):
        return ""
    return f"{rate:.2%} (n={int(n)})"


def format_rows(table):
    """Rows as the paper prints them: split, model, Elo (interval), matches, win-rate (n)."""
    rows = []
    for record in table.to_dict("records"):
        rows.append(
            {
                "split": {"single-image": "Single Image", "multi-image": "Multiple Images"}.get(
                    record.get("split"), "All"
                ),
                "model": record["model"],
                "elo": f"{record['elo']:.0f}",
                "interval": f"{record['elo_lower']:.0f} to {record['elo_upper']:.0f}",
                "matches": int(record["matches"]),
                "win_rate": _percent_with_n(
                    record["win_rate_vs_reference"], record["n_vs_reference"]
                ),
            }
        )
    return rows


def render_text(boards):
    """The tables as plain text, for the `leaderboard` management command."""
    lines = []
    for board in boards:
        lines.append(f"== {board.title} ({len(board.battles)} battles) ==")
        if not board.rows:
            lines.append("No battles judged yet.")
            lines.append("")
            continue
        header = ("Category", "Model", "Elo", "95% interval", "Matches", "Win-rate vs. reference")
        body = [
            (r["split"], r["model"], r["elo"], r["interval"], str(r["matches"]), r["win_rate"])
            for r in board.rows
        ]
        widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
        for row in (header, *body):
            lines.append(
                "  ".join(
                    cell.ljust(width) for cell, width in zip(row, widths, strict=True)
                ).rstrip()
            )
        lines.append("")
    return "\n".join(lines)


def render_agreement_text(agreements):
    lines = ["== Agreement of the judges with the crowd =="]
    if not agreements:
        return "\n".join([*lines, "No finished judge run shares battles with the crowd yet.", ""])
    for row in agreement_rows(agreements):
        lines.append(
            f"{row['judge']}: {row['shared']} shared battles, agreement with the majority "
            f"{row['agreement']}, Cohen's kappa {row['kappa']}, Spearman of rankings "
            f"{row['spearman']}, contradiction cycles (judge / humans) {row['cycles']}"
        )
    for agreement_ in agreements:
        lines.append(f"-- {agreement_.judge}: by majority strength --")
        lines.append(agreement_.majority.to_string(index=False))
    lines.append("")
    return "\n".join(lines)
