"""Replay a past campaign (issue 41): what each way of buying answers would have bought, and how
right it would have been, on answers already collected.

A researcher's last campaign (a family's counted verification answers, `campaign_answers`), or any
crowd's answers, such as a published crowd set, as a CSV with the header
`item,worker,answer` and optional `truth` and `order` columns (the common form of published crowd
data, e.g. the truth-inference benchmark sets). Each rule takes an item's answers in `order` (file
order where there is none) and stops where the project would stop: `annotation.crowdwork.stopping`'s
`answers_to_ask`, the function the queue asks, says after each answer whether the unit asks for
another. What the rule bought is then decided twice, by the votes (the most frequent answer; a tie
goes to the answer given first) and by a worker model, `annotation.worker_models.fit_labels`, the
fit the worker-model job runs, over every item's bought answers at once as the job fits a stage.
Each rule is scored against the truth where the file gives one, and against the worker model
fitted on every answer in the file, which is what a campaign that bought everything would decide.

Worker-aware rules (ask until decided weighed by each worker's accuracy, at several posterior
thresholds) need each worker's accuracy, which the stage takes from gold items. A file's gold is
its truth: an answer is weighed by its worker's accuracy on every *other* item of the file with a
truth (the item's own truth never weighs the answers that decide it), shrunk toward a prior as the
stage shrinks it (annotation/workforce/accuracy.py). A file without truth takes each worker's
accuracy from Dawid-Skene fitted on all its answers, the item's own among them, which flatters
the rule somewhat; the output says which it used.

A file can only replay answers it holds: an item whose rule would ask for more than it has stops
there, and the rule's row counts such items as "ran out".
"""

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from annotation import worker_models
from annotation.crowdwork.stopping import Agreement, VoteRule, WorkerAware, answers_to_ask
from annotation.exceptions import AnnotationError
from annotation.models import Aggregation
from annotation.workforce.accuracy import accuracy_from

REQUIRED = ("item", "worker", "answer")
OPTIONAL = ("truth", "order")
FIXED_OVERLAPS = (1, 2, 3, 4, 5, 6, 7)
UNTIL_DECIDED = ((2, 3), (3, 5))
WORKER_AWARE = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)
# The stage's defaults (StageConfig.prior_accuracy, model_min_answers) and most answers asked.
PRIOR_ACCURACY = 0.7
ENOUGH = 5
# Which items a share of the truth takes as gold, drawn alike in every replay of a file.
GOLD_SEED = 41
MOST = 5
NEWLINE = b"\n"
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class ReplayError(AnnotationError):
    """A file the replay cannot read, with the row and column to look at."""


@dataclass(frozen=True)
class Answers:
    """A file's answers: `frame` (task, worker, label) with each item's rows in the order they were
    given, `truth` per item where the file gives one."""

    frame: pd.DataFrame
    truth: pd.Series
    ordered_by: str


def read_answers(stream):
    """The answers of a CSV file (`stream` is binary); raises ReplayError naming the row (the
    header is row 1, as a spreadsheet numbers it) and the column of the first problem."""
    data = stream.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        row = data.count(NEWLINE, 0, error.start) + 1
        raise ReplayError(f"Row {row}: the file is not UTF-8 text ({error.reason}).") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise ReplayError("The file is empty: its first row must name the columns item, worker and answer.")
        columns = _columns(header)
        rows = [_row(cells, reader.line_num, columns, len(header)) for cells in reader]
    except csv.Error as error:
        raise ReplayError(f"Row {reader.line_num}: {error}.") from None
    if not rows:
        raise ReplayError("The file has a header but no answers.")
    return _answers(rows, has_order="order" in columns)


def _columns(header):
    names = [name.strip().lower() for name in header]
    for name in (*REQUIRED, *OPTIONAL):
        if names.count(name) > 1:
            raise ReplayError(f"Row 1 (the header) names the column “{name}” twice.")
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise ReplayError(f"Row 1 (the header) has no column “{missing[0]}”: it must name item, worker and "
                          f"answer (truth and order are optional); it names {', '.join(names) or 'nothing'}.")
    return {name: names.index(name) for name in (*REQUIRED, *OPTIONAL) if name in names}


