"""Report the work bought beyond what its stage asked (flagged by migration 0012), or repair again."""

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import transaction

from annotation.crowdwork import surplus


class Command(BaseCommand):
    help = ("Say how many surplus units and answers are flagged (made by versions before migration 0012). "
            "--repair runs that migration's repair again: it finds nothing new on a repaired database.")

    def add_arguments(self, parser):
        parser.add_argument("--repair", action="store_true",
                            help="Re-key, flag and close again before reporting (idempotent).")

    def handle(self, *args, **options):
        if options["repair"]:
            with transaction.atomic():
                report = surplus.repair(apps)
        else:
            report = surplus.flagged(apps)
        for line in report.lines():
            self.stdout.write(line)
