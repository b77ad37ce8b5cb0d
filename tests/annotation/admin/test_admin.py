"""The researchers' admin: launching stages, progress, imports, references by hand, Table 2."""

import io
import re

import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import ImageAsset, Instance, ModelResponse, Reference, Stage, StageConfig
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory
from tests.published_data import DATA as SHARED_DATA
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db



@pytest.fixture
def researcher(admin_client):
    return admin_client


def test_launch_action_opens_the_stage_and_its_units(researcher, django_capture_on_commit_callbacks):
    family = FamilyFactory(target_instances=3)
    with django_capture_on_commit_callbacks() as callbacks:
        response = researcher.post(
            reverse("admin:annotation_instructionfamily_changelist"),
            {"action": "launch_instruction_generation", "_selected_action": [family.pk]},
            follow=True,
        )
    assert "Instruction generation launched" in response.content.decode()
    assert StageConfig.objects.get(family=family, stage=Stage.INSTRUCTION_GENERATION).launched_at
    assert len(callbacks) == 1


def test_family_page_shows_progress_per_stage(researcher):
    family = FamilyFactory()
    StageConfig.objects.create(family=family, stage=Stage.CAPTION)
    InstanceFactory(family=family)
    response = researcher.get(reverse("admin:annotation_instructionfamily_change", args=[family.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    assert "Instruction-conditioned caption" in page and "waiting" in page


def test_admin_import_of_the_published_sheet_then_table2(researcher):
    sheet = (SHARED_DATA / "visit_bench_multi_images.csv").read_bytes()
    response = researcher.post(
        reverse("admin:annotation_instructionfamily_import"),
        {"sheet": SimpleUploadedFile("visit_bench_multi_images.csv", sheet, "text/csv")},
        follow=True,
    )
    assert "100 instance(s) imported" in response.content.decode()
    assert Instance.objects.count() == 100
    report = researcher.get(reverse("admin:annotation_instructionfamily_table2")).content.decode()
    correct_row = re.search(r"GPT-4 Correct \(%\)</th>(.*?)</tr>", report).group(1)
    assert re.findall(r">([^<]+)</td>", correct_row) == ["63.0", "-", "63.0"]


def test_admin_import_of_a_malformed_sheet_names_the_row_and_imports_nothing(researcher):
    sheet = (SHARED_DATA / "visit_bench_multi_images.csv").read_text().replace(
        '"[""https://visit-instruction-tuning', '"[oops ""https://visit-instruction-tuning', 1
    )
    response = researcher.post(
        reverse("admin:annotation_instructionfamily_import"),
        {"sheet": SimpleUploadedFile("broken.csv", sheet.encode(), "text/csv")},
    )
    assert response.status_code == 200
    assert 'column &quot;images&quot;' in response.content.decode()
    assert Instance.objects.count() == 0


def test_instances_page_says_plainly_when_no_model_is_configured(researcher, settings):
    settings.OPENAI_REFERENCE_MODEL = ""
    page = researcher.get(reverse("admin:annotation_instance_changelist")).content.decode()
    assert "No reference model is configured" in page


def test_researcher_pastes_a_reference_by_hand(researcher):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    response = researcher.post(
        reverse("admin:annotation_instance_add_reference", args=[instance.pk]),
        {"text": "The dog is herding the sheep."}, follow=True,
    )
    assert response.status_code == 200
    reference = Reference.objects.get()
    assert reference.source == Reference.Source.MANUAL and reference.created_by is not None
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_VERIFICATION


def test_worker_text_is_escaped_in_the_admin(researcher):
    InstanceFactory(instruction='<script>alert("x")</script> What is shown?')
    page = researcher.get(reverse("admin:annotation_instance_changelist")).content.decode()
    assert '<script>alert("x")</script>' not in page
    assert "&lt;script&gt;" in page


def test_refused_upload_is_a_form_error_and_stores_nothing(researcher, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    response = researcher.post(
        reverse("admin:annotation_imageasset_add"),
        {"upload": SimpleUploadedFile("photo.jpg", b"not an image at all", "image/jpeg"),
         "licence": "CC0"},
    )
    assert response.status_code == 200
    assert "not a JPEG, PNG, WebP or GIF image" in response.content.decode()
    assert ImageAsset.objects.count() == 0
    assert not any(tmp_path.rglob("*.*"))


def _verified_with_reference(family, instruction):
    instance = verified_instance(family=family, instruction=instruction)
    instance.references.create(caption=instance.current_caption, model="gpt-4",
                               text="A candidate reference.", verdict="correct")
    return instance


def test_family_sheet_downloaded_from_the_import_page_imports_back_as_predictions(researcher):
    family = FamilyFactory(name="Hot or cold")
    instances = [_verified_with_reference(family, f"Is drink {n} hot or cold? Say why.") for n in (1, 2)]
    other = _verified_with_reference(FamilyFactory(name="Another family"), "What breed is this dog?")
    page = researcher.get(reverse("admin:annotation_modelresponse_import")).content.decode()
    link = reverse("admin:annotation_instructionfamily_sheet", args=[family.pk, "single_image"])
    assert f'href="{link}"' in page and "Hot or cold: single-image sheet</a> (2 instances)" in page

    response = researcher.get(link)
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="hot-or-cold-{family.pk}-visit_bench_single_image.csv"')
    sheet = pd.read_csv(io.BytesIO(response.content), keep_default_na=False)
    assert sorted(sheet["instance_id"]) == [instance.pk for instance in instances]
    assert other.pk not in set(sheet["instance_id"])
    sheet["llava prediction"] = ["Hot.", "Cold."]
    predictions = SimpleUploadedFile("predictions.csv", sheet.to_csv(index=False).encode(), "text/csv")
    researcher.post(reverse("admin:annotation_modelresponse_import"), {"predictions": predictions})
    assert sorted(ModelResponse.objects.values_list("instance_id", "text")) == [
        (instances[0].pk, "Hot."), (instances[1].pk, "Cold.")]


def test_family_sheet_of_an_unknown_kind_is_not_found(researcher):
    family = FamilyFactory()
    url = reverse("admin:annotation_instructionfamily_sheet", args=[family.pk, "fully_annotated"])
    assert researcher.get(url).status_code == 404


def test_family_sheet_needs_permission_to_view_the_family(client):
    family = FamilyFactory()
    staff = get_user_model().objects.create_user("guest", password="pw", is_staff=True)
    client.force_login(staff)
    url = reverse("admin:annotation_instructionfamily_sheet", args=[family.pk, "single_image"])
    assert client.get(url).status_code == 403
