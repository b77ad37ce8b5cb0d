"""Hostile cells in imported sheets and predictions files (issue 10.4): every one is answered with
the row and the column at fault, in the admin (no 5xx) and in manage.py (no traceback), and
nothing is stored."""

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation.models import Instance, ModelResponse
from tests.published_data import MULTI, SINGLE
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db

DEEP_50K = "[" * 50_000 + "]" * 50_000
URL = "https://visit-instruction-tuning.s3.amazonaws.com/visit_images/x.png"

# (column, cell, what the error says): the JSON cells of the multi-image sheet.
HOSTILE_JSON_CELLS = [
    ("images", "NaN", "not a JSON list of URLs"),
    ("images", f'[NaN, "{URL}"]', "not a JSON list of URLs"),
    ("images", f'["{URL}", Infinity]', "Infinity is not a JSON value"),
    ("images", DEEP_50K, "nests deeper than 32 levels"),
    ("images", f'["{URL}\\u0000"]', "NUL"),
    ("images_dense_captions", '["a", -Infinity]', "-Infinity is not a JSON value"),
    ("images_dense_captions", '[NaN, "b"]', "caption 1 is NaN, between captions"),
    ("images_dense_captions", DEEP_50K, "nests deeper than 32 levels"),
    ("images_dense_captions", '["a\\u0000", "b"]', "NUL"),
    ("images_dense_captions", '["\\ud800", "b"]', "lone surrogate"),
    ("images_blip2_captions", '{"a": Infinity}', "Infinity is not a JSON value"),
    ("images_blip2_captions", DEEP_50K, "nests deeper than 32 levels"),
    ("public_images_metadata", "NaN", "not a JSON object"),
    ("public_images_metadata", '{"a": Infinity}', "Infinity is not a JSON value"),
    ("public_images_metadata", '{"a": 1e400}', "too large for a float"),
    ("public_images_metadata", '{"a": "\\u0000"}', "NUL"),
    ("public_images_metadata", '{"\\u0000": 1}', "NUL"),
    ("public_images_metadata", '{"a":' * 20_000 + "1" + "}" * 20_000, "nests deeper than 32"),
    ("public_images_metadata", "{" + "1" * 5000 + "}", "not valid JSON"),
    ("instruction", "What is this?\x00", "NUL"),
    ("instruction_category", "Art\x1b[31m knowledge", "invisible control character (U+001B)"),
    ("instruction", "What is this?\x07", "invisible control character (U+0007)"),
    # Stray escaped quotes: one linear scan, not one scan per quote.
    ("public_images_metadata", '"' + '\\"' * 60_000, "not valid JSON"),
]


def _hostile_sheet(column, cell, *, source=MULTI, row=3):
    with open(source, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    rows = rows[:5]
    rows[row - 1][rows[0].index(column)] = cell
    buffer = io.StringIO(newline="")
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")


@pytest.mark.parametrize(("column", "cell", "says"), HOSTILE_JSON_CELLS,
                         ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(HOSTILE_JSON_CELLS)])
def test_hostile_cell_is_named_by_row_and_column_in_manage_py(tmp_path, column, cell, says):
    path = tmp_path / "hostile.csv"
    path.write_bytes(_hostile_sheet(column, cell))

    with pytest.raises(CommandError) as error:
        call_command("import_visitbench", str(path), stdout=io.StringIO())

    assert f'row 3, column "{column}": ' in str(error.value)
    assert says in str(error.value)
    assert not Instance.objects.exists()


@pytest.mark.parametrize(("column", "cell", "says"), HOSTILE_JSON_CELLS,
                         ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(HOSTILE_JSON_CELLS)])
def test_hostile_cell_is_named_by_row_and_column_in_the_admin(admin_client, column, cell, says):
    upload = SimpleUploadedFile("hostile.csv", _hostile_sheet(column, cell), "text/csv")

    response = admin_client.post(reverse("admin:annotation_instructionfamily_import"),
                                 {"sheet": upload})

    assert response.status_code == 200
    assert f"row 3, column &quot;{column}&quot;" in response.content.decode()
    assert not Instance.objects.exists()