def _row(cells, line, columns, width):
    if len(cells) != width:
        raise ReplayError(f"Row {line} has {len(cells)} cells where the header names {width} columns.")
    row = {"line": line}
    for name, index in columns.items():
        value = cells[index].strip()
        if CONTROL.search(value):
            raise ReplayError(f"Row {line}, column “{name}”: a control character (such as NUL) is in the cell.")
        if not value and name in REQUIRED:
            raise ReplayError(f"Row {line}, column “{name}”: empty; every answer needs an item, a worker and "
                              "an answer.")
        row[name] = value
    if "order" in row:
        try:
            row["order"] = float(row["order"])
        except ValueError:
            raise ReplayError(f"Row {line}, column “order”: “{row['order']}” is not a number.") from None
        if row["order"] != row["order"]:
            raise ReplayError(f"Row {line}, column “order”: “nan” is not a number.")
    return row


def _answers(rows, *, has_order):
    truth, seen = {}, {}
    for row in rows:
        item, worker = row["item"], row["worker"]
        if (item, worker) in seen:
            raise ReplayError(f"Row {row['line']}, columns “item” and “worker”: worker “{worker}” already "
                              f"answered item “{item}” in row {seen[item, worker]}; a unit asks each worker "
                              "once, so a replay takes one answer per worker and item.")
        seen[item, worker] = row["line"]
        said = row.get("truth", "")
        if said:
            first = truth.setdefault(item, (said, row["line"]))
            if first[0] != said:
                raise ReplayError(f"Row {row['line']}, column “truth”: “{said}”, where row {first[1]} gives item "
                                  f"“{item}” the truth “{first[0]}”.")
    frame = pd.DataFrame({"task": [row["item"] for row in rows], "worker": [row["worker"] for row in rows],
                          "label": [row["answer"] for row in rows],
                          "order": [row["order"] if has_order else row["line"] for row in rows],
                          "line": [row["line"] for row in rows]})
    # Items in the order they first appear, each one's answers in `order`, ties in file order.
    frame["first"] = frame.groupby("task", sort=False)["line"].transform("min")
    frame = frame.sort_values(["first", "order", "line"], kind="stable", ignore_index=True)
    return Answers(frame=frame[worker_models.LABEL_COLUMNS],
                   truth=pd.Series({item: said for item, (said, _) in truth.items()}, dtype=object),
                   ordered_by="the order column" if has_order else "file order")


def campaign_answers(family):
    """A family's counted verification answers, as the worker-model job fits them
    (`worker_models.verification_frame`), each reference's in the order they were submitted; no
    truth."""
    frame = worker_models.verification_frame(family=family)
    if frame.empty:
        raise ReplayError(f"“{family.name}” has no counted verification answer to replay.")
    return Answers(frame=frame, truth=pd.Series(dtype=object), ordered_by="the order they were submitted in")


# --- rules ----------------------------------------------------------------------------------------


class Fixed(VoteRule):
    """A fixed overlap: a unit asks its overlap whatever the answers say."""

    labels = (None,)

    def decision(self, answers):
        return None


@dataclass(frozen=True)
class Rule:
    """A stopping rule as a stage sets it: `rule` (annotation.crowdwork.stopping's, or Fixed) up to `maximum`."""

    name: str
    rule: object
    maximum: int


def rules(*, fixed=FIXED_OVERLAPS, until_decided=UNTIL_DECIDED, worker_aware=WORKER_AWARE, most=MOST,
          prior=PRIOR_ACCURACY):
    """The rules to replay: each fixed overlap, each (agree, most) of ask until decided, the
    verification stage's "agree to decide" and overlap, and each posterior threshold of ask until
    decided weighed by worker accuracy, up to `most` (worker accuracy `prior` before evidence)."""
    found = [Rule(f"fixed overlap {overlap}", Fixed(), overlap) for overlap in fixed]
    for agree, most_asked in until_decided:
        if not 1 <= agree <= most_asked:
            raise ReplayError(f"Ask until decided needs 1 <= agree <= most answers; {agree} of up to {most_asked} "
                              "is not.")
        found.append(Rule(f"{agree} agreeing of up to {most_asked}", Agreement(agree), most_asked))
    if worker_aware and not 0.5 < prior < 1:
        raise ReplayError(f"A prior accuracy is between 0.5 and 1; {prior} is not.")
    for threshold in worker_aware:
        if not 0.5 < threshold < 1:
            raise ReplayError(f"A posterior threshold is between 0.5 and 1; {threshold} is not.")
        found.append(Rule(f"weighed {threshold:g}, up to {most}", WorkerAware(threshold, prior, enough=ENOUGH), most))
    return found


