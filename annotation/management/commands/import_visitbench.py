"""Import published VisIT-Bench sheets (multi-image, single-image, fully annotated example)."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotation.datasets.imports import DEFAULT_SOURCE_NAME, import_visit_bench
from annotation.exceptions import AnnotationError


class Command(BaseCommand):
    help = ("Import VisIT-Bench CSV sheets as reformatted instruction families. Rows already "
            "imported are skipped; a sheet with any malformed row imports nothing.")

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="A VisIT-Bench CSV sheet.")
        parser.add_argument(
            "--source-name", default=DEFAULT_SOURCE_NAME,
            help=f"The dataset the families come from (default: {DEFAULT_SOURCE_NAME}).",
        )

    def handle(self, *args, paths, source_name, **options):
        # All sheets or none, so a failed run can simply be repeated after fixing the sheet.
        try:
            with transaction.atomic():
                results = [import_visit_bench(path_or_file=path, source_name=source_name)
                           for path in paths]
        except AnnotationError as error:
            raise CommandError(str(error)) from None
        for result in results:
            self.stdout.write(str(result))
