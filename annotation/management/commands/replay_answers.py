"""Replay a past campaign's answers under the project's stopping rules and worker models
(annotation/replay.py)."""

import argparse

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from annotation import replay, replay_input
from annotation.models import Aggregation, InstructionFamily


def _until_decided(text):
    # Raised while the arguments are parsed, which only argparse's own error reports as a usage error.
    try:
        agree, most = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--until-decided takes AGREE:MOST, e.g. 2:3; “{text}” is not that.") from None
    return agree, most


class Command(BaseCommand):
    help = ("Replay answers already collected (a CSV with the header item,worker,answer and optional truth and "
            "order columns, or the names published sets give them, with the truth in the file or in one of its "
            "own; or a family's counted verification answers) under fixed overlaps and ask until "
            "decided (by agreement, and weighed by each worker's accuracy, one accuracy or one on each truth, at "
            "several posterior thresholds), each "
            "decided by the votes and by a worker model: answers bought, accuracy against the truth where given, "
            "agreement with the worker model fitted on every answer, and with a truth the curve of accuracy "
            "against answers bought.")
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", help="the CSV file")
        parser.add_argument("--truth", metavar="FILE",
                            help="the items' truth from a CSV file of its own (item and truth columns), as "
                                 "published crowd sets keep it")
        parser.add_argument("--shuffle", type=int, metavar="SEED",
                            help="each item's answers in a random order of their own, drawn with SEED, for a file "
                                 "that records no order (a set listed worker by worker would otherwise have one "
                                 "worker answer every item first)")
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
        parser.add_argument("--by-truth", type=float, nargs="*", default=list(replay.WORKER_AWARE), metavar="P",
                            help="the same, each answer weighed by its worker's accuracy on items of each truth, "
                                 "starting from how common each label is (a verification stage's “by verdict”; "
                                 "default: the same thresholds)")
        parser.add_argument("--most", type=int, default=replay.MOST,
                            help="the most answers a weighed rule asks (default: 5)")
        parser.add_argument("--matching", type=int, metavar="N",
                            help="also replay each kind of weighed rule at the highest threshold that buys no more "
                                 "than fixed overlap N (default: 3 when it is replayed; 0 for none)")
        parser.add_argument("--prior-accuracy", type=float, default=replay.PRIOR_ACCURACY,
                            help="a worker's accuracy before any evidence, under weighed rules (default: 0.7)")
        parser.add_argument("--gold-share", type=float, default=1.0, metavar="F",
                            help="weighed rules take a worker's accuracy from the truth of this share of the "
                                 "file's items with one, as gold mixed into the work (default 1: every item but "
                                 "the one decided); 0, or a file without truth: from Dawid-Skene fitted on every "
                                 "answer")

    def handle(self, *args, file, family, model, fixed, until_decided, weighed, by_truth, most, prior_accuracy,
               gold_share, matching, truth, shuffle, **options):
        if (file is None) == (family is None):
            raise CommandError("Give a CSV file or --family NAME (one of them).")
        if family is not None and (truth or shuffle is not None):
            raise CommandError("--truth and --shuffle read a file's answers; a family's come in the order they were "
                               "submitted, with no truth.")
        if not 0 <= gold_share <= 1:
            raise CommandError("--gold-share is a share of the items, between 0 and 1.")
        if any(overlap < 1 for overlap in [*fixed, most]):
            raise CommandError("A fixed overlap, and the most a weighed rule asks, is at least one answer.")
        if any(overlap > replay.LARGEST_OVERLAP for overlap in [*fixed, most]):
            raise CommandError(f"A fixed overlap, and the most a weighed rule asks, is at most "
                               f"{replay.LARGEST_OVERLAP:,} answers.")
        if matching is None:
            matching = 3 if 3 in fixed else 0
        if matching < 0:
            raise CommandError("--matching is a fixed overlap (at least one answer), or 0 for none.")
        if matching and matching not in fixed:
            raise CommandError(f"--matching {matching} needs fixed overlap {matching} among those replayed (--fixed).")
        reading = file
        try:
            answers = self._campaign(family) if family is not None else self._file(file)
            if truth:
                reading = truth
                with open(truth, "rb") as stream:
                    answers = replay_input.with_truth(answers, stream)
                reading = file
            if shuffle is not None:
                answers = replay_input.in_random_order(answers, shuffle)
            chosen = replay.rules(fixed=fixed, until_decided=until_decided, worker_aware=weighed, by_truth=by_truth,
                                  most=most, prior=prior_accuracy)
            result = replay.replay(answers, model=model, chosen=chosen, gold_share=gold_share,
                                   matching=matching or None)
        except OSError as error:
            raise CommandError(f"Cannot read {reading}: {error.strerror}.") from None
        except replay_input.ReplayError as error:
            raise CommandError(f"{reading}: {error}" if reading else str(error)) from None
        self.stdout.write(format_replay(result))

    def _file(self, file):
        with open(file, "rb") as stream:
            return replay_input.read_answers(stream)

    def _campaign(self, name):
        chosen = InstructionFamily.objects.filter(name=name).first()
        if chosen is None:
            raise CommandError(f"No instruction family is named “{name}”.")
        return replay_input.campaign_answers(chosen)