def gold_of(answers, gold_share):
    """The truth taken as gold: every item's, or `gold_share` of the items with a truth, drawn with
    GOLD_SEED, as a campaign mixes gold into its work."""
    gold = answers.truth
    if gold_share < 1:
        drawn = np.random.default_rng(GOLD_SEED).choice(len(gold), max(1, round(gold_share * len(gold))),
                                                         replace=False)
        gold = gold.iloc[np.sort(drawn)]
    return gold


def accuracies(answers, *, gold_share=1.0):
    """Per answer (the frame's index), its worker's accuracy as a worker-aware rule weighs it: on
    the file's other items with a truth, taken as gold (`gold_share` of the items with a truth,
    drawn with seed 41, as a campaign mixes gold into its work), or, without truth or with a share
    of 0, Dawid-Skene's over every answer (the stage's order of evidence: gold, else the worker
    model). Returns (accuracies, what they rest on)."""
    frame = answers.frame
    if gold_share > 0 and len(answers.truth):
        gold = gold_of(answers, gold_share)
        truth = frame["task"].map(gold)
        known = truth.notna()
        right = known & (frame["label"] == truth)
        # The worker's totals less this answer's own item: its truth never weighs its answers.
        right_elsewhere = right.groupby(frame["worker"]).transform("sum") - right
        known_elsewhere = known.groupby(frame["worker"]).transform("sum") - known
        values = [accuracy_from(gold=(r, n), fitted=None, prior=PRIOR_ACCURACY, enough=ENOUGH).value
                  for r, n in zip(right_elsewhere, known_elsewhere, strict=True)]
        share = "" if gold_share >= 1 else f" ({len(gold):,} of them, {gold_share:.0%}, taken as gold)"
        return pd.Series(values, index=frame.index), f"the truth of the worker's other items{share}"
    fit = worker_models.fit_labels(frame, Aggregation.DAWID_SKENE)
    of_worker = {worker: accuracy_from(gold=(0, 0), fitted=(fit.reliability[worker], fit.answers[worker]),
                                       prior=PRIOR_ACCURACY, enough=ENOUGH).value for worker in fit.answers.index}
    return frame["worker"].map(of_worker), "Dawid-Skene fitted on every answer (the item's own among them)"


def _read_as(rule, labels, weights):
    """An item's answers as `rule` reads them: bare labels, or (label, accuracy) when weighed."""
    if isinstance(rule.rule, WorkerAware):
        return list(zip(labels, weights, strict=True))
    return list(labels)


def bought(rule, labels):
    """How many of an item's `labels`, in order, `rule` buys, and whether it ran out (would have
    asked for more than the item has)."""
    count = 0
    while count < len(labels):
        if count >= answers_to_ask(rule.rule, labels[:count], rule.maximum):
            return count, False
        count += 1
    return count, answers_to_ask(rule.rule, labels, rule.maximum) > count


def buy(answers, rule, weights):
    """The rows of `answers.frame` that `rule` buys, and how many items ran out."""
    keep, ran_out = [], 0
    for _, labels in answers.frame.groupby("task", sort=False)["label"]:
        count, short = bought(rule, _read_as(rule, labels, weights[labels.index]))
        keep.extend(labels.index[:count])
        ran_out += short
    return answers.frame.loc[keep], ran_out


def votes(frame, rule=None, weights=None):
    """Each item's most frequent answer (a tie goes to the answer given first), or under a
    worker-aware `rule` its most probable one, each answer weighed by its worker's accuracy."""
    if rule is not None and isinstance(rule.rule, WorkerAware):
        return frame.groupby("task", sort=False)["label"].agg(
            lambda said: rule.rule.leading(_read_as(rule, said, weights[said.index])))
    return frame.groupby("task", sort=False)["label"].agg(lambda said: Counter(said).most_common(1)[0][0])


# --- the replay -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decided:
    """One aggregation's decisions of a rule's answers: `accuracy` against the truth (None without
    one) and `agreement` with the worker model fitted on every answer."""

    accuracy: float | None
    agreement: float


@dataclass(frozen=True)
class Row:
    rule: str
    answers: int
    items: int
    ran_out: int
    decided: dict

    @property
    def per_item(self):
        return self.answers / self.items


