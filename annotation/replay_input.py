"""What a replay (annotation/replay.py) reads: a CSV file of crowd answers with the header
`item,worker,answer` and optional `truth` and `order` columns, checked row by row (a problem names
its row, as a spreadsheet numbers it, and its column), with the items' truth from a file of its own
where a published set keeps it apart; or a family's counted verification answers."""

import csv
import io
import math
import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from annotation import worker_models
from annotation.exceptions import AnnotationError

REQUIRED = ("item", "worker", "answer")
# The names published crowd data gives each column besides the replay's own, so a set is read as it
# is published: Zheng et al.'s truth-inference sets (question,worker,answer and question,truth),
# crowd-kit's (worker,task,label), Toloka's exports (performer). Compared lower-cased, with spaces
# and hyphens read as underscores ("Worker ID" is worker_id).
NAMES = {
    "item": ("item", "task", "question", "item_id", "task_id", "question_id"),
    "worker": ("worker", "worker_id", "annotator", "annotator_id", "performer"),
    "answer": ("answer", "label", "response"),
    "truth": ("truth", "gold", "true_label", "ground_truth", "gt"),
    "order": ("order",),
}
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
LINE_BREAK = re.compile(r"[\r\n]")
ORDER_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class ReplayError(AnnotationError):
    """A file the replay cannot read, with the row and column to look at."""


@dataclass(frozen=True)
class Answers:
    """A file's answers: `frame` (task, worker, label) with each item's rows in the order they were
    given, `truth` per item where the file gives one."""

    frame: pd.DataFrame
    truth: pd.Series
    ordered_by: str
    read_as: tuple = ()
    """(a header's name, the column it was read as) for each column named otherwise than the replay's own."""


def read_answers(stream):
    """The answers of a CSV file (`stream` is binary); raises ReplayError naming the row (the
    header is row 1, as a spreadsheet numbers it) and the column of the first problem."""
    every = "every answer needs an item, a worker and an answer."
    rows, columns, read_as = _records(stream, NAMES, required=REQUIRED, what="answers",
                                      filled=dict.fromkeys(REQUIRED, every))
    return _answers(rows, has_order="order" in columns, read_as=read_as)


def with_truth(answers, stream):
    """`answers` with the truth of a CSV file of its own (`stream`, binary), as published sets keep it:
    a column naming the item and one its truth (`truth`, or `label` or `answer`, as such a file
    calls it); other columns, and items the answers do not hold, are passed over. Raises ReplayError
    naming the row and the column where it gives an item two truths, or one the answers file does
    not."""
    names = {"item": NAMES["item"], "truth": NAMES["truth"] + NAMES["answer"]}
    rows, _, _ = _records(stream, names, required=("item", "truth"), what="truths",
                          filled={"item": "every truth needs its item."})
    truth, given = {}, dict(answers.truth)
    for row in rows:
        item, said = row["item"], row["truth"]
        if not said:
            continue
        first = truth.setdefault(item, (said, row["line"]))
        if first[0] != said:
            raise ReplayError(f"Row {row['line']}, column “truth”: “{said}”, where row {first[1]} gives item "
                              f"“{item}” the truth “{first[0]}”.")
        if given.get(item, said) != said:
            raise ReplayError(f"Row {row['line']}, column “truth”: “{said}”, where the answers file gives item "
                              f"“{item}” the truth “{given[item]}”.")
    items = answers.frame["task"].unique()
    if not set(truth) & set(items):
        raise ReplayError(f"The truth file names none of the answers' {len(items):,} items (its first: "
                          f"“{next(iter(truth), '')}”; the answers' first: “{items[0]}”).")
    merged = {**{item: said for item, (said, _) in truth.items()}, **given}
    return replace(answers, truth=pd.Series({item: merged[item] for item in items if item in merged}, dtype=object))


def in_random_order(answers, seed):
    """`answers` with each item's answers in a random order of their own, drawn with `seed`, as a
    queue handing items to whoever arrives would have given them: for a file that records no order,
    where a set listed worker by worker would have one worker answer every item first."""
    if answers.ordered_by == ORDER_COLUMN:
        raise ReplayError("The file gives the order of its answers (its order column); a random order would "
                          "replace it. Leave out the order column, or the random order.")
    frame = answers.frame
    items, _ = pd.factorize(frame["task"])  # in the order items first appear, as the file gave them
    shuffled = np.lexsort((np.random.default_rng(seed).random(len(frame)), items))
    return replace(answers, frame=frame.iloc[shuffled].reset_index(drop=True),
                   ordered_by=f"a random order of their own (seed {seed})")


