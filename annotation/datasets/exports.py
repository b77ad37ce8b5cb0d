"""Exports in the published VisIT-Bench formats (DESIGN.md step 10).

Every table is described once (formats.py) and produced once, as a stream of rows (streams.py);
`write_table` consumes that stream a single time and writes the exact CSV, the CSV meant for
spreadsheets (both in blocks of CsvWriter.RECORDS_PER_WRITE records), JSON Lines and Parquet (in
row groups of EXPORT_CHUNK_ROWS). Memory therefore follows those sizes, never the row count.
"""

import csv
import io
import json
import re
from collections.abc import Iterable

from django.conf import settings

from annotation.datasets.formats import Table
from annotation.datasets.streams import sheet_export

# A cell starting with one of these, after any leading whitespace or line breaks, is run as a
# formula by Excel, LibreOffice or Google Sheets (OWASP "CSV injection"), the full-width and small
# forms included (spreadsheets fold them to ASCII); the spreadsheet copy prefixes an apostrophe.
FORMULA_TRIGGERS = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20\ufe66\ufe62\ufe63\ufe6b\u2212")


def neutralise_formula(cell):
    """The cell as text a spreadsheet shows rather than runs."""
    text = cell.lstrip()
    if cell[:1] in FORMULA_TRIGGERS or text[:1] in FORMULA_TRIGGERS:
        return "'" + cell
    return cell


def csv_cell(value, words=("True", "False")):
    if value is None:
        return ""
    if isinstance(value, bool):
        return words[0] if value else words[1]
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def csv_line(cells):
    """One CSV record without its line end, quoted where needed (pandas' to_csv does the same).

    The record is formed as if lines ended with CRLF, so a cell holding a carriage return, a line
    feed or both is always quoted, whatever line end the file then uses: a lone CR left bare
    starts a new row in spreadsheet programs.
    """
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(cells)
    return buffer.getvalue()[:-2]


# The csv module quotes a cell holding one of these (delimiter, quote character, line ends); a
# cell without any is written as it is, so only those are handed to it.
_MAY_NEED_QUOTES = re.compile('[",\r\n]')


class CsvWriter:
    """Writes CSV records with a given line end, and with or without one after the last record.

    `cell_texts`, per column, turns a value into its text (default: values are text already). A
    value that is the very object the same column held in the record before (a battle's texts,
    shared by its judgements' rows) is neither turned into text nor quoted again: its quoted form
    is kept per column. True and False, which flip from row to row, are quoted once per column.

    Records are held and written to the file in blocks of RECORDS_PER_WRITE, so `flush()` must
    follow the last one: a write per record, each first copying its kilobyte of text to add the
    line end, was a quarter of the time spent writing the human preference CSV.
    """

    # Not EXPORT_CHUNK_ROWS: at its 5,000 a block of human preference records (about 5 MB) made
    # writing them 1.6 times slower than at 2,048 (1.0 s against 0.64 s for 300,000, measured).
    RECORDS_PER_WRITE = 2048

    def __init__(self, handle, *, line_terminator="\n", ends_with_newline=True, cell_texts=None):
        self.handle = handle
        self.cell_texts = cell_texts
        self.line_terminator = line_terminator
        self.ends_with_newline = ends_with_newline
        self.started = False
        self._last_cells = ()
        self._last_quoted = []
        self._quoted_booleans = {}
        self._held = []

    def _quoted(self, column, cell):
        text = self.cell_texts[column](cell) if self.cell_texts else cell
        return csv_line((text,)) if _MAY_NEED_QUOTES.search(text) else text

    def writerow(self, cells):
        last = self._last_cells
        if len(last) != len(cells):
            last, self._last_quoted = (None,) * len(cells), [""] * len(cells)
        quoted, booleans = self._last_quoted, self._quoted_booleans
        for column, cell in enumerate(cells):
            if cell is last[column]:
                continue
            if cell is True or cell is False:
                key = (column, cell)
                if key not in booleans:
                    booleans[key] = self._quoted(column, cell)
                quoted[column] = booleans[key]
            else:
                quoted[column] = self._quoted(column, cell)
        self._last_cells = tuple(cells)
        held = self._held
        if self.ends_with_newline:
            held.append(",".join(quoted))
            held.append(self.line_terminator)
        else:
            if self.started:
                held.append(self.line_terminator)
            held.append(",".join(quoted))
        self.started = True
        if len(held) >= 2 * self.RECORDS_PER_WRITE:
            self.flush()

    def flush(self):
        self.handle.write("".join(self._held))
        self._held.clear()


