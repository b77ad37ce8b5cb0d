"""Print a tournament's leaderboards (paper Tables 3 and 4): the crowd's and each judge's.

The operator's tool: unlike the pages and the API, it computes here and now (and stores the result
the pages then show) when the stored one is older than the judgements; --stored prints the stored
one as it is, with its age."""

import re

import pandas as pd
from django.core.management.base import BaseCommand, CommandError
from django.utils.timesince import timesince

from annotation.models import CHIRP_CRITERIA, Tournament
from annotation.scoring import DEFAULT_ROUNDS, MIN_MATCHES, freshness


def _columns(header, body):
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *body)
    ]


def _rubric_lines(board):
    if not board.rubric_scores:
        return []
    header = ("Rubric", "Model", "Mean score", "95% interval", "Responses", "Scores", "Elo")
    body = [(r["rubric"], r["model"], r["mean"], r["interval"] or "-", str(r["responses"]), str(r["scores"]),
             r["elo"] or "-") for r in board.rubric_rows]
    return [f"-- {board.title}: rubric scores (1-5) --", *_columns(header, body),
            f"Spearman's rho of mean rubric score against Elo: {board.rubric_correlation_text}", ""]


def age_line(state):
    """How old the result is and what it was computed from, as the pages say it."""
    stored = state.stored
    line = (f"Computed {timesince(stored.computed_at)} ago ({stored.computed_at:%Y-%m-%d %H:%M:%S} UTC, in "
            f"{stored.seconds:.1f} s) from {stored.judgements} judgements")
    if state.current:
        return line + ": the judgements as they are now."
    return line + ". Computing: the judgements have changed since, and a newer result is being computed."


def render_text(leaderboard):
    lines = []
    for board in leaderboard.boards:
        lines.append(f"== {board.title}: {board.battles} battles, {board.judgements} judgements ==")
        if not board.rows:
            lines += ["No battles judged yet.", ""]
            lines += _rubric_lines(board)
            continue
        header = ("Category", "Model", "Elo", "95% interval", "Bradley-Terry", "95% interval", "Matches",
                  "Win-rate vs. reference")
        body = [
            (r["split"], r["model"], r["elo"], r["elo_interval"], r["bt"], r["bt_interval"],
             str(r["matches"]) + (" (!)" if r["few_matches"] else ""), r["win_rate"])
            for r in board.display_rows
        ]
        lines += _columns(header, body)
        lines.append(leaderboard.bt_prior_text)
        if board.few_matches:
            lines.append(f"(!) fewer than {MIN_MATCHES} matches: the interval means little.")
        lines.append("")
        lines += _rubric_lines(board)
    lines.append("== Agreement of the judges with the crowd ==")
    lines.append(f"Among the crowd themselves: Krippendorff's {leaderboard.crowd_alpha_text}")
    if not leaderboard.agreements:
        lines += ["No finished judge run shares battles with the crowd yet.", ""]
        return "\n".join(lines)
    for row in leaderboard.agreement_rows:
        lines.append(
            f"{row['judge']}: {row['shared']} shared battles, agreement with the majority "
            f"{row['agreement']}, Cohen's kappa {row['kappa']}, Spearman of rankings "
            f"{row['spearman']}, questions with a contradiction (judge / humans) {row['contradictions']}"
        )
    for found in leaderboard.agreements:
        lines.append(f"-- {found['judge']}: by majority strength --")
        lines.append(pd.DataFrame(found["majority"]).to_string(index=False))
    lines.append("")
    return "\n".join(lines)


class Command(BaseCommand):
    help = ("Print Elo, Bradley-Terry, matches and win-rate vs. reference of a tournament, per evaluator. "
            "Unlike the dashboard and the API, which show the result the background job stored, this "
            "computes synchronously (here and now, for as long as it takes) when the stored result is older "
            "than the judgements, and stores it; --stored prints the stored one without computing.")

    def add_arguments(self, parser):
        parser.add_argument("tournament", help="The tournament's name (or id).")
        parser.add_argument("--criterion", default="overall", choices=CHIRP_CRITERIA)
        parser.add_argument(
            "--rounds",
            type=int,
            default=DEFAULT_ROUNDS,
            help="Bootstrap rounds for the intervals (the dashboard and the API use the default).",
        )
        parser.add_argument("--stored", action="store_true",
                            help="Print the last stored result with its age, without computing (its job is "
                                 "queued when it is older than the judgements).")

    def handle(self, *args, tournament, criterion, rounds, stored, **options):
        chosen = Tournament.objects.filter(name=tournament).first()
        if chosen is None and re.fullmatch(r"[0-9]{1,18}", tournament):
            chosen = Tournament.objects.filter(pk=int(tournament)).first()
        if chosen is None:
            raise CommandError(f"No tournament is named “{tournament}”.")
        if not 1 <= rounds <= 100_000:
            raise CommandError("--rounds must be between 1 and 100000.")
        if not stored:
            freshness.refresh_leaderboard(tournament=chosen, criterion=criterion, rounds=rounds)
        state = freshness.leaderboard_state(tournament=chosen, criterion=criterion, rounds=rounds)
        if state.stored is None:
            self.stdout.write("The leaderboard is being computed in the background; nothing is stored yet.")
            return
        self.stdout.write(age_line(state))
        self.stdout.write(render_text(state.result))
