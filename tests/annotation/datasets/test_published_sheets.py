"""The real files the VisIT-Bench authors published: they import as published, give the paper's
Table 2, and come back byte for byte through a snapshot, each in its own layout."""

import csv
import io
import re

import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.collection.progress import table2
from annotation.datasets import snapshots
from annotation.datasets.imports import import_visit_bench
from annotation.exceptions import AnnotationError
from annotation.models import ImportedRow, Instance, InstructionFamily, Reference
from annotation.models.benchmark import benchmark_instances
from tests.published_data import ANNOTATED, MULTI, SHEETS, SINGLE, benchmark_part

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

SNAPSHOT_FILE = {MULTI: "visit_bench_multi_images.csv", SINGLE: "visit_bench_single_image.csv",
                 ANNOTATED: "visit_fully_annotated.csv"}


def _built_snapshot():
    snapshot = snapshots.request_snapshot(background=False)
    return snapshots.build_snapshot(snapshot=snapshot)


def _stored(snapshot, name):
    with snapshots.snapshot_storage().open(f"v{snapshot.version}/{name}", "rb") as handle:
        return handle.read()


def _rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        return next(reader), list(reader)


def _sheet(tmp_path, header, rows, *, name="sheet.csv", terminator="\n"):
    buffer = io.StringIO(newline="")
    csv.writer(buffer, lineterminator=terminator).writerows([header, *rows])
    path = tmp_path / name
    path.write_bytes(buffer.getvalue().encode())
    return path


# --- the single-image sheet as published -------------------------------------------------------


def test_real_single_image_sheet_imports_as_published_with_its_repeated_row_reported():
    result = import_visit_bench(path_or_file=SINGLE)

    assert (result.created, result.skipped) == (577, 0)
    assert result.repeats == ((390, 154),)
    assert result.unused_columns == ("visual",)
    assert "row 390 repeats row 154" in result.summary()
    assert Instance.objects.count() == 577
    assert not InstructionFamily.objects.filter(is_multi_image=True).exists()
    # The repeat is remembered as a row of the sheet, pointing at the instance of row 154.
    repeat = ImportedRow.objects.get(number=390)
    assert repeat.instance == ImportedRow.objects.get(number=154).instance


def test_single_image_sheet_reads_its_one_string_captions_and_uppercase_booleans():
    import_visit_bench(path_or_file=SINGLE)
    instance = Instance.objects.get(
        instanceimage__image__url__endswith="427_tested_skill_board_games_3717552934_2fae4aaa45.png")
    assert instance.current_caption.texts[0].startswith(
        "There is a block with all the letters of the alphabet A-Z")
    reference = instance.references.get()
    assert reference.verdict == Reference.Verdict.INCORRECT  # FALSE in the sheet
    assert instance.public_images_metadata == {
        "public_domain_url": "https://live.staticflickr.com/3440/3717552934_2fae4aaa45.jpg"}


def test_bare_nan_inside_published_metadata_is_stored_as_null():
    import_visit_bench(path_or_file=SINGLE)
    with_nan = Instance.objects.get(public_images_metadata__ImageID="9e73f3878388820f")
    assert with_nan.public_images_metadata["Thumbnail300KURL"] is None


def test_table2_command_on_the_single_image_sheet_prints_the_single_column():
    call_command("import_visitbench", str(SINGLE), stdout=io.StringIO())
    out = io.StringIO()
    call_command("table2", stdout=out)
    single = table2().single
    assert single.references == 577
    assert re.search(r"GPT-4 Correct \(%\)\s+91\.5\s+91\.5\s+-", out.getvalue())
    assert re.search(r"Problem in Caption \(%\)\s+3\.8\s+3\.8\s+-", out.getvalue())
    assert re.search(r"Problem in GPT-4 \(%\)\s+3\.6\s+3\.6\s+-", out.getvalue())


# --- byte for byte, each in its own layout -----------------------------------------------------


@pytest.mark.parametrize("path", SHEETS, ids=lambda path: path.name)
def test_published_sheet_imported_alone_comes_back_byte_for_byte_through_a_snapshot(path):
    import_visit_bench(path_or_file=path)

    snapshot = _built_snapshot()

    # Byte for byte, less the rows rated incorrect without a reference: they are not in the benchmark.
    assert _stored(snapshot, SNAPSHOT_FILE[path]) == benchmark_part(path).encode()


def test_fully_annotated_layout_is_a_snapshot_file_for_every_single_image_instance():
    import_visit_bench(path_or_file=SINGLE)

    snapshot = _built_snapshot()

    frame = pd.read_csv(io.BytesIO(_stored(snapshot, "visit_fully_annotated.csv")),
                        keep_default_na=False)
    assert list(frame.columns) == ["image_url", "image_dense_caption", "instruction_category",
                                   "instruction", "output_human_annotated", "instance_id"]
    assert len(frame) == 577 - 34  # less the instances rated incorrect without a reference
    assert "visit_fully_annotated.parquet" in {entry["name"] for entry in snapshot.files}


def test_a_changed_verdict_is_written_in_the_sheets_own_spelling_and_the_rest_stays_as_published():
    import_visit_bench(path_or_file=SINGLE)
    header, *published = csv.reader(io.StringIO(benchmark_part(SINGLE), newline=""))
    # Row 73 was rated incorrect and kept for its human-written reference: it is in the benchmark.
    instance = ImportedRow.objects.get(number=73).instance
    Reference.objects.filter(instance=instance).update(verdict=Reference.Verdict.CORRECT)

    exported = _stored(_built_snapshot(), "visit_bench_single_image.csv").decode()

    rows = list(csv.reader(io.StringIO(exported, newline="")))
    changed = next(number for number, row in enumerate(rows) if row[header.index("instruction")]
                   == instance.instruction)
    assert rows[0] == header
    assert rows[changed][header.index("human_ratings_gpt4_correct")] == "TRUE"
    assert published[changed - 1][header.index("human_ratings_gpt4_correct")] == "FALSE"
    assert rows[1:changed] + rows[changed + 1:] == published[:changed - 1] + published[changed:]
    assert exported.count("\r\n") == benchmark_part(SINGLE).count("\r\n")


