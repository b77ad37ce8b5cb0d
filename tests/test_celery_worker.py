"""Background jobs run by a real Celery worker process against the test database and broker."""

import os
import signal
import subprocess
import sys
import time
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from annotation import queue
from annotation.collection import captions, stages
from annotation.models import Instance, Reference, Stage, WorkUnit
from crowdbench.celery import app
from tasks.pipeline import create_work_units_job, generate_reference_job
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, WorkerFactory, launch
from tests.openai_fake import completion, rate_limited

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ANSWER = "He is waving to greet the crowd gathered for the parade."
WAIT_SECONDS = 60


def _test_database_url():
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    return (f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/"
            f"{quote(db['NAME'], safe='')}")


class CeleryWorker:
    def __init__(self, *, log_path, openai_base_url, extra_args=(), **environment):
        self.log_path = log_path
        self.nodename = f"crowdbench-test-{os.getpid()}@%h"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "crowdbench.settings",
            "DATABASE_URL": _test_database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "OPENAI_BASE_URL": openai_base_url,
            "OPENAI_API_KEY": "test-key",
            "OPENAI_REFERENCE_MODEL": "gpt-4",
            **environment,
        }
        self._log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "crowdbench", "worker", "--pool=solo",
             "--concurrency=1", "-Q", "celery", "--loglevel=INFO", "-n", self.nodename,
             "--without-gossip", "--without-mingle", "--without-heartbeat", *extra_args],
            cwd=settings.BASE_DIR, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self):
        return self.log_path.read_text()

    def wait_for_log(self, text, *, count=1):
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            if self.log().count(text) >= count:
                return
            if self.process.poll() is not None:
                pytest.fail(f"The Celery worker exited ({self.process.returncode}):\n{self.log()}")
            time.sleep(0.2)
        pytest.fail(f"The worker log never showed {text!r} {count} time(s):\n{self.log()}")

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


@pytest.fixture
def start_worker(openai_server, tmp_path):
    """Start a worker (with extra environment if asked) once the queue holds nothing stale."""
    # The worker is another process: it can share neither an in-memory SQLite test database nor
    # the file broker of the embedded default without reaching a developer's own worker.
    if connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs DATABASE_URL for PostgreSQL and CELERY_BROKER_URL for Redis (make test)")
    app.conf.broker_url = settings.CELERY_BROKER_URL
    app.control.purge()
    workers = []

    def start(extra_args=(), **environment):
        worker = CeleryWorker(log_path=tmp_path / f"worker-{len(workers)}.log",
                              openai_base_url=openai_server.base_url, extra_args=extra_args,
                              **environment)
        workers.append(worker)
        worker.wait_for_log(" ready.")
        return worker

    yield start
    for worker in workers:
        worker.stop()
    app.control.purge()


def wait_for(condition, *, what, worker):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"Timed out waiting for {what}. Worker log:\n{worker.log()}")


def awaiting_reference(**instance_fields):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE, **instance_fields)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    return instance


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
