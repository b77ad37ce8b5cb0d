"""What the admin shows a researcher about qualification tests (issue 24, finding 7): every attempt
has a read-only list with filters, and the count of workers paused on gold items is said once on a
crowd-study page, not once more after every action."""

import pytest

from annotation.models import QualificationAttempt, Stage, StageQualification, WorkerQualification
from mturk.models import CrowdStudy
from tests.factories import WorkerFactory
from tests.mturk_wire import make_researcher

pytestmark = pytest.mark.django_db

PAUSED = "1 worker paused for low accuracy on gold items"


@pytest.fixture
def qualification():
    return StageQualification.objects.create(stage=Stage.CAPTION, name="Caption test",
                                             description="Five sample captions.")


@pytest.fixture
def researcher_client(client):
    client.force_login(make_researcher())
    return client


def test_qualification_attempts_are_listed_read_only_with_filters(researcher_client, qualification):
    passed = QualificationAttempt.objects.create(
        qualification=qualification, worker=WorkerFactory(platform="prolific"), item_ids=[1, 2],
        status=QualificationAttempt.Status.PASSED, score="0.800")
    failed = QualificationAttempt.objects.create(
        qualification=qualification, worker=WorkerFactory(platform="mturk"), item_ids=[1, 2],
        status=QualificationAttempt.Status.FAILED, score="0.400")

    listing = researcher_client.get("/admin/annotation/qualificationattempt/")
    html = listing.content.decode()
    assert listing.status_code == 200
    assert str(passed.worker) in html and str(failed.worker) in html
    assert "0.800" in html and "Prolific" in html
    assert passed.worker.external_id not in html  # pseudonyms, as in every list outside payment
    only_failed = researcher_client.get("/admin/annotation/qualificationattempt/?status__exact=failed")
    assert list(only_failed.context["cl"].result_list) == [failed]
    by_platform = researcher_client.get(
        "/admin/annotation/qualificationattempt/?worker__platform__exact=prolific")
    assert list(by_platform.context["cl"].result_list) == [passed]

    assert researcher_client.get(f"/admin/annotation/qualificationattempt/{failed.pk}/change/").status_code == 200
    assert researcher_client.get("/admin/annotation/qualificationattempt/add/").status_code == 403
    researcher_client.post(f"/admin/annotation/qualificationattempt/{failed.pk}/change/",
                           {"status": "passed", "score": "1.000"})
    researcher_client.post(f"/admin/annotation/qualificationattempt/{failed.pk}/delete/", {"post": "yes"})
    failed.refresh_from_db()
    assert (failed.status, str(failed.score)) == ("failed", "0.400")


def test_paused_workers_are_counted_once_on_the_crowd_study_page_after_an_action_or_a_redirect(
        researcher_client, qualification):
    WorkerQualification.objects.create(qualification=qualification, worker=WorkerFactory(),
                                       test_score="0.900", status=WorkerQualification.Status.PAUSED)
    study = CrowdStudy.objects.create(platform="local", stage=Stage.CAPTION, name="In-house captions")

    shown = researcher_client.get("/admin/mturk/crowdstudy/")
    assert shown.content.decode().count(PAUSED) == 1
    after_action = researcher_client.post(
        "/admin/mturk/crowdstudy/", {"action": "sync", "_selected_action": [study.pk], "index": "0"},
        follow=True)
    assert after_action.redirect_chain and after_action.content.decode().count(PAUSED) == 1
    after_redirect = researcher_client.get("/admin/mturk/crowdstudy/?no_such_filter=1", follow=True)
    assert after_redirect.redirect_chain and after_redirect.content.decode().count(PAUSED) == 1
    # The next page the researcher opens carries no leftover copy.
    assert PAUSED not in researcher_client.get(f"/admin/mturk/crowdstudy/{study.pk}/change/").content.decode()
