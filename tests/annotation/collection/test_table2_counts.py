"""Table 2's counts kept per family (annotation/collection/table2_counts.py) equal a count from
scratch after every kind of change that reaches them, however it is made: through a service, a
bulk update, a delete. Random histories of every crowd step check the same after each step
(tests/annotation/test_owed_work_property.py)."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.collection import progress
from annotation.collection.table2_counts import CHUNK, count_again, count_from_scratch, kept_counts
from annotation.models import (
    Assignment,
    Instance,
    InstanceImage,
    InstructionFamily,
    Reference,
    Stage,
    Table2Count,
    WorkState,
    WorkUnit,
)
from tests.factories import (
    CaptionFactory,
    FamilyFactory,
    ImageAssetFactory,
    InstanceFactory,
    ReferenceFactory,
    WorkerFactory,
)
from tests.kept_counts_support import (
    assert_kept_counts_equal_a_count_from_scratch,
    assert_unmarked_counts_equal_a_count_from_scratch,
)

pytestmark = pytest.mark.django_db


def _decided(family, verdict=Reference.Verdict.CORRECT, *, images=None, caption=None):
    status = Instance.Status.VERIFIED if verdict == Reference.Verdict.CORRECT else Instance.Status.DISCARDED
    instance = InstanceFactory(family=family, status=status, image_count=images)
    return ReferenceFactory(instance=instance, verdict=verdict, caption=caption, decided_at=timezone.now(),
                            decided_by=Reference.DecidedBy.VOTES, problem_in_response=verdict != "correct")


def _captioned(family):
    """A decided reference written from a caption a worker's submitted answer wrote."""
    instance = InstanceFactory(family=family, status=Instance.Status.VERIFIED)
    unit = WorkUnit.objects.create(stage=Stage.CAPTION, key=f"caption-{instance.pk}", family=family,
                                   instance=instance)
    answer = Assignment.objects.create(unit=unit, worker=WorkerFactory(), status=Assignment.Status.SUBMITTED,
                                       lease_expires_at=timezone.now(), submitted_at=timezone.now())
    caption = CaptionFactory(instance=instance, assignment=answer)
    return ReferenceFactory(instance=instance, caption=caption, verdict=Reference.Verdict.CORRECT,
                            decided_at=timezone.now(), decided_by=Reference.DecidedBy.VOTES)


def _rejected_caption(instance):
    caption = _captioned(instance.family).caption
    Assignment.objects.filter(caption=caption).update(work_state=WorkState.REJECTED)
    return caption


@pytest.fixture
def world():
    single, multi = FamilyFactory(), FamilyFactory(is_multi_image=True)
    references = [_decided(single), _decided(single, Reference.Verdict.INCORRECT), _decided(multi),
                  _decided(single, images=2), _captioned(single)]
    # Read once: the counts are kept and no mark is left.
    assert_kept_counts_equal_a_count_from_scratch()
    return single, multi, references


CHANGES = {
    "a bulk update of verdicts": lambda single, multi, refs: Reference.objects.filter(
        instance__family=single).update(verdict=Reference.Verdict.INCORRECT, problem_in_caption=True),
    "a reference decided by a reviewer": lambda single, multi, refs: Reference.objects.filter(pk=refs[0].pk).update(
        decided_by=Reference.DecidedBy.REVIEWER),
    "a decided reference deleted": lambda single, multi, refs: refs[1].delete(),
    # Counted whole, the deleted instance's part was once missed (an inner join to the instance).
    "an instance deleted with its references": lambda single, multi, refs: Instance.objects.filter(
        pk=refs[1].instance_id).delete(),
    "a decided reference added": lambda single, multi, refs: _decided(multi, Reference.Verdict.INCORRECT),
    "a reference reopened": lambda single, multi, refs: Reference.objects.filter(pk=refs[2].pk).update(
        verdict=Reference.Verdict.PENDING),
    "an instance no longer verified": lambda single, multi, refs: Instance.objects.filter(
        pk=refs[0].instance_id).update(status=Instance.Status.AWAITING_VERIFICATION),
    "an instance moved to another family": lambda single, multi, refs: Instance.objects.filter(
        pk=refs[0].instance_id).update(family=multi),
    "an image added": lambda single, multi, refs: InstanceImage.objects.create(
        instance_id=refs[0].instance_id, image=ImageAssetFactory(), position=1),
    "an image removed": lambda single, multi, refs: InstanceImage.objects.filter(
        instance_id=refs[3].instance_id, position=1).delete(),
    "a family made multi-image": lambda single, multi, refs: InstructionFamily.objects.filter(pk=single.pk).update(
        is_multi_image=True),
    "a caption's answer rejected": lambda single, multi, refs: Assignment.objects.filter(
        caption__pk=refs[4].caption_id).update(work_state=WorkState.REJECTED),
    "a reference moved onto a rejected caption": lambda single, multi, refs: Reference.objects.filter(
        pk=refs[0].pk).update(caption=_rejected_caption(refs[0].instance)),
}


