import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotation.models import (
    Assignment,
    Caption,
    ImageAsset,
    Instance,
    InstructionFamily,
    Reference,
    StageConfig,
    Verification,
    Worker,
    WorkUnit,
)
from fixtures.demo import FAMILIES, IMAGES

pytestmark = pytest.mark.django_db

COUNTED = (ImageAsset, InstructionFamily, Instance, Caption, Reference, Verification, WorkUnit,
           Assignment, StageConfig, Worker, get_user_model())


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def counts():
    return {model.__name__: model.objects.count() for model in COUNTED}


def stored_files(root):
    return sorted(path for path in root.rglob("*") if path.is_file())


def test_loading_the_demo_twice_changes_nothing(media_root):
    call_command("load_demo")
    first, files = counts(), stored_files(media_root)

    call_command("load_demo")

    assert counts() == first
    assert stored_files(media_root) == files
    assert first["InstructionFamily"] == len(FAMILIES)


def test_demo_has_an_instance_at_every_stage():
    call_command("load_demo")

    statuses = set(Instance.objects.values_list("status", flat=True))
    assert statuses == set(Instance.Status.values)


def test_every_demo_image_is_stored_with_its_licence(media_root):
    call_command("load_demo")

    assets = list(ImageAsset.objects.all())
    assert {asset.file.name.rsplit("/", 1)[-1] for asset in assets}
    for asset in assets:
        assert asset.licence and asset.licence_url and asset.author and asset.source_url
        assert asset.width and asset.height and len(asset.sha256) == 64
        assert (media_root / asset.file.name).is_file()
    assert {asset.source_url for asset in assets} <= {image.source_url for image in IMAGES.values()}


def test_admin_can_log_in_with_the_demo_password(monkeypatch):
    monkeypatch.setenv("DEMO_ADMIN_PASSWORD", "a demo secret")

    call_command("load_demo")

    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff
    assert admin.check_password("a demo secret")


def test_loading_again_keeps_a_changed_admin_password(monkeypatch):
    call_command("load_demo")
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed by the researcher")
    admin.save()

    call_command("load_demo")

    admin.refresh_from_db()
    assert admin.check_password("changed by the researcher")


def test_demo_shows_crowd_work_in_progress_and_its_outcomes():
    call_command("load_demo")

    assert Worker.objects.filter(platform=Worker.Platform.LOCAL).count() >= 3
    assert Assignment.objects.filter(status=Assignment.Status.LEASED).exists()
    assert Assignment.objects.filter(status=Assignment.Status.SUBMITTED).exists()
    assert StageConfig.objects.filter(launched_at__isnull=False).exists()
    assert set(Reference.objects.values_list("verdict", flat=True)) == set(Reference.Verdict.values)
    assert Reference.objects.filter(problem_in_caption=True).exists()
    assert Reference.objects.filter(problem_in_response=True).exists()
    assert Verification.objects.filter(is_correct=False).exists()
    reformatted = InstructionFamily.objects.get(source=InstructionFamily.Source.REFORMATTED)
    assert reformatted.citation and reformatted.source_dataset
    multi = InstructionFamily.objects.get(is_multi_image=True)
    assert all(instance.instanceimage_set.count() == 2 for instance in multi.instances.all())