@dataclass(frozen=True)
class Replay:
    answers: Answers
    model: str
    rows: list
    weighed_by: str = ""

    @property
    def workers(self):
        return self.answers.frame["worker"].nunique()


def replay(answers, *, model=Aggregation.DAWID_SKENE, chosen=None, gold_share=1.0):
    """Replay `answers` under every rule of `chosen` (default `rules()`) and under "all answers";
    each decided by the votes and by `model`. Weighed rules take each worker's accuracy from the
    truth of their other items (`gold_share` of them), or from Dawid-Skene at a share of 0 (`accuracies`)."""
    if model == Aggregation.VOTES or model not in Aggregation.values:
        raise ReplayError(f"“{model}” is not a worker model; choose one of "
                          f"{', '.join(value for value in Aggregation.values if value != Aggregation.VOTES)}.")
    everything = answers.frame
    reference = worker_models.fit_labels(everything, model).labels
    rows = [_row_of("all answers", everything, 0, answers, model, reference)]
    chosen = rules() if chosen is None else chosen
    weights, weighed_by = pd.Series(dtype=float), ""
    if any(isinstance(rule.rule, WorkerAware) for rule in chosen):
        weights, weighed_by = accuracies(answers, gold_share=gold_share)
    labels = tuple(sorted(everything["label"].unique()))
    for rule in chosen:
        if isinstance(rule.rule, WorkerAware):
            # Its posterior spreads a wrong answer over the file's other labels.
            rule = replace(rule, rule=WorkerAware(rule.rule.threshold, rule.rule.prior, labels=labels,
                                                  enough=rule.rule.enough))
        frame, ran_out = buy(answers, rule, weights)
        rows.append(_row_of(rule.name, frame, ran_out, answers, model, reference, votes(frame, rule, weights)))
    return Replay(answers=answers, model=str(model), rows=rows, weighed_by=weighed_by)


def _row_of(name, frame, ran_out, answers, model, reference, decided_by_votes=None):
    decided = {Aggregation.VOTES.value: votes(frame) if decided_by_votes is None else decided_by_votes,
               str(model): worker_models.fit_labels(frame, model).labels}
    return Row(rule=name, answers=len(frame), items=frame["task"].nunique(), ran_out=ran_out,
               decided={key: _score(labels, answers.truth, reference) for key, labels in decided.items()})


def _score(labels, truth, reference):
    known = truth.index.intersection(labels.index)
    accuracy = float((labels[known] == truth[known]).mean()) if len(known) else None
    return Decided(accuracy=accuracy, agreement=float((labels == reference.reindex(labels.index)).mean()))


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
    if result.weighed_by:
        lines.append(f"Weighed rules weigh each answer by its worker's accuracy from {result.weighed_by}; "
                     "their votes are weighed the same way.")
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
    if any(row.ran_out for row in result.rows):
        lines += ["", "Ran out: items whose rule would have asked for more answers than the file holds; the "
                      "rule bought what there was."]
    if truths:
        lines += ["", *curves(result), *goals(result)]
    return "\n".join(lines)


KINDS = (("fixed overlap", "fixed overlap"), ("agreeing", "ask until agreed"), ("weighed", "weighed by accuracy"))


def curves(result):
    """Accuracy (the votes') against answers bought per item, one line per kind of rule, cheapest first."""
    lines = ["Accuracy against answers bought per item (votes):"]
    for marker, title in KINDS:
        points = sorted((row.per_item, row.decided[Aggregation.VOTES.value].accuracy) for row in result.rows[1:]
                        if marker in row.rule)
        if points:
            curve = "  ".join(f"{cost:.2f} → {accuracy:.3f}" for cost, accuracy in points)
            lines.append(f"  {title + ':':<22}{curve}")
    return lines


def goals(result):
    """Issue 41's goals for worker-aware stopping, where the replay has fixed overlaps 3 and 5 and a
    weighed rule: reach the fixed five's accuracy with at least 35% fewer answers, and at the
    answers a fixed three buys be at least as accurate as the fixed five."""
    rows = {row.rule: row for row in result.rows}
    five, three = rows.get("fixed overlap 5"), rows.get("fixed overlap 3")
    weighed = [row for row in result.rows if row.rule.startswith("weighed")]
    if five is None or three is None or not weighed:
        return []

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
    notes = ["", first, second]
    if five.ran_out:
        notes.append("Fixed overlap 5 ran out of answers on some items: the file holds fewer, so it is not a "
                     "full five.")
    return notes