def test_a_sheet_mixing_imported_and_crowd_instances_is_written_in_the_published_layout_with_keys():
    from tests.scoring_factories import verified_instance

    import_visit_bench(path_or_file=ANNOTATED)
    made_here = verified_instance(instruction="What is the red object?")
    made_here.references.create(text="A bike.", model="gpt-4", verdict="correct",
                                caption=made_here.current_caption)

    frame = pd.read_csv(io.BytesIO(_stored(_built_snapshot(), "visit_fully_annotated.csv")),
                        keep_default_na=False)

    assert len(frame) == 11
    assert frame["instance_id"].tolist() == sorted(Instance.objects.values_list("pk", flat=True))


# --- classes of difference between releases ----------------------------------------------------


def test_column_name_variants_crlf_and_extra_columns_are_read(tmp_path):
    header, rows = _rows(SINGLE)
    renamed = [{"image_dense_captions": "Image Dense Caption", "instruction_category":
                "Instruction Category", "human_ratings_gpt4_correct": "HUMAN_RATINGS_GPT4_CORRECT"}
               .get(name, name) for name in header] + ["notes"]
    path = _sheet(tmp_path, renamed, [row + ["kept"] for row in rows[:5]], terminator="\r\n")

    result = import_visit_bench(path_or_file=path)

    assert result.created == 5 and result.unused_columns == ("visual", "notes")
    assert ImportedRow.objects.get(number=2).cells[-1] == "kept"


def test_nan_padding_in_a_list_of_images_is_read_as_no_image(tmp_path):
    header, rows = _rows(MULTI)
    images = header.index("images")
    rows[0][images] = rows[0][images][:-1] + ", NaN, NaN]"
    path = _sheet(tmp_path, header, rows[:2])

    import_visit_bench(path_or_file=path)

    assert Instance.objects.order_by("id").first().instanceimage_set.count() == 2


# --- repeated keys -----------------------------------------------------------------------------


def test_row_with_an_earlier_rows_key_and_other_content_names_both_rows(tmp_path):
    header, rows = _rows(MULTI)
    changed = list(rows[0])
    changed[header.index("gpt4_prediction")] = "Something else entirely."
    path = _sheet(tmp_path, header, [rows[0], rows[1], changed])

    with pytest.raises(AnnotationError) as error:
        import_visit_bench(path_or_file=path)

    message = str(error.value)
    assert "row 4: same “instruction_category”, “instruction”, “images” as row 2" in message
    assert "different “gpt4_prediction”" in message
    assert not Instance.objects.exists()


def test_row_already_imported_with_other_content_is_an_error_not_skipped(tmp_path):
    header, rows = _rows(MULTI)
    import_visit_bench(path_or_file=_sheet(tmp_path, header, rows[:3], name="first.csv"))
    rows[1][header.index("human_ratings_gpt4_correct")] = (
        "False" if rows[1][header.index("human_ratings_gpt4_correct")] == "True" else "True")

    with pytest.raises(AnnotationError) as error:
        import_visit_bench(path_or_file=_sheet(tmp_path, header, rows[:4], name="second.csv"))

    instance = ImportedRow.objects.get(number=3).instance
    assert (f"row 3: instance #{instance.pk} already has this “instruction_category”, "
            "“instruction”, “images” but a different “human_ratings_gpt4_correct”") in str(error.value)
    assert Instance.objects.count() == 3


def test_row_already_imported_with_the_same_content_is_skipped(tmp_path):
    header, rows = _rows(MULTI)
    import_visit_bench(path_or_file=_sheet(tmp_path, header, rows[:3], name="first.csv"))

    result = import_visit_bench(path_or_file=_sheet(tmp_path, header, rows[:4], name="second.csv"))

    assert (result.created, result.skipped) == (1, 3)


def test_import_command_names_the_repeated_row_of_the_single_image_sheet():
    out = io.StringIO()
    call_command("import_visitbench", str(SINGLE), stdout=out)
    assert "577 instance(s) imported" in out.getvalue()
    assert "row 390 repeats row 154" in out.getvalue()


def test_import_command_refuses_a_file_that_is_not_a_sheet(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(CommandError, match="row 1 \\(header\\): not a VisIT-Bench sheet"):
        call_command("import_visitbench", str(path), stdout=io.StringIO())


def test_a_familys_part_of_an_imported_sheet_is_written_with_the_stable_key():
    from annotation.datasets import exports, formats, layouts

    import_visit_bench(path_or_file=SINGLE)
    family = InstructionFamily.objects.get(name="Board Games")
    handle = io.StringIO(newline="")

    exports.export_sheet(kind=layouts.SINGLE_IMAGE, csv_file=handle,
                         instances=benchmark_instances().filter(family=family))

    frame = pd.read_csv(io.StringIO(handle.getvalue()), keep_default_na=False, dtype=str)
    assert list(frame.columns) == formats.SINGLE_IMAGE_SHEET.header
    assert sorted(map(int, frame["instance_id"])) == sorted(
        benchmark_instances().filter(family=family).values_list("pk", flat=True))
    assert set(frame["human_ratings_gpt4_correct"]) <= {"TRUE", "FALSE"}
