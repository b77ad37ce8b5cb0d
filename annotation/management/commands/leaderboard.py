"""Print a preference study's leaderboards (paper Tables 3 and 4): the crowd's and each judge's."""

import re

from django.core.management.base import BaseCommand, CommandError

from annotation.models import CHIRP_CRITERIA, PreferenceStudy
from annotation.scoring.leaderboard import DEFAULT_ROUNDS, render_text, study_leaderboard


class Command(BaseCommand):
    help = "Print Elo, Bradley-Terry, matches and win-rate vs. reference of a preference study, per evaluator."

    def add_arguments(self, parser):
        parser.add_argument("study", help="The preference study's name (or id).")
        parser.add_argument("--criterion", default="overall", choices=CHIRP_CRITERIA)
        parser.add_argument(
            "--rounds",
            type=int,
            default=DEFAULT_ROUNDS,
            help="Bootstrap rounds for the intervals (the dashboard and the API use the default).",
        )

    def handle(self, *args, study, criterion, rounds, **options):
        chosen = PreferenceStudy.objects.filter(name=study).first()
        if chosen is None and re.fullmatch(r"[0-9]{1,18}", study):
            chosen = PreferenceStudy.objects.filter(pk=int(study)).first()
        if chosen is None:
            raise CommandError(f"No preference study is named “{study}”.")
        if not 1 <= rounds <= 100_000:
            raise CommandError("--rounds must be between 1 and 100000.")
        self.stdout.write(render_text(study_leaderboard(study=chosen, criterion=criterion, rounds=rounds)))
