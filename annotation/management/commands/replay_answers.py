"""Replay a past campaign's answers under the project's stopping rules and worker models
(annotation/replay.py)."""

from django.core.management.base import BaseCommand, CommandError

from annotation import replay
from annotation.models import Aggregation


def _until_decided(text):
    try:
        agree, most = (int(part) for part in text.split(":"))
    except ValueError:
        raise CommandError(f"--until-decided takes AGREE:MOST, e.g. 2:3; “{text}” is not that.") from None
    return agree, most


class Command(BaseCommand):
    help = ("Replay answers already collected (a CSV with the header item,worker,answer and optional truth and "
            "order columns) under fixed overlaps and ask until decided, each decided by the votes and by a worker "
            "model: answers bought, accuracy against the truth where given, agreement with the worker model "
            "fitted on every answer.")
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("file", help="the CSV file")
        parser.add_argument("--model", default=Aggregation.DAWID_SKENE,
                            choices=[value for value in Aggregation.values if value != Aggregation.VOTES],
                            help="the worker model (default: Dawid-Skene)")
        parser.add_argument("--fixed", type=int, nargs="*", default=list(replay.FIXED_OVERLAPS), metavar="N",
                            help="fixed overlaps to replay (default: 1 3 5)")
        parser.add_argument("--until-decided", type=_until_decided, nargs="*", metavar="AGREE:MOST",
                            default=list(replay.UNTIL_DECIDED),
                            help="ask until AGREE answers agree, up to MOST (default: 2:3 3:5)")

    def handle(self, *args, file, model, fixed, until_decided, **options):
        if any(overlap < 1 for overlap in fixed):
            raise CommandError("A fixed overlap asks at least one answer.")
        try:
            with open(file, "rb") as stream:
                answers = replay.read_answers(stream)
            chosen = replay.rules(fixed=fixed, until_decided=until_decided)
            result = replay.replay(answers, model=model, chosen=chosen)
        except OSError as error:
            raise CommandError(f"Cannot read {file}: {error.strerror}.") from None
        except replay.ReplayError as error:
            raise CommandError(f"{file}: {error}") from None
        self.stdout.write(replay.format_replay(result))
