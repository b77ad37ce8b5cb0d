"""Import model predictions (predictions.csv, one `<model name> prediction` column per model)."""

from django.core.management.base import BaseCommand, CommandError

from annotation.exceptions import AnnotationError
from annotation.preferences.predictions import import_predictions


class Command(BaseCommand):
    help = ("Import a predictions.csv. Rows are matched by instance_id, or by instruction and "
            "image. Any problem is reported by row and column and nothing is imported, unless "
            "--only-good-rows asks to import the predictions that are fine and leave out the rest.")

    def add_arguments(self, parser):
        parser.add_argument("path", metavar="PATH", help="A predictions.csv file.")
        parser.add_argument("--only-good-rows", action="store_true",
                            help="Import the predictions that are fine; report and leave out the "
                                 "others (empty, duplicated, unmatched, conflicting).")

    def handle(self, *args, path, only_good_rows, **options):
        try:
            result = import_predictions(path_or_file=path, only_good=only_good_rows)
        except AnnotationError as error:
            hint = ""
            if getattr(error, "good", 0) and not only_good_rows:
                hint = "\nRun again with --only-good-rows to import those and leave out the rest."
            raise CommandError(f"{error}{hint}") from None
        self.stdout.write(f"{result.imported_from}: {result.summary()}")
        for line in result.left_out:
            self.stdout.write(f"  left out: {line}")
