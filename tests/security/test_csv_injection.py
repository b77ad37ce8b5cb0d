"""CSV injection (issue 10.2): every CSV the project writes quotes CR, LF and both, so no reader
starts a row inside a cell; the spreadsheet-safe copy neutralises every cell a spreadsheet would
evaluate; every exported file reads back with the header's column count."""

import csv
import io

import pandas as pd
import pytest

from annotation.datasets import exports, snapshots
from annotation.models import Instance, ModelResponse
from tests.export_fixtures import judged_tournament_with_criteria_fixture  # noqa: F401

pytestmark = pytest.mark.django_db

ATTACK = "...\r=2+5+cmd|' /C calc'!A0"
ALSO_HOSTILE = [
    "...\n=2+5+cmd|' /C calc'!A0",
    "...\r\n@SUM(1+1)*cmd|' /C calc'!A0",
    "  =HYPERLINK(\"http://evil.example\")",
    "\n\n+1+1",
    "\u3000-1+1",
    "＝2+5+cmd|' /C calc'!A0",
    "＋1", "－1", "＠SUM(1)",
]


@pytest.mark.parametrize("cell", [
    "=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", "\n=1", " =1", "   +1", "\r\n-1", "\u00a0=1",
    "\u3000=1", "＝1+1", "＋1", "－1", "＠SUM(A1)", "﹦1", " ＝1",
])
def test_every_cell_a_spreadsheet_would_evaluate_is_neutralised(cell):
    assert exports.neutralise_formula(cell) == "'" + cell


@pytest.mark.parametrize("cell", ["A red bicycle = fun", "3-2", "e-mail me @ home", "", "'=1"])
def test_cells_a_spreadsheet_shows_as_text_are_left_alone(cell):
    assert exports.neutralise_formula(cell) == cell


@pytest.mark.parametrize("terminator", ["\n", "\r\n"])
def test_a_cell_holding_cr_lf_or_both_is_always_quoted(terminator):
    out = io.StringIO(newline="")
    writer = exports.CsvWriter(out, line_terminator=terminator)
    for cell in ("a\rb", "a\nb", "a\r\nb"):
        writer.writerow(["x", cell])
    writer.flush()
    assert out.getvalue() == terminator.join(['x,"a\rb"', 'x,"a\nb"', 'x,"a\r\nb"', ""])


def _records(data):
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def _snapshot_with_hostile_text(judged_tournament_with_criteria):
    tournament, _ = judged_tournament_with_criteria
    Instance.objects.update(instruction=ATTACK)
    for response, text in zip(ModelResponse.objects.order_by("id"), ALSO_HOSTILE, strict=False):
        ModelResponse.objects.filter(pk=response.pk).update(text=text)
    snapshot = snapshots.request_snapshot(tournaments=[tournament], background=False)
    return snapshots.build_snapshot(snapshot=snapshot)


def _stored(snapshot, name):
    with snapshots.snapshot_storage().open(f"v{snapshot.version}/{name}", "rb") as handle:
        return handle.read()


def test_worker_instruction_with_a_lone_cr_reaches_no_spreadsheet_as_a_formula(judged_tournament_with_criteria):
    snapshot = _snapshot_with_hostile_text(judged_tournament_with_criteria)

    data = _stored(snapshot, "spreadsheet/visit_bench_single_image.csv")

    # The cell is quoted, so no reader starts a row at its carriage return, where the text after
    # it would be a first cell starting with "=".
    assert f'"{ATTACK}"'.encode() in data
    assert b"\r=" not in data.replace(f'"{ATTACK}"'.encode(), b"")
    records = _records(data)
    header = records[0]
    assert all(len(record) == len(header) for record in records)
    cells = [cell for record in records[1:] for cell in record]
    assert ATTACK in cells
    for cell in cells:
        assert cell.lstrip()[:1] not in exports.FORMULA_TRIGGERS or cell.startswith("'")


def test_every_csv_of_a_snapshot_reads_back_with_the_headers_column_count(judged_tournament_with_criteria):
    snapshot = _snapshot_with_hostile_text(judged_tournament_with_criteria)

    csv_files = [entry for entry in snapshot.files if entry["name"].endswith(".csv")]
    assert len(csv_files) == 10
    for entry in csv_files:
        data = _stored(snapshot, entry["name"])
        records = _records(data)
        assert {len(record) for record in records} == {len(records[0])}, entry["name"]
        assert len(records) - 1 == entry["rows"], entry["name"]
        frame = pd.read_csv(io.BytesIO(data), keep_default_na=False, dtype=str)
        assert frame.shape == (entry["rows"], len(records[0])), entry["name"]
        if not entry["name"].startswith("spreadsheet/") and "instruction" in frame.columns:
            assert ATTACK in frame["instruction"].tolist() or entry["rows"] == 0, entry["name"]


def test_spreadsheet_copies_hold_no_cell_a_spreadsheet_would_evaluate(judged_tournament_with_criteria):
    snapshot = _snapshot_with_hostile_text(judged_tournament_with_criteria)

    for entry in snapshot.files:
        if not entry["name"].startswith("spreadsheet/"):
            continue
        for record in _records(_stored(snapshot, entry["name"])):
            for cell in record:
                if cell.lstrip()[:1] in exports.FORMULA_TRIGGERS or cell[:1] in exports.FORMULA_TRIGGERS:
                    pytest.fail(f"{entry['name']}: {cell!r} would be evaluated")
