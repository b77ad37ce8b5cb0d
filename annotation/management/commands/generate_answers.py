"""Ask a tournament's endpoint models for their owed answers, here and now or as background jobs."""

from django.core.management.base import BaseCommand, CommandError

from annotation.exceptions import AnnotationError
from annotation.models import Tournament
from annotation.preferences import answers


class Command(BaseCommand):
    help = ("Ask each endpoint model of the tournament for every verified instance it has no answer "
            "to; answers already paid for are never asked again. Run it before sampling the battles.")

    def add_arguments(self, parser):
        parser.add_argument("tournament", metavar="TOURNAMENT", help="The tournament's name.")
        parser.add_argument("--async", dest="in_background", action="store_true",
                            help="Queue the background jobs instead of asking here.")

    def handle(self, *args, tournament, in_background, **options):
        found = Tournament.objects.filter(name=tournament).first()
        if found is None:
            raise CommandError(f"No tournament is named “{tournament}”.")
        try:
            if in_background:
                endpoints = answers.start_generation(tournament=found)
                self.stdout.write(f"Answers from {len(endpoints)} endpoint model(s) queued.")
                return
            stored = answers.generate_answers(tournament=found)
        except AnnotationError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"{stored} answer(s) stored.")
        for progress in answers.tournament_progress(found):
            self.stdout.write(f"  {progress.endpoint.model_name}: {progress.done} of {progress.total} answered, "
                              f"{progress.failed} failed, ${progress.cost_usd:.4f}")
