"""The admin says queued jobs will wait exactly when no Celery worker answers."""

import pytest
from django.core.cache import cache
from django.urls import reverse

from annotation.admin.worker_check import workers_answering
from tests.factories import FamilyFactory

NO_WORKER = "No Celery worker is answering"

# The admin remembers whether a worker answers, once per process: what a test before this one saw
# (a worker of its own) must not answer for these.
pytestmark = pytest.mark.usefixtures("fresh_cache")


@pytest.mark.django_db
def test_launching_a_stage_with_no_worker_says_the_job_will_wait(admin_client):
    family = FamilyFactory()
    response = admin_client.post(reverse("admin:annotation_instructionfamily_changelist"),
                                 {"action": "launch_caption", "_selected_action": [family.pk]}, follow=True)
    page = response.content.decode()
    assert "launched for" in page
    assert page.count(NO_WORKER) == 1


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_warning_goes_once_a_worker_answers_and_returns_when_it_stops(start_worker, admin_client):  # noqa: F811
    assert not workers_answering()
    worker = start_worker()
    cache.clear()
    assert workers_answering()
    family = FamilyFactory()
    page = admin_client.get(reverse("admin:annotation_instructionfamily_workflow", args=[family.pk])).content
    assert NO_WORKER not in page.decode()
    worker.stop()
    cache.clear()
    assert not workers_answering()
