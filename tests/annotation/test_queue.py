from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.collection.verification import submit_verification
from annotation.crowdwork import answers, leases, queue
from annotation.exceptions import AnnotationError
from annotation.models import Assignment, InstanceImage, Stage, Worker, WorkUnit
from tests.factories import (
    CaptionFactory,
    FamilyFactory,
    ImageAssetFactory,
    InstanceFactory,
    ReferenceFactory,
    WorkerFactory,
    launch,
)

pytestmark = pytest.mark.django_db


def make_units(family, stage, count, overlap=1):
    launch(family, stage, overlap=overlap)
    return [
        WorkUnit.objects.create(stage=stage, key=f"k{n}", family=family, overlap=overlap)
        for n in range(count)
    ]


def test_worker_gets_a_lease_on_an_open_unit(worker):
    unit, = make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 1)
    assignment = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    assert assignment.unit == unit
    assert assignment.status == Assignment.Status.LEASED
    # Held while the page shows signs of life (LEASE_IDLE_MINUTES each), never past the stage's lease.
    assert timedelta(minutes=4) < assignment.lease_expires_at - timezone.now() <= timedelta(minutes=5)


def test_worker_holding_a_lease_gets_the_same_unit_back(worker):
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 3)
    first = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    again = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    assert again.pk == first.pk


def test_unit_is_not_handed_out_beyond_its_overlap():
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 1, overlap=2)
    got = [queue.next_assignment(worker=WorkerFactory(), stage=Stage.INSTRUCTION_GENERATION)
           for _ in range(3)]
    assert [a is not None for a in got] == [True, True, False]


def test_unit_of_an_unlaunched_stage_is_not_handed_out(worker):
    family = FamilyFactory()
    WorkUnit.objects.create(stage=Stage.CAPTION, key="k", family=family)
    assert queue.next_assignment(worker=worker, stage=Stage.CAPTION) is None


def test_expired_lease_returns_unit_to_pool(worker):
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 1)
    first = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    Assignment.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    other = queue.next_assignment(worker=WorkerFactory(), stage=Stage.INSTRUCTION_GENERATION)
    assert other is not None and other.unit_id == first.unit_id
    assert leases.expire_leases() == 1
    first.refresh_from_db()
    assert first.status == Assignment.Status.EXPIRED


def test_a_lapsed_lease_comes_back_as_the_same_assignment_while_its_slot_is_free(worker):
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 2, overlap=3)
    first = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    Assignment.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    again = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    assert again.pk == first.pk and again.lease_expires_at > timezone.now()
    assert Assignment.objects.filter(worker=worker).count() == 1


def test_a_lapsed_lease_whose_slot_went_to_someone_else_does_not_come_back(worker):
    unit, other_unit = make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 2)
    first = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    Assignment.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    taker = queue.next_assignment(worker=WorkerFactory(), stage=Stage.INSTRUCTION_GENERATION)
    assert taker.unit_id == first.unit_id
    assert queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION).unit_id != first.unit_id


def test_a_unit_given_back_comes_back_to_the_same_worker_only_once_nothing_else_is_left(worker):
    first_unit, second_unit = make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 2)
    first = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    leases.return_assignment(assignment=first)
    second = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    assert second.unit_id == second_unit.pk
    leases.return_assignment(assignment=second)
    # Not on the page right after giving one back; later the newest comes back, as the same
    # assignment, not a second one.
    assert queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION, given_back_too=False) is None
    back = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    assert back.pk == second.pk and back.status == Assignment.Status.LEASED


def test_a_page_that_shows_signs_of_life_keeps_its_lease_up_to_the_stage_lease(worker, settings):
    settings.LEASE_IDLE_MINUTES = 5
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 1)
    lease = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    # Taken 28 minutes ago on a 30-minute stage lease: kept alive for 2 more minutes, not 5.
    taken = timezone.now() - timedelta(minutes=28)
    Assignment.objects.filter(pk=lease.pk).update(leased_at=taken,
                                                  lease_expires_at=timezone.now() + timedelta(minutes=1))
    expires = queue.keep_lease_alive(assignment=lease)
    assert abs((expires - (taken + timedelta(minutes=30))).total_seconds()) < 1


