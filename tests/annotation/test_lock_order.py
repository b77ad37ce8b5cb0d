"""Two transactions on one unit never wait on each other in a circle (annotation/crowdwork/lock_order.py).

Each test runs two real PostgreSQL sessions, one per thread, in lockstep: after every row lock a
session takes it waits (a little) for the other to take its own, so the two interleave their
locks as badly as a loaded server can. Taken in two orders, that is `deadlock detected`.
"""

import contextvars
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from annotation.collection import captions, references, verification
from annotation.crowdwork import queue, stages
from annotation.crowdwork.review import accept_work
from annotation.models import Assignment, Caption, Instance, Reference, Stage, Verification, WorkUnit
from tests.factories import CaptionFactory, InstanceFactory, WorkerFactory, launch

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

# Long enough for the other session to take its next lock, short enough that a session blocked
# behind the first one's lock (as the one order has it) costs the test little.
LOCKSTEP_SECONDS = 1.5


def in_lockstep(*requests):
    """Run each request in its own thread and database session; every row lock one takes waits
    for the other's next one, until a session blocks (the barrier then times out and lets go)."""
    barrier = threading.Barrier(len(requests))
    errors = []

    def after_each_lock(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if " FOR UPDATE" in sql or " FOR NO KEY UPDATE" in sql:
            try:
                barrier.wait(timeout=LOCKSTEP_SECONDS)
            except threading.BrokenBarrierError:
                pass
        return result

    def run(request):
        try:
            with connection.execute_wrapper(after_each_lock):
                request()
        except Exception as error:  # noqa: BLE001 - every failure is reported by the test
            errors.append(error)
        finally:
            connection.close()

    # Each thread in the test's scope (crowdbench/scoping.py), as each request would be in its own.
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(run, request)) for request in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors


def lapse(lease):
    Assignment.objects.filter(pk=lease.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))


def two_leases(stage):
    workers = [WorkerFactory(), WorkerFactory()]
    return [(worker, queue.next_assignment(worker=worker, stage=stage)) for worker in workers]


def test_an_in_time_and_a_late_caption_on_one_unit_are_both_stored():
    instance = InstanceFactory(image_count=1)
    launch(instance.family, Stage.CAPTION, overlap=2)
    stages.create_work_units(family=instance.family, stage=Stage.CAPTION)
    (on_time, lease), (late, lapsed) = two_leases(Stage.CAPTION)
    lapse(lapsed)

    in_lockstep(
        lambda: captions.submit_caption(assignment_id=lease.pk, worker=on_time,
                                        texts=["A border collie runs beside six sheep on a green hill."]),
        lambda: captions.submit_caption(assignment_id=lapsed.pk, worker=late,
                                        texts=["Six white sheep graze while a black and white dog runs."]),
    )

    assert Caption.objects.filter(instance=instance).count() == 2
    assert WorkUnit.objects.get(pk=lease.unit_id).status == WorkUnit.Status.DONE


def test_an_in_time_and_a_late_verification_on_one_unit_are_both_stored():
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    launch(instance.family, Stage.VERIFICATION, overlap=2)
    reference = references.store_reference(instance=instance, text="Three sheep.", source=Reference.Source.MANUAL)
    (on_time, lease), (late, lapsed) = two_leases(Stage.VERIFICATION)
    lapse(lapsed)

    in_lockstep(
        lambda: verification.submit_verification(assignment_id=lease.pk, worker=on_time, is_correct=True),
        lambda: verification.submit_verification(assignment_id=lapsed.pk, worker=late, is_correct=True),
    )

    assert Verification.objects.filter(reference=reference).count() == 2
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.CORRECT


def test_accepting_a_caption_while_another_is_submitted_on_its_unit_stores_both():
    instance = InstanceFactory(image_count=1)
    launch(instance.family, Stage.CAPTION, overlap=2, counts_provisional=False)
    stages.create_work_units(family=instance.family, stage=Stage.CAPTION)
    (first, first_lease), (second, second_lease) = two_leases(Stage.CAPTION)
    captions.submit_caption(assignment_id=first_lease.pk, worker=first,
                            texts=["A border collie runs beside six sheep on a green hill."])

    in_lockstep(
        lambda: accept_work(assignments=[first_lease]),
        lambda: captions.submit_caption(assignment_id=second_lease.pk, worker=second,
                                        texts=["Six white sheep graze while a black and white dog runs."]),
    )

    assert Caption.objects.filter(instance=instance).count() == 2
    assert Assignment.objects.get(pk=first_lease.pk).work_state == "accepted"


def test_a_late_submit_and_its_page_keeping_the_lease_alive_both_finish():
    """The same lapsed lease, submitted from its page while the page's sign of life renews it."""
    instance = InstanceFactory(image_count=1)
    launch(instance.family, Stage.CAPTION, overlap=1)
    stages.create_work_units(family=instance.family, stage=Stage.CAPTION)
    ((worker, lease),) = [(w, queue.next_assignment(worker=w, stage=Stage.CAPTION)) for w in [WorkerFactory()]]
    lapse(lease)

    def keep_alive():
        try:
            queue.keep_lease_alive(assignment=lease)
        except Exception as refused:  # noqa: BLE001 - refused kindly once the submit came first
            if "saved already" not in str(refused):
                raise

    in_lockstep(
        keep_alive,
        lambda: captions.submit_caption(assignment_id=lease.pk, worker=worker,
                                        texts=["A border collie runs beside six sheep on a green hill."]),
    )

    assert Assignment.objects.get(pk=lease.pk).status == Assignment.Status.SUBMITTED
