"""What a replay (annotation/replay.py) reads: a CSV file of crowd answers with the header
`item,worker,answer` and optional `truth` and `order` columns, checked row by row (a problem names
its row, as a spreadsheet numbers it, and its column), or a family's counted verification answers."""

import csv
import io
import re
from dataclasses import dataclass

import pandas as pd

from annotation import worker_models
from annotation.exceptions import AnnotationError

REQUIRED = ("item", "worker", "answer")
OPTIONAL = ("truth", "order")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
LINE_BREAK = re.compile(r"[\r\n]")


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
        raise ReplayError(f"Row {_row_at(data[:error.start])}: the file is not UTF-8 text ({error.reason}).") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    # Rows are records, as a spreadsheet shows them: a quoted cell may hold line breaks. `row` is
    # the last one read, so a record the reader fails on is the one after it.
    row, rows = 0, []
    try:
        header = next(reader, None)
        if header is None:
            raise ReplayError("The file is empty: its first row must name the columns item, worker and answer.")
        row, columns = 1, _columns(header)
        for row, cells in enumerate(reader, start=2):
            rows.append(_row(cells, row, columns, len(header)))
    except csv.Error as error:
        raise ReplayError(f"Row {row + 1}: {_csv_problem(error)}.") from None
    if not rows:
        raise ReplayError("The file has a header but no answers.")
    return _answers(rows, has_order="order" in columns)


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
