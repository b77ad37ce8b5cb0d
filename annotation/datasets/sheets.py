"""Reading CSV sheets as researchers bring them: the published VisIT-Bench sheets, their
predictions.csv files, and files from other releases of the same authors.

Everything that reaches the database from a sheet goes through here first, so a malformed file is
answered with the row and the column at fault, never with a traceback or a database error: cells
holding a NUL byte or longer than MAX_CELL_CHARS, header names longer than MAX_COLUMN_NAME_CHARS,
and JSON that is not strict JSON (Infinity, numbers too large for a float, lone surrogates, NUL,
nesting deeper than MAX_JSON_DEPTH). Bare NaN tokens are the one Python-flavoured extension the
published sheets rely on; they come back as MISSING for the caller to place, because where a NaN
may stand (padding of a list, a value of a metadata object) depends on the column.

Rows are numbered as a spreadsheet shows them (the header is row 1); when a long field spans
several lines, the line where the row starts is given too.
"""

import csv
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from annotation.exceptions import AnnotationError
from annotation.typed_text import CONTROLS

MAX_REPORTED_ERRORS = 20
# csv's own default field limit, kept as our limit per cell; the reader itself accepts far longer
# cells so that a longer one is reported with its row and column instead of as an unreadable file.
MAX_CELL_CHARS = 131_072
_READER_FIELD_LIMIT = 1 << 26
# Model names and column names are stored in 200-character fields.
MAX_COLUMN_NAME_CHARS = 200
# The published metadata objects nest two levels deep; 32 leaves room and stops a hostile
# 50,000-deep cell long before Python's recursion limit.
MAX_JSON_DEPTH = 32


class CellError(Exception):
    """What is wrong with one cell, in words for the person fixing the sheet."""


