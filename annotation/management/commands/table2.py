"""Print the paper's Table 2 (GPT-4 correct, problem in caption, problem in GPT-4) and the yield."""

from django.core.management.base import BaseCommand, CommandError

from annotation.collection.progress import format_table2, table2
from annotation.models import InstructionFamily


class Command(BaseCommand):
    help = "Print Table 2 of the VisIT-Bench paper from the decided references."

    def add_arguments(self, parser):
        parser.add_argument("--family", metavar="NAME", help="Only this instruction family.")

    def handle(self, *args, family=None, **options):
        chosen = None
        if family is not None:
            chosen = InstructionFamily.objects.filter(name=family).first()
            if chosen is None:
                raise CommandError(f"No instruction family is named “{family}”.")
        self.stdout.write(format_table2(table2(family=chosen)))