# --- what the command prints ----------------------------------------------------------------------


def format_replay(result):
    """The replay as the command prints it: one line per rule."""
    answers = result.answers
    model_name = Aggregation(result.model).label
    truths = len(answers.truth)
    lines = [
        f"Replayed {len(answers.frame):,} answers by {result.workers:,} workers on "
        f"{answers.frame['task'].nunique():,} items, each item's answers in {answers.ordered_by}; "
        + (f"truth given for {truths:,} items." if truths else "no truth given, so no accuracy."),
        f"Agreement is with {model_name} fitted on every answer of the file.",
    ]
    if answers.read_as:
        lines.insert(0, "Read " + ", ".join(f"column “{name}” as {column}" for name, column in answers.read_as) + ".")
    if result.weighed_by:
        lines.append(f"Weighed rules weigh each answer by its worker's accuracy from {result.weighed_by}; "
                     "their votes are weighed the same way. “By truth” rules (a verification stage's “by "
                     "verdict”) weigh it by the worker's accuracy on items of each truth, starting from how "
                     "common each label is as Dawid-Skene fitted on every answer estimates it.")
    lines.append("")
    keys = list(result.rows[0].decided)
    names = {Aggregation.VOTES.value: "votes", result.model: model_name.split(" worker model")[0]}
    header = f"{'rule':<24} {'answers':>9} {'per item':>8} {'fewer':>6} {'ran out':>7}"
    for key in keys:
        if truths:
            header += f"  {names[key] + ': accuracy':>20} {'agreement':>9}"
        else:
            header += f"  {names[key] + ': agreement':>22}"
    lines.append(header)
    everything = result.rows[0].answers
    for row in result.rows:
        fewer = "-" if row is result.rows[0] else f"{1 - row.answers / everything:.0%}"
        line = f"{row.rule:<24} {row.answers:>9,} {row.per_item:>8.2f} {fewer:>6} {row.ran_out:>7,}"
        for key in keys:
            decided = row.decided[key]
            if truths:
                line += f"  {decided.accuracy:>20.3f} {decided.agreement:>9.3f}"
            else:
                line += f"  {decided.agreement:>22.3f}"
        lines.append(line)
    found = [name for _, name in result.matched if name]
    if found:
        lines += ["", f"{' and '.join(found)}: the highest thresholds, to 0.001, that buy no more than fixed "
                      f"overlap {result.matching} buys; what to set to spend what it spends."]
    rows = {row.rule: row for row in result.rows}
    for kind, name in result.matched:
        if name is not None and rows[name].ran_out:
            lines.append(f"{name} ran out on {rows[name].ran_out:,} items: the file holds no more answers for them, "
                         "so a live campaign at that threshold would buy more than the replay could.")
        if name is None:
            lines += ["", f"No {kind} rule buys as little as fixed overlap {result.matching}, even at a threshold "
                          "of 0.501."]
    if any(row.ran_out for row in result.rows):
        lines += ["", "Ran out: items whose rule would have asked for more answers than the file holds; the "
                      "rule bought what there was."]
    if truths:
        lines += ["", *curves(result), *goals(result)]
    return "\n".join(lines)


