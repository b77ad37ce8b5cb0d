"""Links and exported URLs use PUBLIC_BASE_URL when set; when not, links shown in a browser use the
address the researcher is using, and the admin warns before a snapshot, a HIT or a study would
carry a placeholder address (issue 9.5). No address is ever invented."""

import os

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.urls import reverse

from annotation.datasets import streams
from annotation.models import ImageAsset, Stage, Worker
from annotation.public_urls import placeholder_warning, public_url
from mturk.models import CrowdStudy
from mturk.platforms.mturk import unit_url
from tests.factories import FamilyFactory

pytestmark = pytest.mark.django_db

PLACEHOLDER = "127.0.0.1:8000"


@pytest.fixture
def researcher(client):
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    return client


@pytest.fixture
def uploaded_image(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    image = ImageAsset(width=1, height=1)
    image.file.save("photo.png", ContentFile(b"not decoded here"), save=False)
    return image


@pytest.mark.skipif("PUBLIC_BASE_URL" in os.environ, reason="the environment sets PUBLIC_BASE_URL")
def test_the_default_is_unset_not_a_made_up_address():
    from crowdbench import settings as module

    assert module.PUBLIC_BASE_URL == ""


def test_exported_image_url_uses_public_base_url_when_set(settings, uploaded_image):
    settings.PUBLIC_BASE_URL = "https://bench.example.org/"
    assert streams._image_url(uploaded_image) == f"https://bench.example.org{uploaded_image.file.url}"


def test_exported_image_url_without_public_base_url_is_the_site_path(settings, uploaded_image):
    settings.PUBLIC_BASE_URL = ""
    url = streams._image_url(uploaded_image)
    assert url == uploaded_image.file.url and url.startswith("/media/")
    assert PLACEHOLDER not in url


def test_a_hit_points_at_public_base_url_or_is_refused_as_not_https(settings):
    family = FamilyFactory()
    study = CrowdStudy.objects.create(name="HITs", platform=Worker.Platform.MTURK, stage=Stage.CAPTION,
                                      reward_usd="0.50")
    unit = family.work_units.create(stage=Stage.CAPTION, key="k")
    settings.PUBLIC_BASE_URL = "https://bench.example.org"
    assert unit_url(unit, study) == f"https://bench.example.org/work/unit/{unit.pk}/?study={study.pk}"
    settings.PUBLIC_BASE_URL = ""
    assert unit_url(unit, study) == f"/work/unit/{unit.pk}/?study={study.pk}"


def prolific_study():
    return CrowdStudy.objects.create(name="Prolific captions", platform=Worker.Platform.PROLIFIC,
                                     stage=Stage.CAPTION, reward_usd="0.50", completion_code="C0DE")


def test_the_admin_prints_the_study_link_on_the_address_in_use_and_warns(settings, researcher):
    settings.PUBLIC_BASE_URL = ""
    study = prolific_study()
    page = researcher.get(reverse("admin:mturk_crowdstudy_change", args=[study.pk]),
                          HTTP_HOST="127.0.0.1:8123").content.decode()
    assert "http://127.0.0.1:8123/work/caption/?PROLIFIC_PID=" in page
    assert "https://127.0.0.1:8000" not in page
    assert "PUBLIC_BASE_URL is not set" in page


def test_the_admin_prints_the_study_link_on_public_base_url_without_warning(settings, researcher):
    settings.PUBLIC_BASE_URL = "https://bench.example.org"
    study = prolific_study()
    page = researcher.get(reverse("admin:mturk_crowdstudy_change", args=[study.pk])).content.decode()
    assert "https://bench.example.org/work/caption/?PROLIFIC_PID=" in page
    assert "PUBLIC_BASE_URL is" not in page


@pytest.mark.parametrize("base", ["", "https://127.0.0.1:8000", "http://localhost:8000", "https://10.0.0.5",
                                  "http://crowdbench.local"])
def test_the_admin_warns_before_a_snapshot_would_carry_a_placeholder(settings, researcher, base):
    settings.PUBLIC_BASE_URL = base
    page = researcher.get(reverse("admin:annotation_snapshot_add")).content.decode()
    assert "PUBLIC_BASE_URL is" in page


def test_no_warning_before_a_snapshot_when_the_address_is_public(settings, researcher):
    settings.PUBLIC_BASE_URL = "https://bench.example.org"
    page = researcher.get(reverse("admin:annotation_snapshot_add")).content.decode()
    assert "PUBLIC_BASE_URL is" not in page


def test_the_admin_warns_before_publishing_a_batch_on_a_placeholder(settings, researcher):
    settings.PUBLIC_BASE_URL = ""
    study = prolific_study()
    page = researcher.post(reverse("admin:mturk_crowdstudy_changelist"),
                           {"action": "publish_batch", "_selected_action": [study.pk]}).content.decode()
    assert "Publish" in page and "PUBLIC_BASE_URL is not set" in page


def test_public_url_keeps_absolute_urls_and_prefers_the_setting(settings, rf):
    settings.PUBLIC_BASE_URL = ""
    request = rf.get("/", HTTP_HOST="localhost:8123")
    assert public_url("/work/", request=request) == "http://localhost:8123/work/"
    assert public_url("https://upload.wikimedia.org/x.png", request=request) == "https://upload.wikimedia.org/x.png"
    settings.PUBLIC_BASE_URL = "https://bench.example.org"
    assert public_url("/work/", request=request) == "https://bench.example.org/work/"
    assert placeholder_warning("x") is None
