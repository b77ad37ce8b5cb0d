"""Print a preference study's leaderboards (paper Tables 3 and 4): the crowd's and each judge's."""

from django.core.management.base import BaseCommand, CommandError

from annotation.leaderboard import (
    DEFAULT_ROUNDS,
    render_agreement_text,
    render_text,
    study_agreements,
    study_leaderboards,
)
from annotation.models import CHIRP_CRITERIA, PreferenceStudy


class Command(BaseCommand):
    help = "Print Elo, matches and win-rate vs. reference of a preference study, per evaluator."

    def add_arguments(self, parser):
        parser.add_argument("study", help="The preference study's name (or id).")
        parser.add_argument("--criterion", default="overall", choices=CHIRP_CRITERIA)
        parser.add_argument(
            "--rounds",
            type=int,
            default=DEFAULT_ROUNDS,
            help="Bootstrap rounds for the Elo interval.",
        )

    def handle(self, *args, study, criterion, rounds, **options):
        chosen = PreferenceStudy.objects.filter(name=study).first()
        if chosen is None and study.isdigit():
            chosen = PreferenceStudy.objects.filter(pk=int(study)).first()
        if chosen is None:
            raise CommandError(f"No preference study is named “{study}”.")
        boards = study_leaderboards(study=chosen, criterion=criterion, rounds=rounds)
        self.stdout.write(render_text(boards))
        self.stdout.write(
            render_agreement_text(study_agreements(study=chosen, criterion=criterion))
        )
