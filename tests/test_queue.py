from datetime import timedelta

import pytest
from django.utils import timezone

from annotation import queue
from annotation.models import Assignment, Stage, WorkUnit
from tests.factories import FamilyFactory, WorkerFactory, launch

pytestmark = pytest.mark.django_db


def make_units(family, stage, count, overlap=1):
    launch(family, stage, overlap=overlap)
    return [
        WorkUnit.objects.create(stage=stage, key=f"k{n}", family=family, overlap=overlap)
        for n in range(count)
    ]


def test_worker_gets_a_lease_on_an_open_unit(worker):
    family = FamilyFactory()
    unit, = make_units(family, Stage.INSTRUCTION_GENERATION, 1)
    assignment = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    assert assignment.unit == unit
    assert assignment.status == Assignment.Status.LEASED
    assert assignment.lease_expires_at > timezone.now() + timedelta(minutes=29)