@pytest.mark.parametrize("whole", [False, True], ids=["marked instances", "whole families"])
@pytest.mark.parametrize("change", CHANGES)
def test_kept_counts_equal_a_count_from_scratch_after_each_change_however_made(world, change, whole):
    single, multi, references = world
    before = count_from_scratch()
    CHANGES[change](single, multi, references)
    assert count_from_scratch() != before, "the change reaches Table 2"
    marked = set(Table2Count.objects.filter(stale=True).values_list("family_id", flat=True))
    assert marked
    assert_unmarked_counts_equal_a_count_from_scratch()
    # Counted again instance by instance, as after a few decisions, or family by family, as after many.
    count_again(sorted(marked), whole_past=0 if whole else CHUNK)
    assert_kept_counts_equal_a_count_from_scratch()


def test_a_rejected_caption_answer_accepted_again_counts_its_reference_again(world):
    *_, references = world
    answer = Assignment.objects.filter(caption__pk=references[4].caption_id)
    answer.update(work_state=WorkState.REJECTED)
    assert_kept_counts_equal_a_count_from_scratch()
    answer.update(work_state=WorkState.ACCEPTED)
    assert_kept_counts_equal_a_count_from_scratch()
    assert progress.table2().overall.references == 5


def test_a_change_table2_does_not_count_leaves_no_mark(world):
    single, *_ = world
    ReferenceFactory(instance=InstanceFactory(family=single))
    Instance.objects.filter(family=single, status=Instance.Status.AWAITING_CAPTION).update(
        status=Instance.Status.AWAITING_REFERENCE)
    Reference.objects.filter(verdict=Reference.Verdict.CORRECT).update(text="Edited.")
    assert not Table2Count.objects.filter(stale=True).exists()


def test_table2_is_read_from_the_kept_counts_in_one_query_once_counted(world):
    with CaptureQueriesContext(connection) as captured:
        progress.table2()
    assert len(captured) == 1
    # A marked instance is counted again, in queries that do not grow with the instances marked: the
    # read; the lock, the marks, the instances' parts, their count, their families' sums, a delete
    # and an insert; the read again; and, in a test's transaction, a savepoint and its release.
    for marked in (1, 3):
        Reference.objects.filter(pk__in=[reference.pk for reference in world[2][:marked]]).update(
            problem_in_caption=True, decided_by=Reference.DecidedBy.REVIEWER)
        with CaptureQueriesContext(connection) as captured:
            progress.table2()
        assert len(captured) <= 11
    assert kept_counts(InstructionFamily.objects.all()) and not Table2Count.objects.filter(stale=True).exists()


def test_the_table2_page_reads_the_kept_counts_in_a_fixed_number_of_queries(admin_client, world):
    url = reverse("admin:annotation_instructionfamily_table2")
    counted = {}
    for query in ({}, {"family": world[0].pk}):
        admin_client.get(url, query)
        with CaptureQueriesContext(connection) as few:
            admin_client.get(url, query)
        for _ in range(5):
            _decided(FamilyFactory(), images=2)
        admin_client.get(url, query)
        with CaptureQueriesContext(connection) as more:
            page = admin_client.get(url, query)
        assert page.status_code == 200
        assert len(more) == len(few)
        counted[tuple(query)] = len(few)
    # The session, the user, the families to choose from (and the one chosen), the kept counts.
    assert counted[()] <= 4 and counted[("family",)] <= 5


@pytest.mark.parametrize("first", ["left", "joined"])
def test_an_instance_moved_between_families_counted_whole_apart_is_counted_once(world, first):
    single, multi, references = world
    Instance.objects.filter(pk=references[0].instance_id).update(family=multi)
    for family in ([single, multi] if first == "left" else [multi, single]):
        count_again([family.pk], whole_past=0)
        assert_unmarked_counts_equal_a_count_from_scratch()
    assert_kept_counts_equal_a_count_from_scratch()


def test_table2_in_a_read_only_transaction_counts_changed_families_from_scratch_and_writes_nothing(world):
    """As a snapshot's build reads it (annotation/datasets/snapshots.py)."""
    single, multi, references = world
    Reference.objects.filter(pk=references[0].pk).update(decided_by=Reference.DecidedBy.REVIEWER)
    marks = list(Table2Count.objects.filter(stale=True).values_list("pk", flat=True))
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION READ ONLY")
        table = progress.table2(keep=False)
        transaction.set_rollback(True)
    assert dict(table.decided_by)["A reviewer's adjudication"] == 1
    assert list(Table2Count.objects.filter(stale=True).values_list("pk", flat=True)) == marks
    assert progress.table2() == table
