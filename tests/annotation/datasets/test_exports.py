import csv
import io
import json
import random

import pandas as pd
import pytest

from annotation.datasets import exports, formats, layouts, streams
from annotation.datasets.imports import import_visit_bench
from annotation.models import CHIRP_CRITERIA, Instance
from tests.export_fixtures import CRITERIA, judged_tournament_with_criteria_fixture  # noqa: F401
from tests.published_data import DATA, benchmark_part
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db



def _cells(text):
    return list(csv.reader(io.StringIO(text, newline="")))


def _export(kind, **options):
    handle = io.StringIO(newline="")
    exports.export_sheet(kind=kind, csv_file=handle, **options)
    return handle.getvalue()


def test_multi_image_sheet_round_trips_cell_by_cell():
    # The 9 rows rated incorrect without a reference are not in the benchmark.
    original = benchmark_part(DATA / "visit_bench_multi_images.csv")
    import_visit_bench(path_or_file=DATA / "visit_bench_multi_images.csv")

    exported = _export(layouts.MULTI_IMAGE)

    expected, got = _cells(original), _cells(exported)
    assert got[0] == expected[0]
    assert len(got) == len(expected) == 1 + 100 - 9
    for number, (want, have) in enumerate(zip(expected, got, strict=True), start=1):
        for column, a, b in zip(expected[0], want, have, strict=True):
            assert a == b, f"row {number}, column {column}"
    # The published quoting and line ends come back too, byte for byte.
    assert exported == original


def test_fully_annotated_example_round_trips():
    original = (DATA / "visit_fully_annotated_example.csv").read_text(encoding="utf-8")
    import_visit_bench(path_or_file=DATA / "visit_fully_annotated_example.csv")

    exported = _export(layouts.FULLY_ANNOTATED)

    assert _cells(exported) == _cells(original)


def test_fully_annotated_rows_appear_in_the_single_image_sheet_without_a_model_prediction():
    import_visit_bench(path_or_file=DATA / "visit_fully_annotated_example.csv")

    rows = list(csv.DictReader(io.StringIO(_export(layouts.SINGLE_IMAGE), newline="")))

    assert len(rows) == 10
    assert list(rows[0]) == formats.SINGLE_IMAGE_SHEET.header
    assert rows[0]["image"].startswith("https://visit-instruction-tuning.s3.amazonaws.com/")
    assert rows[0]["gpt4_prediction"] == ""
    assert rows[0]["reference_output"] and rows[0]["human_ratings_gpt4_correct"] == "TRUE"
    assert int(rows[0]["instance_id"]) == Instance.objects.order_by("id").first().pk
    assert _cells(_export(layouts.MULTI_IMAGE)) == [formats.MULTI_IMAGE_SHEET.header]


def test_instances_our_verifiers_discarded_are_not_exported():
    kept = verified_instance(instruction="kept")
    discarded = verified_instance(instruction="discarded")
    for instance, verdict in ((kept, "correct"), (discarded, "incorrect")):
        instance.references.create(text="ref", model="gpt-4", verdict=verdict,
                                   caption=instance.current_caption)
    Instance.objects.filter(pk=discarded.pk).update(status=Instance.Status.DISCARDED)

    rows = list(csv.DictReader(io.StringIO(_export(layouts.SINGLE_IMAGE), newline="")))

    assert [row["instruction"] for row in rows] == ["kept"]
    assert rows[0]["gpt4_prediction"] == "ref" and rows[0]["human_ratings_gpt4_correct"] == "TRUE"


# --- preferences and battles -------------------------------------------------------------------


def _table(table, rows):
    handle = io.StringIO(newline="")
    exports.write_table(table, rows, csv_file=handle)
    return handle.getvalue()