def test_a_worker_who_stops_after_saved_holds_the_next_unit_no_longer_than_the_idle_limit(settings):
    # "Saved, here is the next task": the next unit is leased at once, to someone who may have left.
    settings.LEASE_IDLE_MINUTES = 2
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 2)
    stopped = WorkerFactory()
    first = queue.next_assignment(worker=stopped, stage=Stage.INSTRUCTION_GENERATION)
    answers.mark_submitted(first)
    left_behind = queue.next_assignment(worker=stopped, stage=Stage.INSTRUCTION_GENERATION)
    assert left_behind.lease_expires_at <= timezone.now() + timedelta(minutes=2)
    Assignment.objects.filter(pk=left_behind.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    other = queue.next_assignment(worker=WorkerFactory(), stage=Stage.INSTRUCTION_GENERATION)
    assert other.unit_id == left_behind.unit_id


def test_a_heartbeat_after_the_slot_went_to_someone_else_says_so(worker):
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 1)
    lease = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    Assignment.objects.filter(pk=lease.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    queue.next_assignment(worker=WorkerFactory(), stage=Stage.INSTRUCTION_GENERATION)
    with pytest.raises(AnnotationError, match="went to someone else"):
        queue.keep_lease_alive(assignment=lease)


def test_returned_unit_is_free_for_someone_else(worker):
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 1)
    first = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    assert leases.return_assignment(assignment=first)
    assert queue.next_assignment(worker=WorkerFactory(), stage=Stage.INSTRUCTION_GENERATION)


def _verification_unit(*, instruction_author=None, caption_author=None):
    instance = InstanceFactory(author=instruction_author)
    caption = CaptionFactory(instance=instance, author=caption_author)
    reference = ReferenceFactory(instance=instance, caption=caption)
    launch(instance.family, Stage.VERIFICATION)
    return WorkUnit.objects.create(stage=Stage.VERIFICATION, key=f"reference-{reference.pk}",
                                   family=instance.family, instance=instance, reference=reference)


def test_worker_never_verifies_an_instruction_they_wrote(worker):
    _verification_unit(instruction_author=worker)
    assert queue.next_assignment(worker=worker, stage=Stage.VERIFICATION) is None
    assert queue.next_assignment(worker=WorkerFactory(), stage=Stage.VERIFICATION) is not None


def test_worker_never_verifies_a_caption_they_wrote(worker):
    _verification_unit(caption_author=worker)
    assert queue.next_assignment(worker=worker, stage=Stage.VERIFICATION) is None


