"""Deliveries sent by a real Celery worker process: retried with backoff, and sent again by the
outbox sweep when their message was lost."""

import pytest
import redis
from django.db import transaction

from annotation.crowdwork import stages
from annotation.models import Stage
from tasks import outbox
from tests.celery_support import wait_for
from tests.factories import FamilyFactory
from tests.webhook_support import LOOPBACK, Receiver
from webhooks.models import Delivery, Endpoint

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


def delivered(delivery_id):
    return Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.DELIVERED).exists()


def test_the_worker_sends_a_launch_to_a_receiver_that_fails_twice_waiting_longer_each_time(start_worker, receiver):
    receiver.statuses = [500, 502]
    worker = start_worker(WEBHOOK_RETRY_BASE_SECONDS="1", WEBHOOK_ALLOWED_NETWORKS=",".join(LOOPBACK))
    family = FamilyFactory()
    Endpoint.objects.create(url=receiver.url, events=["stage.launched"], family=family)

    stages.launch_stage(family=family, stage=Stage.CAPTION)

    delivery = Delivery.objects.get()
    wait_for(lambda: delivered(delivery.pk), what="the delivery", worker=worker)
    delivery.refresh_from_db()
    assert delivery.attempts == 3 and delivery.last_error.startswith("Attempt 2: HTTP 502")
    arrivals = [request.at for request in receiver.received]
    assert len(arrivals) == 3
    # 1 s after the first failure, 2 s after the second: the backoff doubles.
    assert arrivals[1] - arrivals[0] >= 1 and arrivals[2] - arrivals[1] >= 2
    assert {request.headers["X-Crowdbench-Event-Id"] for request in receiver.received} == {str(delivery.event_id)}


def test_the_sweep_sends_again_a_delivery_whose_message_was_lost(start_worker, receiver, settings):
    family = FamilyFactory()
    Endpoint.objects.create(url=receiver.url, events=["stage.launched"], family=family)
    with transaction.atomic():
        stages.launch_stage(family=family, stage=Stage.CAPTION)
    # The broker loses the delivery's message (and the unit-making job's) before any worker runs.
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("celery")
    worker = start_worker(WEBHOOK_ALLOWED_NETWORKS=",".join(LOOPBACK))
    delivery = Delivery.objects.get()
    assert delivery.status == Delivery.Status.PENDING and receiver.received == []

    settings.JOB_REQUEUE_AFTER_SECONDS = 0
    assert outbox.requeue_owed() >= 1

    wait_for(lambda: delivered(delivery.pk), what="the delivery sent again", worker=worker)
    assert len(receiver.received) == 1
    # Once delivered, the sweep owes it nothing.
    assert "webhooks.deliver" not in [name for name, *_ in outbox.owed_jobs()]