def test_nan_in_the_single_image_sheets_metadata_cell_is_named(tmp_path):
    path = tmp_path / "single.csv"
    path.write_bytes(_hostile_sheet("public_images_metadata", "NaN", source=SINGLE, row=4))
    with pytest.raises(CommandError, match='row 4, column "public_images_metadata": not a JSON object'):
        call_command("import_visitbench", str(path), stdout=io.StringIO())


def test_a_nul_byte_in_the_header_is_named(tmp_path):
    path = tmp_path / "nul.csv"
    path.write_bytes(MULTI.read_bytes().replace(b"instruction,", b"instruc\x00tion,", 1))
    with pytest.raises(CommandError, match="row 1 \\(header\\), column 4: the column name holds a NUL"):
        call_command("import_visitbench", str(path), stdout=io.StringIO())


def test_a_cell_over_the_csv_field_limit_is_named_in_a_sheet(tmp_path):
    path = tmp_path / "long.csv"
    path.write_bytes(_hostile_sheet("gpt4_prediction", "x" * 200_000))
    with pytest.raises(CommandError, match='row 3, column "gpt4_prediction": is 200000 characters long'):
        call_command("import_visitbench", str(path), stdout=io.StringIO())


# --- predictions.csv ---------------------------------------------------------------------------


def _predictions(header, row):
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerows([header, row])
    return buffer.getvalue().encode("utf-8")


def _hostile_predictions(instance):
    url = instance.ordered_images()[0].url
    good = [instance.instruction, instance.family.name, url]
    header = ["instruction", "instruction_category", "image"]
    return {
        "header over 200 characters": (
            _predictions([*header, "M" * 250 + " prediction"], [*good, "a"]),
            "row 1 (header), column 4: the column name is 261 characters long"),
        "cell over the csv field limit": (
            _predictions([*header, "m prediction"], [*good, "x" * 140_000]),
            'row 2, column "m prediction": is 140000 characters long'),
        "NUL byte": (
            _predictions([*header, "m prediction"], [*good, "a\x00b"]),
            'row 2, column "m prediction": holds a NUL character'),
        "40,000-deep image list": (
            _predictions([*header, "m prediction"], [*good[:2], "[" * 40_000 + "]" * 40_000, "a"]),
            'row 2, column "image": nests deeper than 32 levels'),
        "lone surrogate in an image list": (
            _predictions([*header, "m prediction"], [*good[:2], '["\\udc00"]', "a"]),
            'row 2, column "image": holds a lone surrogate'),
        "Python expression in an image list": (
            _predictions([*header, "m prediction"], [*good[:2], "[__import__('os').getcwd()]", "a"]),
            'row 2, column "image": not valid JSON'),
        "instance id beyond any integer": (
            _predictions(["instance_id", "m prediction"], ["9" * 40, "a"]),
            'row 2, column "instance_id": ' + repr("9" * 40) + " is not an instance id"),
    }


CASES = ["header over 200 characters", "cell over the csv field limit", "NUL byte",
         "40,000-deep image list", "lone surrogate in an image list",
         "Python expression in an image list",
         "instance id beyond any integer"]


@pytest.mark.parametrize("case", CASES)
def test_hostile_predictions_are_named_by_row_and_column_in_manage_py(tmp_path, case):
    data, says = _hostile_predictions(verified_instance())[case]
    path = tmp_path / "predictions.csv"
    path.write_bytes(data)

    with pytest.raises(CommandError) as error:
        call_command("import_predictions", str(path), stdout=io.StringIO())

    assert says in str(error.value)
    assert not ModelResponse.objects.exists()


@pytest.mark.parametrize("case", CASES)
def test_hostile_predictions_are_named_by_row_and_column_in_the_admin(admin_client, case):
    data, says = _hostile_predictions(verified_instance())[case]

    response = admin_client.post(reverse("admin:annotation_modelresponse_import"),
                                 {"predictions": SimpleUploadedFile("p.csv", data, "text/csv")})

    assert response.status_code == 200
    assert says.replace('"', "&quot;").replace("'", "&#x27;") in response.content.decode()
    assert not ModelResponse.objects.exists()
