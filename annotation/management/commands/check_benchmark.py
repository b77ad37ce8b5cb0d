"""List every way the benchmark in this database is wrong (annotation/benchmark_check.py); exit 1 on any."""

from django.core.management.base import BaseCommand, CommandError

from annotation.benchmark_check import violations
from annotation.models import InstructionFamily


class Command(BaseCommand):
    help = ("List every violation of what the benchmark may hold, one per line with its instance id: rows "
            "resting on rejected work, decisions on rejected votes only or against every counted vote without a "
            "reviewer, items with no next step, snapshot sheet rows with no reference. Exits 1 on any.")

    def add_arguments(self, parser):
        parser.add_argument("--family", type=int, action="append", help="Only this family's id (repeatable).")
        parser.add_argument("--no-snapshots", action="store_true", help="Skip reading the built snapshots' files.")

    def handle(self, *args, **options):
        families = InstructionFamily.objects.all()
        if options["family"]:
            families = families.filter(pk__in=options["family"])
        found = violations(families=families, snapshots=not options["no_snapshots"])
        for violation in found:
            self.stdout.write(str(violation))
        if found:
            raise CommandError(f"{len(found)} violation(s) of the benchmark's rules.", returncode=1)
        self.stdout.write(f"The benchmark holds: no violation in {families.count()} famil(ies).")
