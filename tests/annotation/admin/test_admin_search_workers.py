"""Search finds what a list shows (issue 39): on Answers to review and the workers list a worker is
found by the pseudonym the list shows, with or without its platform, and an in-house worker by the
user name they sign in with, as well as by their platform id."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import Assignment, Stage, Worker, WorkUnit
from tests.factories import FamilyFactory, WorkerFactory

pytestmark = pytest.mark.django_db

ANSWERS = reverse("admin:annotation_answer_changelist")
WORKERS = reverse("admin:annotation_worker_changelist")


@pytest.fixture
def workers():
    family = FamilyFactory()
    in_house = Worker.objects.create(platform=Worker.Platform.LOCAL, external_id="ann-local",
                                     user=get_user_model().objects.create_user("ann.smith", password="pw-4-ann"))
    crowd = [WorkerFactory(), WorkerFactory(platform=Worker.Platform.PROLIFIC, external_id="5f1a2b3c4d5e6f7a8b9c0d1e")]
    for n, worker in enumerate([in_house, *crowd]):
        unit = WorkUnit.objects.create(stage=Stage.CAPTION, key=f"caption-{n}", family=family)
        Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                  lease_expires_at=unit.created_at)
    return [in_house, *crowd]


def found(client, url, term):
    page = client.get(url, {"q": term})
    assert page.status_code == 200
    return [getattr(row, "worker", row) for row in page.context["cl"].result_list]


def test_answers_to_review_find_a_worker_by_the_name_the_list_shows(admin_client, workers):
    in_house, mturk, prolific = workers
    page = admin_client.get(ANSWERS).content.decode()
    assert str(mturk) in page and str(prolific) in page  # what the list shows: platform:pseudonym
    assert found(admin_client, ANSWERS, str(mturk)) == [mturk]
    assert found(admin_client, ANSWERS, prolific.pseudonym) == [prolific]
    assert found(admin_client, ANSWERS, str(prolific).upper()) == [prolific]
    assert found(admin_client, ANSWERS, f"prolific:{mturk.pseudonym}") == []  # the wrong platform


def test_answers_to_review_find_an_in_house_worker_by_user_name_and_still_by_platform_id(admin_client, workers):
    in_house, mturk, _ = workers
    assert found(admin_client, ANSWERS, "ann.smith") == [in_house]
    assert found(admin_client, ANSWERS, "ANN.SMITH") == [in_house]
    assert found(admin_client, ANSWERS, mturk.external_id) == [mturk]
    assert found(admin_client, ANSWERS, "caption-1") == [mturk]  # a unit's key, as before


def test_the_workers_list_finds_a_worker_by_pseudonym_user_name_and_platform_id(admin_client, workers):
    in_house, mturk, prolific = workers
    page = admin_client.get(WORKERS).content.decode()
    assert prolific.pseudonym in page and "ann.smith" in page
    assert found(admin_client, WORKERS, prolific.pseudonym) == [prolific]
    assert found(admin_client, WORKERS, str(mturk)) == [mturk]
    assert found(admin_client, WORKERS, "ann.smith") == [in_house]
    assert found(admin_client, WORKERS, "5f1a2b3c") == [prolific]
