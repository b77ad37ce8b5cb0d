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
        parser.add_argument("--model", default="", metavar="NAME",
                            help="The model's name for a file with one prediction column, whatever "
                                 "the column calls it (e.g. minigpt-4_13b.csv, whose column says "
                                 "“MiniGPT-4 prediction” as minigpt-4.csv's does).")

    def handle(self, *args, path, only_good_rows, model, **options):
        try:
            result = import_predictions(path_or_file=path, only_good=only_good_rows, model_name=model)
        except AnnotationError as error:
            hint = ""
            if getattr(error, "good", 0) and not only_good_rows:
                hint = "\nRun again with --only-good-rows to import those and leave out the rest."
                if model:
                    hint = hint.replace("--only-good-rows", f"--only-good-rows --model {model!r}")
            raise CommandError(f"{error}{hint}") from None
        self.stdout.write(f"{result.imported_from}: {result.summary()}")
        for line in result.left_out:
            self.stdout.write(f"  left out: {line}")
