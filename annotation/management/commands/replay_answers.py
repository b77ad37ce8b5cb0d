"""Replay a past campaign's answers under the project's stopping rules and worker models
(annotation/replay.py)."""

from django.core.management.base import BaseCommand, CommandError

from annotation import replay
from annotation.models import Aggregation, InstructionFamily


def _until_decided(text):
    try:
        agree, most = (int(part) for part in text.split(":"))
    except ValueError:
        raise CommandError(f"--until-decided takes AGREE:MOST, e.g. 2:3; “{text}” is not that.") from None
    return agree, most


class Command(BaseCommand):
    help = ("Replay answers already collected (a CSV with the header item,worker,answer and optional truth and "
            "order columns, or a family's counted verification answers) under fixed overlaps and ask until "
            "decided (by agreement, and weighed by each worker's accuracy at several posterior thresholds), each "
            "decided by the votes and by a worker model: answers bought, accuracy against the truth where given, "
            "agreement with the worker model fitted on every answer, and with a truth the curve of accuracy "
            "against answers bought.")
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", help="the CSV file")
        parser.add_argument("--family", metavar="NAME",
                            help="instead of a file, this instruction family's counted verification answers")
        parser.add_argument("--model", default=Aggregation.DAWID_SKENE,
                            choices=[value for value in Aggregation.values if value != Aggregation.VOTES],
                            help="the worker model (default: Dawid-Skene)")
        parser.add_argument("--fixed", type=int, nargs="*", default=list(replay.FIXED_OVERLAPS), metavar="N",
                            help="fixed overlaps to replay (default: 1 to 7)")
        parser.add_argument("--until-decided", type=_until_decided, nargs="*", metavar="AGREE:MOST",
                            default=list(replay.UNTIL_DECIDED),
                            help="ask until AGREE answers agree, up to MOST (default: 2:3 3:5)")
        parser.add_argument("--weighed", type=float, nargs="*", default=list(replay.WORKER_AWARE), metavar="P",
                            help="ask until the verdict's posterior reaches P, each answer weighed by its worker's "
                                 "accuracy (default: 0.7 0.75 0.8 0.85 0.9 0.95 0.99)")
        parser.add_argument("--most", type=int, default=replay.MOST,
                            help="the most answers a weighed rule asks (default: 5)")
        parser.add_argument("--prior-accuracy", type=float, default=replay.PRIOR_ACCURACY,
                            help="a worker's accuracy before any evidence, under weighed rules (default: 0.7)")
        parser.add_argument("--gold-share", type=float, default=1.0, metavar="F",
                            help="weighed rules take a worker's accuracy from the truth of this share of the "
                                 "file's items with one, as gold mixed into the work (default 1: every item but "
                                 "the one decided); 0, or a file without truth: from Dawid-Skene fitted on every "
                                 "answer")

    def handle(self, *args, file, family, model, fixed, until_decided, weighed, most, prior_accuracy,
               gold_share, **options):
        if (file is None) == (family is None):
            raise CommandError("Give a CSV file or --family NAME (one of them).")
        if not 0 <= gold_share <= 1:
            raise CommandError("--gold-share is a share of the items, between 0 and 1.")
        if any(overlap < 1 for overlap in [*fixed, most]):
            raise CommandError("A fixed overlap, and the most a weighed rule asks, is at least one answer.")
        try:
            answers = self._campaign(family) if family is not None else self._file(file)
            chosen = replay.rules(fixed=fixed, until_decided=until_decided, worker_aware=weighed, most=most,
                                  prior=prior_accuracy)
            result = replay.replay(answers, model=model, chosen=chosen,
                                   gold_share=gold_share)
        except OSError as error:
            raise CommandError(f"Cannot read {file}: {error.strerror}.") from None
        except replay.ReplayError as error:
            raise CommandError(f"{file}: {error}" if file else str(error)) from None
        self.stdout.write(replay.format_replay(result))

    def _file(self, file):
        with open(file, "rb") as stream:
            return replay.read_answers(stream)

    def _campaign(self, name):
        chosen = InstructionFamily.objects.filter(name=name).first()
        if chosen is None:
            raise CommandError(f"No instruction family is named “{name}”.")
        return replay.campaign_answers(chosen)
