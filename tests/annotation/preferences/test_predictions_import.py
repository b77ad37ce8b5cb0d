"""predictions.csv matched to the team's own instances (crowd-uploaded images included), per-row
reports of empty and duplicated predictions, importing the good rows, and the real file."""

import csv
import io

import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count
from django.urls import reverse
from PIL import Image

from annotation.collection.uploads import store_uploaded_image
from annotation.datasets import exports, layouts, streams
from annotation.datasets.imports import import_visit_bench
from annotation.exceptions import AnnotationError
from annotation.models import ImportedRow, InstanceImage, ModelResponse
from annotation.preferences.predictions import PredictionsProblems, import_predictions
from tests.factories import WorkerFactory
from tests.published_data import PREDICTIONS, SINGLE
from tests.scoring_factories import verified_instance, with_responses

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.PUBLIC_BASE_URL = "https://bench.example.org"
    return tmp_path


def uploaded_instance(instruction, colour):
    """A verified instance whose image a worker uploaded (no image URL is stored for it)."""
    buffer = io.BytesIO()
    Image.new("RGB", (32, 24), colour).save(buffer, format="PNG")
    image = store_uploaded_image(upload=SimpleUploadedFile("photo.png", buffer.getvalue(),
                                                           content_type="image/png"),
                                 uploaded_by=WorkerFactory(), licence="CC0 1.0")
    instance = verified_instance(instruction=instruction)
    InstanceImage.objects.filter(instance=instance).update(image=image)
    instance.references.create(text="A reference.", model="gpt-4", verdict="correct",
                               caption=instance.current_caption)
    assert not image.url
    return instance, image


def predictions_file(header, rows, name="predictions.csv"):
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerows([header, *rows])
    data = io.BytesIO(buffer.getvalue().encode("utf-8"))
    data.name = name
    return data


def test_exported_sheet_with_two_model_columns_added_imports_every_row_by_its_key():
    made = [uploaded_instance(f"What colour is the square? ({n})", (40 * n, 10, 10))[0]
            for n in range(3)]
    exported = io.StringIO(newline="")
    exports.export_sheet(kind=layouts.SINGLE_IMAGE, csv_file=exported)
    frame = pd.read_csv(io.StringIO(exported.getvalue()), keep_default_na=False)
    frame["LLaVA prediction"] = [f"LLaVA says {n}" for n in range(3)]
    frame["BLIP-2 prediction"] = [f"BLIP-2 says {n}" for n in range(3)]
    data = io.BytesIO(frame.to_csv(index=False).encode())
    data.name = "predictions.csv"

    result = import_predictions(path_or_file=data)

    assert (result.created, result.models) == (6, ("BLIP-2", "LLaVA"))
    assert ModelResponse.objects.get(instance=made[2], model_name="LLaVA").text == "LLaVA says 2"


@pytest.mark.parametrize("form", ["absolute media URL", "relative media path", "exported image_url",
                                  "storage name"])
def test_uploaded_image_is_matched_by_any_form_of_its_address(form):
    instance, image = uploaded_instance("What colour is the square?", (200, 10, 10))
    address = {
        "absolute media URL": f"http://127.0.0.1:8000{image.file.url}",
        "relative media path": image.file.url,
        "exported image_url": streams._image_url(image),
        "storage name": image.file.name,
    }[form]

    result = import_predictions(path_or_file=predictions_file(
        ["instruction", "instruction_category", "image", "M prediction"],
        [[instance.instruction, instance.family.name, address, "Red."]]))

    assert result.created == 1
    assert ModelResponse.objects.get().instance == instance


def test_unmatched_row_says_what_it_looked_for_and_which_column_to_use():
    instance, image = uploaded_instance("What colour is the square?", (200, 10, 10))
    with pytest.raises(PredictionsProblems) as error:
        import_predictions(path_or_file=predictions_file(
            ["instruction", "image", "M prediction"],
            [["What colour is the circle?", image.file.url, "Red."]]))
    message = str(error.value)
    assert "row 2: no instance has the instruction 'What colour is the circle?'" in message
    assert f"(read as the uploaded file {image.file.name})" in message
    assert "Give the “instance_id” column of a sheet exported from this platform" in message


def test_instance_id_with_another_instruction_is_refused():
    instance = verified_instance()
    with pytest.raises(PredictionsProblems, match='row 2, column "instruction": instance #'):
        import_predictions(path_or_file=predictions_file(
            ["instance_id", "instruction", "M prediction"],
            [[instance.pk, "Something else?", "Red."]]))


def test_empty_prediction_is_reported_and_the_good_ones_can_be_imported_alone():
    first, second = verified_instance(), verified_instance()
    rows = [[first.pk, "Fine."], [second.pk, "  "]]
    with pytest.raises(PredictionsProblems) as error:
        import_predictions(path_or_file=predictions_file(["instance_id", "M prediction"], rows))
    assert error.value.good == 1
    assert 'row 3, column "M prediction": is empty' in str(error.value)
    assert not ModelResponse.objects.exists()

    result = import_predictions(path_or_file=predictions_file(["instance_id", "M prediction"], rows),
                                only_good=True)

    assert result.created == 1 and len(result.left_out) == 1
    assert ModelResponse.objects.get().instance == first