def test_human_preference_csv_has_the_published_header_and_one_row_per_judgement(judged_tournament_with_criteria):
    tournament, _ = judged_tournament_with_criteria
    from annotation.models import HumanJudgement

    text = _table(formats.HUMAN_PREFERENCES, streams.human_preference_rows(tournaments=[tournament]))
    rows = _cells(text)

    assert text.splitlines()[0] == (
        "image_url,instruction,A,B,A_model,B_model,model_selection.A,model_selection.B"
    )
    # A battle's judgements together, in the order they were made.
    judgements = list(HumanJudgement.objects.order_by("battle_id", "id").select_related(
        "battle__instance", "battle__response_a", "battle__response_b"))
    assert len(rows) - 1 == len(judgements) > 0
    for row, judgement in zip(rows[1:], judgements, strict=True):
        battle = judgement.battle
        urls = [image.url for image in battle.instance.ordered_images()]
        chose_a = judgement.winner_side(judgement.choice) == "model_a"
        assert row == [
            urls[0] if len(urls) == 1 else json.dumps(urls),
            battle.instance.instruction,
            battle.response_a.text,
            battle.response_b.text,
            battle.response_a.model_name,
            battle.response_b.model_name,
            str(chose_a),
            str(not chose_a),
        ]


def test_wide_preferences_add_criteria_and_pseudonyms_never_raw_ids(judged_tournament_with_criteria):
    tournament, _ = judged_tournament_with_criteria
    text = _table(formats.HUMAN_PREFERENCES_WIDE,
                  streams.human_preference_rows(tournaments=[tournament], wide=True))
    rows = list(csv.DictReader(io.StringIO(text, newline="")))

    assert "RAWWORKERID" not in text
    assert {row["criterion"] for row in rows} == set(CHIRP_CRITERIA)
    assert all(row["worker"].startswith("w_") for row in rows)
    assert {row["time_taken_seconds"] for row in rows} == {"12.5"}
    for row in rows:
        picked_a = row["side_chosen"] == row["side_shown_A"]
        assert row["model_selection.A"] == str(picked_a)
        assert row["side_chosen"] == ("right" if row["criterion"] == "detail" else "left")


def test_battles_jsonl_has_the_leaderboard_fields_and_both_orderings(judged_tournament_with_criteria):
    tournament, run = judged_tournament_with_criteria
    handle = io.StringIO(newline="")
    exports.write_table(formats.BATTLES, streams.battle_rows(tournaments=[tournament]), jsonl_file=handle)
    records = [json.loads(line) for line in handle.getvalue().splitlines()]

    assert records
    for record in records:
        assert list(record) == [
            "A_model", "B_model", "A", "B", "image_url", "instruction", "instruction_category",
            "engine", "evaluated_with_reference", "auto_evaluation_result", "auto_evaluation_cot",
            "A_model_in_cot", "B_model_in_cot",
        ]
        assert "human-verified reference" not in (record["A_model"], record["B_model"])
        assert record["engine"] == run.engine and record["evaluated_with_reference"] is False
        assert record["A_model_in_cot"] == [record["A_model"], record["B_model"]]
        assert record["B_model_in_cot"] == [record["B_model"], record["A_model"]]
        # "Response A is better" in both orderings: each ordering's first-shown model wins.
        assert record["auto_evaluation_result"] == [record["A_model"], record["B_model"]]
        assert all("Overall, Response A is better." in cot for cot in record["auto_evaluation_cot"])


def test_parquet_holds_the_same_rows_as_the_csv(judged_tournament_with_criteria, tmp_path):
    tournament, _ = judged_tournament_with_criteria
    for table in (formats.HUMAN_PREFERENCES, formats.HUMAN_PREFERENCES_WIDE):
        csv_path, parquet_path = tmp_path / f"{table.name}.csv", tmp_path / f"{table.name}.parquet"
        with open(csv_path, "w", newline="", encoding="utf-8") as handle:
            exports.write_table(table, streams.human_preference_rows(
                tournaments=[tournament], wide=table is formats.HUMAN_PREFERENCES_WIDE),
                csv_file=handle, parquet_file=parquet_path, chunk_rows=3)
        from_csv = pd.read_csv(csv_path, keep_default_na=False)
        from_parquet = pd.read_parquet(parquet_path)
        assert list(from_parquet.columns) == table.header
        assert len(from_parquet) == len(from_csv) > 3
        assert from_parquet["model_selection.A"].tolist() == from_csv["model_selection.A"].tolist()
        assert from_parquet["A"].tolist() == from_csv["A"].tolist()
        assert from_parquet["image_url"].tolist() == from_csv["image_url"].tolist()