KINDS = ((replay.FIXED, "fixed overlap"), (replay.AGREEING, "ask until agreed"),
         (replay.WEIGHED, "weighed by accuracy"), (replay.BY_TRUTH, "weighed by accuracy on each truth"))


def curves(result):
    """Accuracy (the votes') against answers bought per item, one line per kind of rule, cheapest first."""
    lines = ["Accuracy against answers bought per item (votes):"]
    width = max(len(title) for _, title in KINDS) + 2
    for marker, title in KINDS:
        points = sorted((row.per_item, row.decided[Aggregation.VOTES.value].accuracy) for row in result.rows[1:]
                        if row.kind == marker)
        if points:
            curve = "  ".join(f"{cost:.2f} → {accuracy:.3f}" for cost, accuracy in points)
            lines.append(f"  {title + ':':<{width}}{curve}")
    return lines


def goals(result):
    """Issue 41's goals for worker-aware stopping, where the replay has fixed overlaps 3 and 5 and
    weighed rules, for each kind of them: reach the fixed five's accuracy with at least 35% fewer
    answers, and at the answers a fixed three buys be at least as accurate as the fixed five."""
    rows = {row.rule: row for row in result.rows}
    five, three = rows.get("fixed overlap 5"), rows.get("fixed overlap 3")
    if five is None or three is None:
        return []
    notes = []
    for kind, title in KINDS[2:]:
        weighed = [row for row in result.rows if row.kind == kind]
        if weighed:
            notes += ["", f"{title[0].upper()}{title[1:]}:", *_goals_of(weighed, five, three)]
    if notes and five.ran_out:
        notes.append("Fixed overlap 5 ran out of answers on some items: the file holds fewer, so it is not a "
                     "full five.")
    return notes


def _goals_of(weighed, five, three):
    """Goal 1 and goal 2's lines for one kind of weighed rule (`weighed`, its rows)."""

    def accuracy(row):
        return row.decided[Aggregation.VOTES.value].accuracy

    reaching = [row for row in weighed if accuracy(row) >= accuracy(five)]
    cheapest = min(reaching, key=lambda row: row.answers, default=None)
    within = [row for row in weighed if row.answers <= three.answers]
    best = max(within, key=accuracy, default=None)
    first = f"Goal 1, fixed overlap 5's accuracy ({accuracy(five):.3f}, {five.answers:,} answers) with 35% fewer: "
    if cheapest is None:
        first += "not met, no weighed rule reaches it."
    else:
        fewer = 1 - cheapest.answers / five.answers
        first += (f"{'met' if fewer >= 0.35 else 'not met'}, {cheapest.rule} reaches {accuracy(cheapest):.3f} "
                  f"with {cheapest.answers:,} ({fewer:.0%} fewer).")
    second = f"Goal 2, at fixed overlap 3's answers ({three.answers:,}) as accurate as fixed overlap 5: "
    if best is None:
        second += "not met, every weighed rule buys more."
    else:
        second += (f"{'met' if accuracy(best) >= accuracy(five) else 'not met'}, {best.rule} buys "
                   f"{best.answers:,} and is right on {accuracy(best):.3f}")
        points = sorted((row.answers, accuracy(row)) for row in weighed)
        if accuracy(best) < accuracy(five) and points[0][0] <= three.answers <= points[-1][0]:
            # A threshold between two of those replayed would buy about this: the curve, read linearly.
            between = float(np.interp(three.answers, *zip(*points, strict=True)))
            second += f"; between its thresholds the curve reads {between:.3f} at {three.answers:,} answers"
        second += "."
    return [first, second]