class _Missing:
    """A bare NaN token of a JSON cell: the published sheets' way of writing "no value"."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "NaN"


MISSING = _Missing()


@dataclass
class Problems:
    """Problems found in a file, capped when reported."""

    messages: list[str] = field(default_factory=list)
    total: int = 0

    def add(self, message):
        self.total += 1
        if len(self.messages) < MAX_REPORTED_ERRORS:
            self.messages.append(message)

    def lines(self):
        more = self.total - len(self.messages)
        return self.messages + ([f"… and {more} more."] if more else [])

    def raise_if_any(self, imported_from):
        if not self.total:
            return
        raise AnnotationError(
            "\n".join([f"{imported_from}: {self.total} problem(s) found; nothing was imported.",
                       *self.lines()])
        )


@dataclass
class SheetRow:
    number: int
    first_line: int
    cells: list[str]

    @property
    def label(self):
        if self.first_line == self.number:
            return f"row {self.number}"
        return f"row {self.number} (line {self.first_line})"


@dataclass
class Sheet:
    """A CSV file as read: its header as written, its rows, and how its lines end."""

    name: str
    header: list[str]
    rows: list[SheetRow]
    line_terminator: str
    ends_with_newline: bool
    sha256: str


def cell_label(row_label, column):
    return f'{row_label}, column "{column}"'


def read_sheet(path_or_file, *, what, problems):
    """The file as a Sheet; rows whose cells cannot be used are reported to `problems` and left out.

    A file that cannot be read at all (not UTF-8, not CSV, no header, a bad header) raises
    AnnotationError at once.
    """
    name, text = _read_text(path_or_file)
    reader = csv.reader(io.StringIO(text, newline=""))
    previous_limit = csv.field_size_limit(_READER_FIELD_LIMIT)
    rows = []
    try:
        header = next(reader, None)
        if not header or not any(cell.strip() for cell in header):
            raise AnnotationError(f"{name} is empty: {what} needs a header row.")
        header = _check_header(header, name)
        number, previous_line = 1, reader.line_num
        for cells in reader:
            number += 1
            row = SheetRow(number=number, first_line=previous_line + 1, cells=cells)
            previous_line = reader.line_num
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                problems.add(f"{row.label}: {len(cells)} cells, but the header has {len(header)} "
                             "columns")
                continue
            if _cells_are_usable(row, header, problems):
                rows.append(row)
    except csv.Error as error:
        raise AnnotationError(
            f"{name}, line {reader.line_num}: not a readable CSV file ({error})."
        ) from None
    finally:
        csv.field_size_limit(previous_limit)
    first_end = text.find("\n")
    terminator = "\r\n" if first_end > 0 and text[first_end - 1] == "\r" else "\n"
    return Sheet(name=name, header=header, rows=rows, line_terminator=terminator,
                 ends_with_newline=text.endswith(("\n", "\r")),
                 sha256=hashlib.sha256(text.encode()).hexdigest())


def _read_text(path_or_file):
    if isinstance(path_or_file, str | Path):
        path = Path(path_or_file)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise AnnotationError(f"Cannot read {path}: {error.strerror}.") from None
        name = path.name
    else:
        data = path_or_file.read()
        name = Path(getattr(path_or_file, "name", "") or "upload.csv").name
    if isinstance(data, bytes):
        try:
            # utf-8-sig: spreadsheets often save a byte-order mark in front of the header.
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise AnnotationError(
                f"{name} is not UTF-8 text (byte {error.start}); save the sheet as UTF-8 CSV."
            ) from None
    return name, data.removeprefix("\ufeff")


def _check_header(header, name):
    names = [column.strip() for column in header]
    problems = Problems()
    seen = {}
    for position, column in enumerate(names, start=1):
        where = f"{name}, row 1 (header), column {position}"
        if "\x00" in column:
            problems.add(f"{where}: the column name holds a NUL character")
        elif len(column) > MAX_COLUMN_NAME_CHARS:
            problems.add(f"{where}: the column name is {len(column)} characters long; at most "
                         f"{MAX_COLUMN_NAME_CHARS} are allowed")
        elif column in seen:
            problems.add(f"{where}: “{shorten(column)}” is also column {seen[column]}")
        else:
            seen[column] = position
    if problems.total:
        raise AnnotationError("\n".join([f"{name}: the header cannot be read.", *problems.lines()]))
    return names


def _cells_are_usable(row, header, problems):
    usable = True
    for column, value in zip(header, row.cells, strict=True):
        if "\x00" in value:
            problems.add(f"{cell_label(row.label, column)}: holds a NUL character")
            usable = False
        elif len(value) > MAX_CELL_CHARS:
            problems.add(f"{cell_label(row.label, column)}: is {len(value)} characters long; at "
                         f"most {MAX_CELL_CHARS} are allowed in a cell")
            usable = False
    return usable


# --- strict JSON --------------------------------------------------------------------------------

# A JSON string (skipped whole; an unterminated one runs to the end, so a cell of many stray
# quotes is still one linear scan), or a bracket that opens or closes a level.
_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[{]|[\]}]')


def load_json(text):
    """The value of a JSON cell, with bare NaN tokens as MISSING; raises CellError.

    Strict otherwise: Infinity, non-finite numbers, lone surrogates and NUL characters are refused,
    and nesting is checked before parsing so a deep cell costs a scan, not a recursion.
    """
    depth = 0
    for match in _JSON_NESTING.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise CellError(f"nests deeper than {MAX_JSON_DEPTH} levels")
        elif token in "]}":
            depth -= 1
    try:
        value = json.loads(text, parse_constant=_constant)
    except CellError:
        raise
    except json.JSONDecodeError as error:
        raise CellError(f"not valid JSON ({error.msg} at character {error.pos})") from None
    except (ValueError, RecursionError) as error:
        raise CellError(f"not valid JSON ({error})") from None
    _check_json_value(value)
    return value


def _constant(token):
    if token == "NaN":
        return MISSING
    raise CellError(f"{token} is not a JSON value")


def _check_json_value(value):
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            check_text(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise CellError("holds a number too large for a float")
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())


def check_text(value):
    """Text the database can store and a page or a terminal shows as text: no NUL (PostgreSQL
    refuses it), no other control character but tab and line breaks, no lone surrogate (not UTF-8)."""
    if "\x00" in value:
        raise CellError("holds a NUL character")
    # A family named "a\x1b[31mb" recolours a terminal that prints it; no published sheet holds one.
    if control := CONTROLS.search(value):
        raise CellError(f"holds an invisible control character (U+{ord(control.group()):04X})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CellError("holds a lone surrogate (\\ud800-\\udfff), which is not text") from None
    return value


def without_missing(value):
    """The value with every MISSING (bare NaN) read as null: "no value", as pandas wrote it."""
    if value is MISSING:
        return None
    if isinstance(value, list):
        return [without_missing(item) for item in value]
    if isinstance(value, dict):
        return {key: without_missing(item) for key, item in value.items()}
    return value


def strip_padding(items):
    """A list without its trailing padding (bare NaN or null, as the multi-image sheet pads)."""
    items = list(items)
    while items and (items[-1] is MISSING or items[-1] is None):
        items.pop()
    return items


# --- booleans -----------------------------------------------------------------------------------

TRUE_WORDS = {"true", "1", "1.0"}
FALSE_WORDS = {"false", "0", "0.0"}


def parse_boolean(value):
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise CellError(f"{shorten(value)} is not a boolean (True/False, TRUE/FALSE, true/false or 1/0)")


def shorten(value, limit=40):
    value = value.strip()
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


