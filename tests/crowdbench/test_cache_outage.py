"""The shared cache stopped (a real redis-server, killed): every use of it degrades as
crowdbench/shared_cache.py states, and no request fails."""

import logging

import pytest
from django.test import Client
from django.utils import timezone

from annotation import worker_report
from annotation.admin import worker_check
from annotation.models import Assignment, Stage, WorkUnit
from crowdbench import shared_cache
from tests.factories import FamilyFactory, WorkerFactory
from tests.frontend_support import PROLIFIC_STUDY_ID, prolific_caption_study
from tests.redis_support import OwnRedis

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not OwnRedis.installed(), reason="needs redis-server"),
]
STUDY_ID = PROLIFIC_STUDY_ID


def link(n):
    return f"/work/caption/?PROLIFIC_PID=60ffe5c8371090c7041d4{n:03d}&STUDY_ID={STUDY_ID}&SESSION_ID=sess{n:03d}"


def test_the_study_link_admits_new_participants_and_logs_while_the_cache_is_down(cache_redis, settings, caplog):
    settings.PUBLIC_BASE_URL = "https://crowdbench.example.org"
    settings.STUDY_NEW_PARTICIPANTS_RATE = "1/h"
    prolific_caption_study(units=3)
    assert Client().get(link(1), follow=True).status_code == 200
    assert Client().get(link(2), follow=True).status_code == 429  # the throttle counts while the cache is up

    cache_redis.stop()
    with caplog.at_level(logging.WARNING, logger="crowdbench.shared_cache"):
        pages = [Client().get(link(n), follow=True) for n in (3, 4)]

    assert [page.status_code for page in pages] == [200, 200]
    assert all(page.context["token"] for page in pages)  # each was leased a task
    assert [record.message for record in caplog.records if "admits without counting" in record.message]


def test_the_stage_median_is_computed_without_the_cache_while_it_is_down(cache_redis, monkeypatch):
    monkeypatch.setattr(worker_report, "EXACT_MEDIAN_UP_TO", 2)
    worker, now = WorkerFactory(), timezone.now()
    family = FamilyFactory()
    for n, seconds in enumerate([30, 40, 50, 60]):
        unit = WorkUnit.objects.create(stage=Stage.CAPTION, key=f"u{n}", family=family)
        Assignment.objects.create(unit=unit, worker=WorkerFactory(), status=Assignment.Status.SUBMITTED,
                                  lease_expires_at=now, submitted_at=now, active_seconds=seconds)
    cache_redis.stop()

    # No user: the rows of no group, which this family is.
    assert worker_report._others_median(Stage.CAPTION, worker, None) == 45


def test_remembered_answers_are_asked_again_while_the_cache_is_down(cache_redis):
    from crowdbench.celery import app

    # Jobs run eagerly, so the worker check answers without a worker. Set on the app alone, and put
    # back as it was: Celery reads its Django settings live, so setting CELERY_TASK_ALWAYS_EAGER too
    # made "as it was" read True, and every later test of the process ran its jobs eagerly (its
    # worker-check and worker tests then failed, depending on the order tests were given out).
    eager_before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        cache_redis.stop()
        shared_cache.set("crowdbench:anything", True, 60)  # remembers nothing, raises nothing
        assert shared_cache.get("crowdbench:anything") is None
        assert worker_check.workers_answering() is True  # asked, not remembered
    finally:
        app.conf.task_always_eager = eager_before