def _records(stream, names, *, required, what, filled):
    """The rows of a CSV file as dicts of the columns `names` knows (with its `line`), the header's
    columns, and the names read as another column's; `filled` says why a column may not be empty."""
    data = stream.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ReplayError(f"Row {_row_at(data[:error.start])}: the file is not UTF-8 text ({error.reason}).") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    # Rows are records, as a spreadsheet shows them: a quoted cell may hold line breaks. `row` is
    # the last one read, so a record the reader fails on is the one after it.
    row, rows = 0, []
    try:
        header = next(reader, None)
        if header is None:
            raise ReplayError(f"The file is empty: its first row must name the columns {_listed(required)}.")
        row, (columns, read_as) = 1, _columns(header, names, required)
        for row, cells in enumerate(reader, start=2):
            rows.append(_row(cells, row, columns, len(header), filled))
    except csv.Error as error:
        raise ReplayError(f"Row {row + 1}: {_csv_problem(error)}.") from None
    if not rows:
        raise ReplayError(f"The file has a header but no {what}.")
    return rows, columns, read_as


def _listed(names):
    return f"{', '.join(names[:-1])} and {names[-1]}"


def _row_at(before):
    """The row (a record, the header row 1) in which a byte comes after `before`, the file's good
    text up to it: its records, and one more when it starts a row of its own."""
    text = before.decode("utf-8-sig")
    try:
        records = sum(1 for _ in csv.reader(io.StringIO(text, newline="")))
    except csv.Error:
        records = len(text.splitlines())
    return records + 1 if not text or text.endswith(("\n", "\r")) else records


def _csv_problem(error):
    if "field larger than field limit" in str(error):
        return (f"a cell is longer than {csv.field_size_limit():,} characters; a quote opened in this row may "
                "not be closed")
    return str(error)


def _columns(header, names, required):
    """{column: its index in the header}, and ((the header's name, column), ...) for each column
    the header names by another of its published names."""
    given = [re.sub(r"[\s-]+", "_", name.strip().lower()) for name in header]
    columns, read_as = {}, []
    for column, known in names.items():
        found = [index for index, name in enumerate(given) if name in known]
        if len(found) > 1:
            twice = {header[index].strip() for index in found}
            said = (f"the column “{column}” twice" if len(twice) == 1
                    else f"the {column} twice: " + " and ".join(f"“{header[index].strip()}”" for index in found))
            raise ReplayError(f"Row 1 (the header) names {said}.")
        if found:
            columns[column] = found[0]
            if given[found[0]] != column:
                read_as.append((header[found[0]].strip(), column))
    missing = [column for column in required if column not in columns]
    if missing:
        others = ", ".join(name for name in names[missing[0]] if name != missing[0])
        optional = [column for column in names if column not in required]
        raise ReplayError(
            f"Row 1 (the header) has no column “{missing[0]}” (nor one of its other names: {others}): it must name "
            f"{_listed(required)}" + (f" ({_listed(optional)} are optional)" if optional else "")
            + f"; it names {', '.join(name.strip() for name in header) or 'nothing'}.")
    return columns, tuple(read_as)


def _row(cells, line, columns, width, filled):
    if len(cells) != width:
        unclosed = "; a quote opened in this row may not be closed" if any(map(LINE_BREAK.search, cells)) else ""
        raise ReplayError(f"Row {line} has {len(cells)} cells where the header names {width} columns{unclosed}.")
    row = {"line": line}
    for name, index in columns.items():
        value = cells[index].strip()
        if CONTROL.search(value):
            raise ReplayError(f"Row {line}, column “{name}”: a control character (such as NUL) is in the cell.")
        if LINE_BREAK.search(value):
            raise ReplayError(f"Row {line}, column “{name}”: a line break is in the cell; a quote opened in this row "
                              "may not be closed.")
        if not value and name in filled:
            raise ReplayError(f"Row {line}, column “{name}”: empty; {filled[name]}")
        row[name] = value
    if "order" in row:
        said = row["order"]
        # ASCII digits only: float() also reads "inf", "1e309" and other scripts' digits ("١").
        if not ORDER_NUMBER.fullmatch(said) or not math.isfinite(float(said)):
            raise ReplayError(f"Row {line}, column “order”: “{said}” is not a number.")
        row["order"] = float(said)
    return row


ORDER_COLUMN = "the order column"


def _answers(rows, *, has_order, read_as):
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
                   ordered_by=ORDER_COLUMN if has_order else "file order", read_as=read_as)


def campaign_answers(family):
    """A family's counted verification answers, as the worker-model job fits them
    (`worker_models.verification_frame`), each reference's in the order they were submitted; no
    truth."""
    frame = worker_models.verification_frame(family=family)
    if frame.empty:
        raise ReplayError(f"“{family.name}” has no counted verification answer to replay.")
    return Answers(frame=frame, truth=pd.Series(dtype=object), ordered_by="the order they were submitted in")
