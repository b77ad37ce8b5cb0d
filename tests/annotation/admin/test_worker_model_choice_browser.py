"""A worker model chosen in headless Chromium: a researcher sets a family's verification to decide
by Dawid-Skene on the family's page, and once the worker-model job has run, Table 2 and the
reference's own page say that Dawid-Skene decided, with its posterior."""

import os

import pytest

from annotation.collection import references, verification, worker_model_job
from annotation.crowdwork import queue
from annotation.models import Aggregation, Instance, Reference, Stage, StageConfig
from tests.factories import CaptionFactory, InstanceFactory, WorkerFactory, launch

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_chooses_dawid_skene_and_the_decisions_say_it_decided(researcher_page, live_server):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    family = instance.family
    launch(family, Stage.VERIFICATION, overlap=3, verification_rule="majority")
    page = researcher_page

    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/change/")
    page.locator('select[name="stage_configs-0-aggregation"]').select_option(Aggregation.DAWID_SKENE.value)
    # Three verifiers with one answer each: the model may decide on them only when the researcher says
    # one answer per worker is evidence enough (by default the verification rule would decide).
    page.locator('input[name="stage_configs-0-model_min_answers"]').fill("1")
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(f"{live_server.url}/admin/annotation/instructionfamily/")
    config = StageConfig.objects.get(family=family, stage=Stage.VERIFICATION)
    assert (config.aggregation, config.model_min_answers) == (Aggregation.DAWID_SKENE, 1)

    reference = references.store_reference(instance=instance, text="Three sheep.", source=Reference.Source.MANUAL)
    for is_correct in (True, True, False):
        worker = WorkerFactory()
        lease = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
        verification.submit_verification(assignment_id=lease.pk, worker=worker, is_correct=is_correct,
                                         problem_in_response=not is_correct)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.PENDING  # a worker model decides in its job, not the submit
    # The job the last submit queued (tasks.fit_worker_models), run here as a worker would run it.
    assert worker_model_job.decide_by_worker_models() == 1
    reference.refresh_from_db()

    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/table2/?family={family.pk}")
    assert page.locator(".decided-by").inner_text() == "Decided by: Dawid-Skene 1."
    page.goto(f"{live_server.url}/admin/annotation/reference/{reference.pk}/change/")
    assert f"Dawid-Skene (posterior {reference.posterior:.2f})" in page.locator("#content").inner_text()
    assert page.errors == []