def test_identical_repeated_prediction_is_skipped_and_reported():
    instance = verified_instance()
    result = import_predictions(path_or_file=predictions_file(
        ["instance_id", "M prediction"], [[instance.pk, "Red."], [instance.pk, "Red."]]))
    assert result.created == 1
    assert "Row 3 repeats row 2's M prediction" in result.summary()


# --- the real predictions file -----------------------------------------------------------------


@pytest.mark.integration
def test_real_predictions_file_reports_its_duplicated_question_and_imports_the_good_rows():
    import_visit_bench(path_or_file=SINGLE)
    instance = ImportedRow.objects.get(number=154).instance

    with pytest.raises(PredictionsProblems) as error:
        import_predictions(path_or_file=PREDICTIONS)
    assert error.value.good == 577
    assert (f'row 390 (line 808), column "LlamaAdapter-v2 prediction": a second LlamaAdapter-v2 prediction '
            f"for instance #{instance.pk}, different from row 154's") in str(error.value)

    result = import_predictions(path_or_file=PREDICTIONS, only_good=True)

    assert result.created == 577
    assert ModelResponse.objects.filter(model_name="LlamaAdapter-v2").count() == 577
    with open(PREDICTIONS, newline="", encoding="utf-8") as handle:
        row_154 = list(csv.DictReader(handle))[152]
    assert ModelResponse.objects.get(instance=instance).text == row_154[
        "LlamaAdapter-v2 prediction"].strip()


@pytest.mark.integration
def test_manage_py_imports_the_real_predictions_file_with_only_good_rows():
    import_visit_bench(path_or_file=SINGLE)
    with pytest.raises(CommandError, match="Run again with --only-good-rows"):
        call_command("import_predictions", str(PREDICTIONS), stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_predictions", str(PREDICTIONS), "--only-good-rows", stdout=out)
    assert "577 prediction(s) imported" in out.getvalue()
    assert "left out: row 390" in out.getvalue()


@pytest.mark.integration
def test_admin_shows_the_report_and_imports_the_good_rows_on_request(admin_client):
    import_visit_bench(path_or_file=SINGLE)
    url = reverse("admin:annotation_modelresponse_import")
    upload = SimpleUploadedFile(PREDICTIONS.name, PREDICTIONS.read_bytes(), "text/csv")

    report = admin_client.post(url, {"predictions": upload})

    page = report.content.decode()
    assert report.status_code == 200
    assert "row 390 (line 808), column &quot;LlamaAdapter-v2 prediction&quot;" in page
    assert 'value="Import the 577 good predictions"' in page
    assert not ModelResponse.objects.exists()

    done = admin_client.post(url, {"only_good": "Import the 577 good predictions"}, follow=True)

    assert "577 prediction(s) imported" in done.content.decode()
    assert ModelResponse.objects.count() == 577


# --- a model named on import -------------------------------------------------------------------


@pytest.mark.integration
def test_manage_py_imports_one_real_file_twice_under_two_model_names_side_by_side():
    # The authors' minigpt-4.csv and minigpt-4_13b.csv both call their column "MiniGPT-4
    # prediction"; the one real predictions file here stands for both (the MiniGPT-4 files are not
    # among the published data on this machine).
    import_visit_bench(path_or_file=SINGLE)
    call_command("import_predictions", str(PREDICTIONS), "--only-good-rows", stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_predictions", str(PREDICTIONS), "--only-good-rows", "--model", "LlamaAdapter-v2 13B",
                 stdout=out)

    assert "577 prediction(s) imported, 0 already there, from 1 model(s): LlamaAdapter-v2 13B." in out.getvalue()
    counts = dict(ModelResponse.objects.values_list("model_name").annotate(n=Count("pk")))
    assert counts == {"LlamaAdapter-v2": 577, "LlamaAdapter-v2 13B": 577}


def test_a_model_name_for_a_file_of_two_prediction_columns_is_refused_naming_them():
    instance = verified_instance()
    data = predictions_file(["instance_id", "LLaVA prediction", "BLIP-2 prediction"],
                            [[instance.pk, "a", "b"]])
    with pytest.raises(AnnotationError, match="“LLaVA prediction”, “BLIP-2 prediction”"):
        import_predictions(path_or_file=data, model_name="llava-13b")
    assert not ModelResponse.objects.exists()


def test_the_admin_import_names_the_model_of_a_one_column_file(admin_client):
    instance = verified_instance()
    with_responses(instance, "MiniGPT-4")
    data = predictions_file(["instance_id", "MiniGPT-4 prediction"], [[instance.pk, "A 13B answer."]],
                            name="minigpt-4_13b.csv")
    upload = SimpleUploadedFile("minigpt-4_13b.csv", data.getvalue(), "text/csv")

    done = admin_client.post(reverse("admin:annotation_modelresponse_import"),
                             {"predictions": upload, "model_name": "MiniGPT-4 13B"}, follow=True)

    assert "1 prediction(s) imported" in done.content.decode()
    assert ModelResponse.objects.get(instance=instance, model_name="MiniGPT-4 13B").text == "A 13B answer."
    assert ModelResponse.objects.filter(instance=instance).count() == 2
