"""The queue under real concurrency on PostgreSQL: 20 threads, each its own connection."""

import contextvars
import threading
from collections import Counter

import pytest
from django.db import connection, transaction

from annotation.collection.instructions import submit_instruction
from annotation.crowdwork import answers, lock_order, queue
from annotation.models import Assignment, Instance, Stage, Worker, WorkUnit
from tests.factories import FamilyFactory, ImageAssetFactory, WorkerFactory, launch

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

THREADS = 20


def run_at_once(requests):
    """Run each callable in its own thread, released together by a barrier."""
    barrier = threading.Barrier(len(requests))
    results, errors = [None] * len(requests), []

    def run(index, request):
        try:
            barrier.wait()
            results[index] = request()
        except Exception as error:  # noqa: BLE001 - every failure is reported by the test
            errors.append(error)
        finally:
            connection.close()

    # Each thread in the test's scope (crowdbench/scoping.py), as each request would be in its own.
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(run, i, r))
               for i, r in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


def test_twenty_workers_at_once_hold_the_overlap_exactly():
    assert connection.vendor == "postgresql", "the concurrency test needs SELECT ... FOR UPDATE SKIP LOCKED"
    family = FamilyFactory()
    launch(family, Stage.CAPTION, overlap=3)
    units = [WorkUnit.objects.create(stage=Stage.CAPTION, key=f"k{n}", family=family, overlap=3)
             for n in range(5)]
    workers = [WorkerFactory() for _ in range(THREADS)]

    leases = run_at_once([
        lambda w=w: queue.next_assignment(worker=w, stage=Stage.CAPTION) for w in workers
    ])

    granted = [lease for lease in leases if lease is not None]
    assert len(granted) == 15
    per_unit = Counter(lease.unit_id for lease in granted)
    assert per_unit == {unit.pk: 3 for unit in units}
    assert Assignment.objects.count() == 15
    assert len({(a.unit_id, a.worker_id) for a in Assignment.objects.all()}) == 15


def test_one_worker_asking_twenty_times_at_once_gets_one_lease():
    family = FamilyFactory()
    launch(family, Stage.CAPTION, overlap=1)
    for n in range(5):
        WorkUnit.objects.create(stage=Stage.CAPTION, key=f"k{n}", family=family)
    worker = WorkerFactory()

    leases = run_at_once([
        lambda: queue.next_assignment(worker=worker, stage=Stage.CAPTION) for _ in range(THREADS)
    ])

    assert {lease.pk for lease in leases} == {Assignment.objects.get().pk}


def test_one_participant_asking_twenty_times_at_once_as_the_study_page_does_gets_one_lease():
    """The study page locks the worker as it fetches them, then leases in the same transaction."""
    family = FamilyFactory()
    launch(family, Stage.CAPTION, overlap=2)
    for n in range(5):
        WorkUnit.objects.create(stage=Stage.CAPTION, key=f"k{n}", family=family, overlap=2)
    worker = WorkerFactory()

    def ask_as_the_page_does():
        with transaction.atomic():
            locked = queue.locked_for_leasing(Worker.objects.filter(pk=worker.pk))
            return queue.next_assignment(worker=locked, stage=Stage.CAPTION, family=family)

    leases = run_at_once([ask_as_the_page_does for _ in range(THREADS)])

    assert {lease.pk for lease in leases} == {Assignment.objects.get().pk}


def test_a_held_lease_submitted_from_another_tab_while_leasing_gives_the_next_unit_instead():
    """The other tab's submit takes no worker lock: it may land between the statement that saw
    the held lease and the one that fetches it."""
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    units = [WorkUnit.objects.create(stage=Stage.CAPTION, key=f"k{n}", family=family) for n in range(2)]
    worker = WorkerFactory()
    held = queue.next_assignment(worker=worker, stage=Stage.CAPTION)
    submitted = []

    def submit_in_the_other_tab():
        with transaction.atomic():
            assignment, _ = lock_order.lock_assignment_for_submission(
                assignment_id=held.pk, worker=worker, stage=Stage.CAPTION)
            answers.mark_submitted(assignment)
        connection.close()

    def after_the_candidate_query(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if '"held_lease_id"' in sql and not submitted:
            submitted.append(True)
            other_tab = threading.Thread(target=contextvars.copy_context().run, args=(submit_in_the_other_tab,))
            other_tab.start()
            other_tab.join(timeout=30)
        return result

    with connection.execute_wrapper(after_the_candidate_query):
        lease = queue.next_assignment(worker=worker, stage=Stage.CAPTION)

    assert submitted
    assert lease is not None and lease.unit == units[1]
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.SUBMITTED


def test_twenty_workers_draining_the_queue_fill_every_unit_exactly():
    family = FamilyFactory(target_instances=8)
    launch(family, Stage.INSTRUCTION_GENERATION, overlap=3)
    units = [WorkUnit.objects.create(stage=Stage.INSTRUCTION_GENERATION, key=f"slot-{n}",
                                     family=family, overlap=3) for n in range(8)]
    image = ImageAssetFactory()
    workers = [WorkerFactory() for _ in range(THREADS)]

    def drain(worker):
        done = 0
        while (lease := queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)):
            submit_instruction(assignment_id=lease.pk, worker=worker, images=[image],
                               instruction=f"Count the red objects in this photo ({worker.pk}).")
            done += 1
        return done

    counts = run_at_once([lambda w=w: drain(w) for w in workers])

    assert sum(counts) == 24
    assert Instance.objects.count() == 24
    for unit in units:
        unit.refresh_from_db()
        assert unit.status == WorkUnit.Status.DONE
        assert unit.assignments.filter(status=Assignment.Status.SUBMITTED).count() == 3


def test_a_submission_posted_twenty_times_at_once_is_stored_once():
    family = FamilyFactory()
    launch(family, Stage.INSTRUCTION_GENERATION)
    WorkUnit.objects.create(stage=Stage.INSTRUCTION_GENERATION, key="slot-1", family=family)
    worker = WorkerFactory()
    lease = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    image = ImageAssetFactory()

    instances = run_at_once([
        lambda: submit_instruction(assignment_id=lease.pk, worker=worker, images=[image],
                                   instruction="What season is it in this photo, and why?")
        for _ in range(THREADS)
    ])

    assert {instance.pk for instance in instances} == {Instance.objects.get().pk}
