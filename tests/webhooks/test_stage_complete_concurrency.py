"""The last units of a stage closing at the same moment, each in its own transaction on
PostgreSQL: the stage is announced complete exactly once."""

import pytest
from django.db import connection

from annotation.collection import captions
from annotation.crowdwork import queue, stages
from annotation.models import Stage
from tests.annotation.test_queue_concurrency import run_at_once
from tests.factories import FamilyFactory, InstanceFactory, WorkerFactory, launch
from webhooks.models import Delivery, Endpoint

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

FAMILIES = 5
CAPTION = "A man in a red coat waves from the top of a parade float."


def test_the_last_two_captions_submitted_at_once_complete_the_stage_once():
    assert connection.vendor == "postgresql", "the completion check is serialised by an advisory lock"
    submits = []
    families = [FamilyFactory() for _ in range(FAMILIES)]
    for family in families:
        launch(family, Stage.CAPTION)
        Endpoint.objects.create(url="http://127.0.0.1:9/hook", events=["stage.completed"], family=family)
        InstanceFactory(family=family)
        InstanceFactory(family=family)
        stages.create_work_units(family=family, stage=Stage.CAPTION)
        for unit in family.work_units.all():
            annotator = WorkerFactory()
            assignment = queue.next_assignment(worker=annotator, stage=Stage.CAPTION)
            assert assignment.unit == unit
            submits.append(lambda a=assignment, w=annotator: captions.submit_caption(
                assignment_id=a.pk, worker=w, texts=[CAPTION]))

    run_at_once(submits)

    completed = sorted(Delivery.objects.filter(event="stage.completed").values_list("endpoint__family", flat=True))
    assert completed == sorted(family.pk for family in families)