def test_sheet_parquet_matches_the_csv_read_by_pandas(tmp_path):
    import_visit_bench(path_or_file=DATA / "visit_bench_multi_images.csv")
    table, rows = streams.sheet_export(layouts.MULTI_IMAGE)
    rows = [row for _, row in rows]
    with open(tmp_path / "s.csv", "w", newline="", encoding="utf-8") as handle:
        exports.write_table(table, rows, csv_file=handle, parquet_file=tmp_path / "s.parquet",
                            chunk_rows=7)

    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "s.parquet"),
        pd.read_csv(tmp_path / "s.csv", keep_default_na=False),
        check_dtype=False,
    )


# --- spreadsheets ------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_formula_cells_are_neutralised_for_spreadsheets(cell):
    assert exports.neutralise_formula(cell) == "'" + cell


def test_plain_cells_are_left_alone_for_spreadsheets():
    assert exports.neutralise_formula("A red bicycle = fun") == "A red bicycle = fun"


def test_spreadsheet_variant_neutralises_while_the_exact_csv_keeps_the_text():
    instance = verified_instance(instruction="=cmd|' /C calc'!A0")
    instance.references.create(text="@SUM(1)", model="gpt-4", verdict="correct",
                               caption=instance.current_caption)
    exact, sheet = io.StringIO(newline=""), io.StringIO(newline="")
    table, rows = streams.sheet_export(layouts.SINGLE_IMAGE)
    exports.write_table(table, (row for _, row in rows), csv_file=exact, spreadsheet_file=sheet)

    exact_row = dict(zip(*_cells(exact.getvalue()), strict=True))
    sheet_row = dict(zip(*_cells(sheet.getvalue()), strict=True))
    assert exact_row["instruction"] == "=cmd|' /C calc'!A0"
    assert sheet_row["instruction"] == "'=cmd|' /C calc'!A0"
    assert sheet_row["gpt4_prediction"] == "'@SUM(1)"
    assert sheet_row["instruction_category"] == exact_row["instruction_category"]


@pytest.mark.parametrize("ends_with_newline", [True, False])
def test_csv_writer_quotes_each_cell_as_the_csv_module_does_when_cells_repeat(ends_with_newline):
    # Cells from an alphabet of everything that matters to CSV quoting, rows sharing cell objects
    # the way a battle's judgements share its texts: each record must equal the csv module's. More
    # records than the writer holds before writing, so some are written in every block.
    alphabet = ['"', ",", "\r", "\n", "\r\n", " ", "'", "=", "\t", "\x00", "\u2028", "\x0b", "é", "a", ""]
    chance = random.Random(7)
    shared = ["".join(chance.choice(alphabet) for _ in range(chance.randint(0, 6))) for _ in range(5)]
    rows = []
    for _ in range(2 * exports.CsvWriter.RECORDS_PER_WRITE + 7):
        fresh = "".join(chance.choice(alphabet) for _ in range(chance.randint(0, 6)))
        rows.append([chance.choice(shared), fresh, chance.choice(shared), chance.choice(["True", "False"])])
    buffer = io.StringIO()
    writer = exports.CsvWriter(buffer, line_terminator="\n", ends_with_newline=ends_with_newline)
    for row in rows:
        writer.writerow(row)
    writer.flush()
    records = "\n".join(exports.csv_line(row) for row in rows)
    assert buffer.getvalue() == (records + "\n" if ends_with_newline else records)
