import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.collection.progress import table2
from annotation.datasets.imports import import_visit_bench
from annotation.exceptions import AnnotationError
from annotation.models import (
    Caption,
    ImageAsset,
    Instance,
    InstructionFamily,
    Reference,
)
from tests.factories import FamilyFactory, ImageAssetFactory
from tests.published_data import ANNOTATED, MULTI

pytestmark = pytest.mark.django_db



def published_rows(path=MULTI):
    with open(path, newline="", encoding="utf-8") as sheet:
        reader = csv.DictReader(sheet)
        return reader.fieldnames, list(reader)


def write_sheet(path, fieldnames, rows):
    with open(path, "w", newline="", encoding="utf-8") as sheet:
        writer = csv.DictWriter(sheet, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(rows)
    return path


def multi_sheet_with(tmp_path, change, count=5):
    """The first `count` published rows, with `change(rows)` applied, as a new sheet."""
    fieldnames, rows = published_rows()
    rows = rows[:count]
    fieldnames = change(fieldnames, rows) or fieldnames
    return write_sheet(tmp_path / "sheet.csv", fieldnames, rows)


def assert_nothing_imported():
    assert Instance.objects.count() == 0
    assert InstructionFamily.objects.count() == 0
    assert ImageAsset.objects.count() == 0
    assert Reference.objects.count() == 0


def test_multi_image_sheet_imports_100_instances_in_10_families():
    result = import_visit_bench(path_or_file=MULTI)
    assert (result.created, result.skipped, len(result.families)) == (100, 0, 10)
    assert Instance.objects.count() == 100
    assert InstructionFamily.objects.count() == 10
    family = InstructionFamily.objects.get(name="rcc")
    assert family.source == InstructionFamily.Source.REFORMATTED
    assert family.source_dataset == "VisIT-Bench"
    assert family.is_multi_image


def test_multi_image_sheet_gives_the_papers_multi_column():
    import_visit_bench(path_or_file=MULTI)
    multi = table2().multi
    assert multi.references == 100
    assert (multi.correct_pct, multi.problem_in_caption_pct, multi.problem_in_response_pct) == (
        63.0, 6.0, 30.0,
    )
    assert multi.yield_pct == 63.0


def test_imported_instance_has_one_caption_per_image_and_its_rated_reference():
    import_visit_bench(path_or_file=MULTI)
    instance = Instance.objects.get(
        instruction__startswith="In this task you will be provided with two individual images",
        instanceimage__image__url__endswith="450_rcc_clevr_default_006594.png",
    )
    links = list(instance.instanceimage_set.select_related("image"))
    assert [link.image.url.rsplit("/", 1)[1] for link in links] == [
        "450_rcc_clevr_default_006594.png", "451_rcc_clevr_semantic_006594.png",
    ]
    assert links[0].blip2_caption == "a 3d model of a blue cube, a purple cube and a blue egg"
    assert len(instance.current_caption.texts) == 2
    assert "matte brownish-yellow cylinder" in instance.current_caption.texts[1]
    assert instance.reference_output == "the tiny cylinder changed to brown"
    assert instance.imported_from == "visit_bench_multi_images.csv"
    assert instance.status == Instance.Status.VERIFIED
    reference = instance.references.get()
    assert (reference.source, reference.model, reference.verdict) == (
        Reference.Source.IMPORTED, "gpt-4", Reference.Verdict.CORRECT,
    )
    assert reference.caption == instance.current_caption


def test_fully_annotated_example_imports_10_verified_single_image_instances():
    result = import_visit_bench(path_or_file=ANNOTATED)
    assert result.created == 10
    instances = Instance.objects.all()
    assert instances.count() == 10
    assert {instance.status for instance in instances} == {Instance.Status.VERIFIED}
    assert all(instance.instanceimage_set.count() == 1 for instance in instances)
    assert not InstructionFamily.objects.filter(is_multi_image=True).exists()
    instance = Instance.objects.get(family__name="Animals")
    reference = instance.references.get()
    assert reference.verdict == Reference.Verdict.CORRECT
    assert reference.text == instance.reference_output
    assert reference.text.startswith("Given the presence of a Border Collie")


def test_reimporting_a_sheet_skips_every_row():
    import_visit_bench(path_or_file=MULTI)
    again = import_visit_bench(path_or_file=MULTI)
    assert (again.created, again.skipped) == (0, 100)
    assert Instance.objects.count() == 100
    assert Caption.objects.count() == 100


def test_import_reuses_an_image_already_stored_for_the_same_url():
    url = ("https://visit-instruction-tuning.s3.amazonaws.com/visit_images/"
           "450_rcc_clevr_default_006594.png")
    image = ImageAssetFactory(url=url)
    import_visit_bench(path_or_file=MULTI)
    assert ImageAsset.objects.filter(url=url).get() == image
    assert image.instances.count() == 1


def test_import_never_starts_reference_generation(settings, django_capture_on_commit_callbacks):
    settings.OPENAI_REFERENCE_MODEL = "gpt-4"
    with django_capture_on_commit_callbacks() as callbacks:
        import_visit_bench(path_or_file=ANNOTATED)
    assert callbacks == []
    assert not Instance.objects.exclude(status=Instance.Status.VERIFIED).exists()


def test_uploaded_file_is_imported_under_its_name():
    upload = SimpleUploadedFile("visit_fully_annotated_example.csv", ANNOTATED.read_bytes())
    result = import_visit_bench(path_or_file=upload)
    assert result.created == 10
    assert set(Instance.objects.values_list("imported_from", flat=True)) == {
        "visit_fully_annotated_example.csv"
    }


SINGLE_IMAGE_COLUMNS = ["instruction_category", "image", "instruction", "gpt4_prediction",
                        "image_dense_caption", "image_blip2_caption", "reference_output",
                        "human_ratings_gpt4_correct", "human_ratings_problem_in_caption",
                        "human_ratings_problem_in_gpt4", "public_images_metadata"]


def single_image_sheet(**overrides):
    sheet = io.StringIO()
    writer = csv.DictWriter(sheet, fieldnames=SINGLE_IMAGE_COLUMNS)
    writer.writeheader()
    writer.writerow({
        "instruction_category": "Counting", "image": "https://images.example.org/sheep.jpg",
        "instruction": "How many sheep are in the field?", "gpt4_prediction": "There are three.",
        "image_dense_caption": "Three white sheep graze in a green field by a fence.",
        "image_blip2_caption": "sheep in a field", "reference_output": "Three sheep.",
        "human_ratings_gpt4_correct": "False", "human_ratings_problem_in_caption": "True",
        "human_ratings_problem_in_gpt4": "False", "public_images_metadata": '{"license": "CC0"}',
        **overrides,
    })
    return io.BytesIO(sheet.getvalue().encode())


def test_single_image_sheet_is_imported():
    import_visit_bench(path_or_file=single_image_sheet())
    instance = Instance.objects.get()
    assert not instance.family.is_multi_image
    assert instance.public_images_metadata == {"license": "CC0"}
    assert instance.instanceimage_set.get().blip2_caption == "sheep in a field"
    assert instance.references.get().problem_in_caption


def test_row_with_a_wrong_candidate_but_a_published_reference_stays_in_the_benchmark():
    import_visit_bench(path_or_file=single_image_sheet())
    instance = Instance.objects.get()
    assert instance.status == Instance.Status.VERIFIED
    assert instance.references.get().verdict == "incorrect"


def test_row_with_a_wrong_candidate_and_no_reference_is_discarded():
    import_visit_bench(path_or_file=single_image_sheet(reference_output=""))
    assert Instance.objects.get().status == Instance.Status.DISCARDED


def test_capitalised_and_numeric_booleans_are_accepted(tmp_path):
    def capitalise(fieldnames, rows):
        rows[0]["human_ratings_gpt4_correct"] = "TRUE"
        rows[0]["human_ratings_problem_in_caption"] = "FALSE"
        rows[1]["human_ratings_gpt4_correct"] = "false"
        rows[1]["human_ratings_problem_in_gpt4"] = "1"
        rows[1]["is_multiple_images"] = "TRUE"

    import_visit_bench(path_or_file=multi_sheet_with(tmp_path, capitalise))
    verdicts = list(Reference.objects.order_by("id").values_list("verdict", "problem_in_response"))
    assert verdicts[:2] == [(Reference.Verdict.CORRECT, False), (Reference.Verdict.INCORRECT, True)]


def test_bad_json_in_images_names_row_and_column_and_imports_nothing(tmp_path):
    def break_images(fieldnames, rows):
        rows[5]["images"] = '["https://images.example.org/a.png", '

    with pytest.raises(AnnotationError, match='row 7, column "images": not valid JSON'):
        import_visit_bench(path_or_file=multi_sheet_with(tmp_path, break_images, count=10))
    assert_nothing_imported()


def test_images_that_are_not_urls_are_refused(tmp_path):
    def not_urls(fieldnames, rows):
        rows[0]["images"] = json.dumps(["a.png", "b.png"])

    with pytest.raises(AnnotationError, match='row 2, column "images": not a JSON list of URLs'):
        import_visit_bench(path_or_file=multi_sheet_with(tmp_path, not_urls))
    assert_nothing_imported()


def test_non_boolean_rating_names_row_and_column_and_imports_nothing(tmp_path):
    def unsure(fieldnames, rows):
        rows[2]["human_ratings_gpt4_correct"] = "maybe"

    with pytest.raises(AnnotationError) as error:
        import_visit_bench(path_or_file=multi_sheet_with(tmp_path, unsure))
    expected = "row 4, column \"human_ratings_gpt4_correct\": 'maybe' is not a boolean"
    assert expected in str(error.value)
    assert_nothing_imported()


def test_missing_column_is_named_and_nothing_is_imported(tmp_path):
    def drop_rating(fieldnames, rows):
        for row in rows:
            del row["human_ratings_problem_in_gpt4"]
        return [name for name in fieldnames if name != "human_ratings_problem_in_gpt4"]

    with pytest.raises(AnnotationError, match="missing column.*human_ratings_problem_in_gpt4"):
        import_visit_bench(path_or_file=multi_sheet_with(tmp_path, drop_rating))
    assert_nothing_imported()


def test_caption_count_must_match_image_count(tmp_path):
    def one_caption_short(fieldnames, rows):
        captions = json.loads(rows[3]["images_dense_captions"])
        rows[3]["images_dense_captions"] = json.dumps(captions[:1])

    with pytest.raises(AnnotationError,
                       match=r'row 5, column "images_dense_captions": 1 caption\(s\) for 2 image'):
        import_visit_bench(path_or_file=multi_sheet_with(tmp_path, one_caption_short))
    assert_nothing_imported()


def test_errors_of_several_rows_are_reported_together(tmp_path):
    def break_two_rows(fieldnames, rows):
        rows[0]["images"] = "not json"
        rows[4]["human_ratings_problem_in_caption"] = "yes"

    with pytest.raises(AnnotationError) as error:
        import_visit_bench(path_or_file=multi_sheet_with(tmp_path, break_two_rows))
    message = str(error.value)
    assert "2 problem(s) found" in message
    assert 'row 2, column "images"' in message
    assert 'row 6, column "human_ratings_problem_in_caption"' in message
    assert_nothing_imported()


def test_reported_errors_are_capped(tmp_path):
    def break_every_row(fieldnames, rows):
        for row in rows:
            row["human_ratings_gpt4_correct"] = "?"

    with pytest.raises(AnnotationError) as error:
        import_visit_bench(path_or_file=multi_sheet_with(tmp_path, break_every_row, count=30))
    message = str(error.value)
    assert "30 problem(s) found" in message
    assert message.count("is not a boolean") == 20
    assert "… and 10 more." in message


def test_row_of_a_multiline_record_also_names_its_line(tmp_path):
    fieldnames, rows = published_rows()
    first_multiline = next(n for n, row in enumerate(rows) if "\n" in "".join(row.values()))
    rows[first_multiline + 1]["images"] = "[]"
    path = write_sheet(tmp_path / "sheet.csv", fieldnames, rows[: first_multiline + 2])
    lines_before = sum(
        "".join(row.values()).count("\n") for row in rows[: first_multiline + 1]
    )
    row_number = first_multiline + 3
    with pytest.raises(AnnotationError) as error:
        import_visit_bench(path_or_file=path)
    expected = f'row {row_number} (line {row_number + lines_before}), column "images"'
    assert expected in str(error.value)


def test_family_existing_as_single_image_refuses_multi_image_rows(tmp_path):
    FamilyFactory(name="rcc", is_multi_image=False)
    with pytest.raises(AnnotationError, match="“rcc” already exists as a single-image family"):
        import_visit_bench(path_or_file=multi_sheet_with(tmp_path, lambda *_: None))
    assert not Instance.objects.exists()


def test_import_command_prints_created_and_skipped():
    out = io.StringIO()
    call_command("import_visitbench", str(MULTI), str(MULTI), stdout=out)
    lines = out.getvalue().splitlines()
    assert "100 instance(s) imported, 0 already there and skipped" in lines[0]
    assert "0 instance(s) imported, 100 already there and skipped" in lines[1]


def test_import_command_reports_row_and_column_and_imports_no_sheet(tmp_path):
    def unsure(fieldnames, rows):
        rows[0]["human_ratings_gpt4_correct"] = "maybe"

    broken = multi_sheet_with(tmp_path, unsure)
    with pytest.raises(CommandError, match='row 2, column "human_ratings_gpt4_correct"'):
        call_command("import_visitbench", str(ANNOTATED), str(broken), stdout=io.StringIO())
    assert_nothing_imported()
