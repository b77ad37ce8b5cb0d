"""Print the pay plan of a stage before launch: reward from measured (or estimated) time and a
target wage, with the platform's fees as it bills them, e.g.

    manage.py plan_pay --stage caption --tasks 100 --estimate-seconds 180

Each task asks the stage's overlap (a tournament's judgements per pair for pairwise) unless
--assignments says otherwise; impossible numbers (no tasks, a negative budget...) are refused.
"""

from argparse import ArgumentTypeError
from decimal import Decimal, InvalidOperation

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Stage, Worker
from mturk import pay, selectors
from mturk.exceptions import PlatformError
from mturk.models import CrowdStudy
from mturk.platforms import backend_classes


def amount(text):
    # argparse turns only ValueError and TypeError into a usage message; Decimal raises neither.
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ArgumentTypeError(f"not an amount in dollars: {text!r}") from None


class Command(BaseCommand):
    help = "Plan a stage's pay: reward per task to a target hourly wage, fees and total."

    def add_arguments(self, parser):
        parser.add_argument("--study", type=int, help="Plan for this crowd study (its settings).")
        parser.add_argument("--stage", choices=Stage.values, default=Stage.CAPTION)
        # The platform researchers are offered first (mturk.platforms.backend_classes) unless named.
        parser.add_argument("--platform", choices=Worker.Platform.values, default=next(iter(backend_classes())))
        parser.add_argument("--tasks", type=int, default=100)
        parser.add_argument("--assignments", type=int,
                            help="Assignments per task (default: the stage's overlap).")
        parser.add_argument("--wage", type=amount, help="Target hourly wage in USD (default $18).")
        parser.add_argument("--estimate-seconds", type=float,
                            help="Time per task when fewer than 5 have been measured.")
        parser.add_argument("--budget", type=amount)

    def handle(self, *args, **options):
        try:
            if options["study"]:
                study = CrowdStudy.objects.filter(pk=options["study"]).first()
                if study is None:
                    raise CommandError(f"No crowd study {options['study']}.")
                plan = selectors.plan_for_study(study, tasks=options["tasks"],
                                          assignments_per_task=options["assignments"])
            else:
                plan = pay.plan(platform=options["platform"], stage=options["stage"],
                                tasks=options["tasks"], assignments_per_task=options["assignments"],
                                hourly_wage=options["wage"],
                                estimated_seconds=options["estimate_seconds"],
                                budget=options["budget"])
        except PlatformError as error:
            raise CommandError(str(error)) from error
        for line in plan.lines():
            self.stdout.write(line)