def test_late_submission_is_refused_once_the_slot_went_to_someone_else(worker):
    unit = _verification_unit()
    mine = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
    Assignment.objects.filter(pk=mine.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert queue.next_assignment(worker=WorkerFactory(), stage=Stage.VERIFICATION).unit == unit
    with pytest.raises(AnnotationError, match="went to someone else"):
        submit_verification(assignment_id=mine.pk, worker=worker, is_correct=True)


def test_late_submission_is_accepted_while_the_slot_is_free(worker):
    _verification_unit()
    mine = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
    Assignment.objects.filter(pk=mine.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert submit_verification(assignment_id=mine.pk, worker=worker, is_correct=True).is_correct


def test_submission_by_another_worker_is_refused(worker):
    _verification_unit()
    mine = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
    with pytest.raises(AnnotationError, match="someone else"):
        submit_verification(assignment_id=mine.pk, worker=WorkerFactory(), is_correct=True)


def test_given_unit_is_leased_and_a_reload_resumes_it(worker):
    unit, = make_units(FamilyFactory(), Stage.CAPTION, 1)
    first = queue.lease_unit(worker=worker, unit=unit)
    assert queue.lease_unit(worker=worker, unit=unit).pk == first.pk


def test_given_unit_with_no_room_is_refused(worker):
    unit, = make_units(FamilyFactory(), Stage.CAPTION, 1)
    queue.lease_unit(worker=WorkerFactory(), unit=unit)
    with pytest.raises(AnnotationError, match="not available"):
        queue.lease_unit(worker=worker, unit=unit)


def test_own_expired_lease_on_a_given_unit_is_renewed(worker):
    unit, = make_units(FamilyFactory(), Stage.CAPTION, 1)
    first = queue.lease_unit(worker=worker, unit=unit)
    Assignment.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    renewed = queue.lease_unit(worker=worker, unit=unit)
    assert renewed.pk == first.pk and renewed.lease_expires_at > timezone.now()


def test_a_lease_and_a_held_lease_come_with_their_units_images_in_page_order(worker, django_assert_num_queries):
    family = FamilyFactory(is_multi_image=True)
    instance = InstanceFactory(family=family, image_count=0)
    # Stored out of page order, so that only the positions can put them right.
    images = {position: ImageAssetFactory() for position in (2, 0, 1)}
    for position, image in images.items():
        InstanceImage.objects.create(instance=instance, image=image, position=position)
    launch(family, Stage.CAPTION)
    WorkUnit.objects.create(stage=Stage.CAPTION, key="k", family=family, instance=instance)
    in_page_order = [images[position].url for position in range(3)]

    leased = queue.next_assignment(worker=worker, stage=Stage.CAPTION)
    with django_assert_num_queries(0):
        assert [image.url for image in leased.unit.instance.ordered_images()] == in_page_order
        assert not any(image.file for image in leased.unit.instance.ordered_images())
    held = queue.next_assignment(worker=worker, stage=Stage.CAPTION)  # a reload: the lease it holds
    assert held == leased
    with django_assert_num_queries(0):
        assert [image.licence for image in held.unit.instance.ordered_images()] == ["CC BY 2.0"] * 3
        assert [image.url for image in held.unit.instance.ordered_images()] == in_page_order


def test_a_unit_whose_instance_has_no_image_yet_leases_with_an_empty_gallery(worker):
    family = FamilyFactory()
    instance = InstanceFactory(family=family, image_count=0)
    launch(family, Stage.CAPTION)
    WorkUnit.objects.create(stage=Stage.CAPTION, key="k", family=family, instance=instance)
    leased = queue.next_assignment(worker=worker, stage=Stage.CAPTION)
    assert leased.unit.instance.ordered_images() == []


def test_leasing_again_in_one_transaction_after_a_submit_gives_the_next_unit(worker):
    family = FamilyFactory()
    units = make_units(family, Stage.INSTRUCTION_GENERATION, 2)
    first = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    answers.mark_submitted(first)
    second = queue.next_assignment(worker=worker, stage=Stage.INSTRUCTION_GENERATION)
    assert [first.unit, second.unit] == units


def test_locking_a_worker_for_a_lease_outside_a_transaction_is_refused(transactional_db):
    from django.db.transaction import TransactionManagementError

    worker = WorkerFactory()
    with pytest.raises(TransactionManagementError):
        queue.locked_for_leasing(Worker.objects.filter(pk=worker.pk))


def _worker_locks(captured):
    return [query["sql"] for query in captured
            if query["sql"].startswith('SELECT "annotation_worker"') and "FOR UPDATE" in query["sql"]]


def test_a_worker_locked_for_leasing_is_not_locked_again_but_a_lock_rolled_back_is(worker):
    make_units(FamilyFactory(), Stage.INSTRUCTION_GENERATION, 2)
    with transaction.atomic():
        locked = queue.locked_for_leasing(Worker.objects.filter(pk=worker.pk))
        with CaptureQueriesContext(connection) as leasing:
            queue.next_assignment(worker=locked, stage=Stage.INSTRUCTION_GENERATION)
    assert _worker_locks(leasing) == []

    with transaction.atomic():
        try:
            with transaction.atomic():
                locked = queue.locked_for_leasing(Worker.objects.filter(pk=worker.pk))
                raise RuntimeError("the savepoint that took the lock rolls back, and the lock with it")
        except RuntimeError:
            pass
        with CaptureQueriesContext(connection) as leasing:
            queue.next_assignment(worker=locked, stage=Stage.INSTRUCTION_GENERATION)
    assert len(_worker_locks(leasing)) == 1