def csv_writer(handle, table=None, *, cell_texts=None):
    layout = table.layout if table is not None else None
    if layout is None:
        return CsvWriter(handle, cell_texts=cell_texts)
    return CsvWriter(handle, line_terminator=layout.line_terminator,
                     ends_with_newline=layout.ends_with_newline, cell_texts=cell_texts)


def _cell_writers(table):
    """Per column, the function that turns a row value into CSV text."""
    layout = table.layout
    words = [("True", "False")] * len(table.columns)
    if layout is not None:
        words[: len(layout.columns)] = [pair if all(pair) else ("True", "False")
                                        for pair in layout.boolean_words]
    return [lambda value, pair=pair: csv_cell(value, pair) for pair in words]


class _ParquetSink:
    def __init__(self, table, where, chunk_rows):
        # Imported here, by the snapshot job: web workers never write Parquet.
        import pyarrow
        import pyarrow.parquet

        self.arrow = pyarrow
        self.schema = table.schema
        self.writer = pyarrow.parquet.ParquetWriter(where, self.schema, compression="zstd")
        self.chunk_rows = chunk_rows
        self.columns = [[] for _ in table.columns]

    def add(self, row):
        for values, value in zip(self.columns, row, strict=True):
            values.append(value)
        if len(self.columns[0]) >= self.chunk_rows:
            self.flush()

    def flush(self):
        if self.columns[0]:
            batch = self.arrow.RecordBatch.from_arrays(
                [self.arrow.array(values, type=field.type) for values, field in zip(self.columns, self.schema,
                                                                              strict=True)],
                schema=self.schema,
            )
            self.writer.write_batch(batch)
            self.columns = [[] for _ in self.columns]

    def close(self):
        self.flush()
        self.writer.close()


def write_table(table: Table, rows: Iterable[tuple], *, csv_file=None, spreadsheet_file=None,
                jsonl_file=None, parquet_file=None, chunk_rows=None, on_row=None):
    """Write a table's rows, read once, to every file given; returns the number of rows.

    csv_file, spreadsheet_file and jsonl_file are text files opened with newline=""; parquet_file
    is a path or a binary file. `on_row(row)` sees each row as written (the snapshot hashes them).
    """
    chunk_rows = chunk_rows or settings.EXPORT_CHUNK_ROWS
    header = table.header
    writers = []
    cell_writers = _cell_writers(table)
    csv_writers = []

    if csv_file is not None:
        # The header goes through the same cell texts: a column name is text already.
        writer = csv_writer(csv_file, table, cell_texts=cell_writers)
        writer.writerow(header)
        writers.append(writer.writerow)
        csv_writers.append(writer)
    if spreadsheet_file is not None:
        sheet = csv_writer(spreadsheet_file, table, cell_texts=[
            lambda value, text=text: neutralise_formula(text(value)) for text in cell_writers])
        sheet.writerow(header)
        writers.append(sheet.writerow)
        csv_writers.append(sheet)
    if jsonl_file is not None:
        writers.append(
            lambda row, f=jsonl_file: f.write(
                json.dumps(dict(zip(header, row, strict=True)), ensure_ascii=False) + "\n"
            )
        )
    parquet = _ParquetSink(table, parquet_file, chunk_rows) if parquet_file is not None else None
    if parquet is not None:
        writers.append(parquet.add)
    if on_row is not None:
        writers.append(on_row)
    count = 0
    try:
        for row in rows:
            for write in writers:
                write(row)
            count += 1
        for held_records in csv_writers:
            held_records.flush()
    finally:
        if parquet is not None:
            parquet.close()
    return count


def export_sheet(*, kind, csv_file, instances=None):
    """One benchmark sheet as CSV (the importer's inverse); returns the number of rows."""
    table, rows = sheet_export(kind, instances)
    return write_table(table, (row for _, row in rows), csv_file=csv_file)

