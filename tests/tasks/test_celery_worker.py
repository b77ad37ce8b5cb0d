"""Background jobs run by a real Celery worker process against the test database and broker."""


import pytest

from annotation.collection import captions
from annotation.crowdwork import queue, stages
from annotation.models import Instance, Reference, Stage, WorkUnit
from tasks.pipeline import create_work_units_job, generate_reference_job
from tests.celery_support import wait_for
from tests.factories import FamilyFactory, InstanceFactory, WorkerFactory, awaiting_reference, launch
from tests.openai_fake import completion, rate_limited

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ANSWER = "He is waving to greet the crowd gathered for the parade."


def test_submitted_caption_gets_a_reference_from_the_worker(start_worker, openai_server):
    openai_server.script(completion(ANSWER))
    worker = start_worker()
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    instance = InstanceFactory(family=family)
    stages.create_work_units(family=family, stage=Stage.CAPTION)
    annotator = WorkerFactory()
    assignment = queue.next_assignment(worker=annotator, stage=Stage.CAPTION)

    captions.submit_caption(assignment_id=assignment.pk, worker=annotator,
                            texts=["A man in a red coat waves from the top of a parade float."])

    wait_for(lambda: Reference.objects.filter(instance=instance).exists(),
             what="the generated reference", worker=worker)
    reference = Reference.objects.get(instance=instance)
    assert (reference.text, reference.model) == (ANSWER, "gpt-4")
    assert "A man in a red coat waves" in openai_server.requests[0].body["messages"][0]["content"]
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_VERIFICATION


def test_reference_job_sent_twice_stores_one_reference_and_calls_the_model_once(
    start_worker, openai_server
):
    openai_server.script(completion(ANSWER), completion("A different answer."))
    worker = start_worker()
    instance = awaiting_reference()

    first = generate_reference_job.delay(instance.pk)
    second = generate_reference_job.delay(instance.pk)

    for job in (first, second):
        worker.wait_for_log(f"[{job.id}] succeeded")
    assert Reference.objects.filter(instance=instance).count() == 1
    assert len(openai_server.requests) == 1


def test_rate_limit_outlasting_the_client_retries_is_retried_by_the_job(
    start_worker, openai_server
):
    openai_server.script(rate_limited(), completion(ANSWER))
    worker = start_worker(OPENAI_MAX_RETRIES="0", MODEL_JOB_RETRY_BACKOFF_SECONDS="1")
    instance = awaiting_reference()

    job = generate_reference_job.delay(instance.pk)

    worker.wait_for_log(f"[{job.id}] succeeded")
    assert f"Task tasks.generate_reference[{job.id}] retry" in worker.log()
    assert [reference.text for reference in instance.references.all()] == [ANSWER]
    assert len(openai_server.requests) == 2


def test_work_unit_job_creates_the_units_of_a_launched_stage(start_worker):
    worker = start_worker()
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    instance = InstanceFactory(family=family)

    create_work_units_job.delay(family.pk, Stage.CAPTION)

    wait_for(lambda: WorkUnit.objects.filter(instance=instance, stage=Stage.CAPTION).exists(),
             what="the caption work unit", worker=worker)
