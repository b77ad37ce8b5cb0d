"""The workflow pages' counts kept per family (annotation/collection/workflow_counts.py) equal a count
from scratch after every kind of change that reaches them, however it is made: through a service, a
bulk update, the admin, a delete; and the pages read them in queries that do not grow with the
instances and responses. Random histories of every crowd step check the same after each step
(tests/annotation/test_owed_work_property.py)."""

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.collection import workflow_counts
from annotation.collection.waiting import Waits, waits_for
from annotation.collection.workflow_counts import WORKFLOW, count_again, count_from_scratch, workflow_figures
from annotation.models import (
    REFERENCE_MODEL_NAME,
    Instance,
    InstructionFamily,
    ModelResponse,
    WorkflowCount,
)
from tests.factories import FamilyFactory, InstanceFactory
from tests.kept_counts_support import (
    assert_kept_counts_equal_a_count_from_scratch,
    assert_unmarked_counts_equal_a_count_from_scratch,
    assert_workflow_figures_equal_a_count_made_directly,
)
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    arena, waiting = FamilyFactory(), FamilyFactory()
    instances = [verified_instance(family=arena) for _ in range(3)]
    with_responses(instances[0], "model-x", "model-y", REFERENCE_MODEL_NAME)
    with_responses(instances[1], "model-x")
    InstanceFactory(family=waiting, status=Instance.Status.AWAITING_CAPTION)
    InstanceFactory(family=waiting, status=Instance.Status.AWAITING_VERIFICATION)
    # Read once: the counts are kept and no mark is left.
    assert_kept_counts_equal_a_count_from_scratch([WORKFLOW])
    return arena, waiting, instances


CHANGES = {
    "a bulk update of statuses": lambda arena, waiting, instances: Instance.objects.filter(family=arena).update(
        status=Instance.Status.DISCARDED),
    "an instance no longer verified": lambda arena, waiting, instances: Instance.objects.filter(
        pk=instances[0].pk).update(status=Instance.Status.AWAITING_VERIFICATION),
    "an instance verified": lambda arena, waiting, instances: Instance.objects.filter(
        family=waiting, status=Instance.Status.AWAITING_VERIFICATION).update(status=Instance.Status.VERIFIED),
    "an instance moved to another family": lambda arena, waiting, instances: Instance.objects.filter(
        pk=instances[1].pk).update(family=waiting),
    "an instance deleted": lambda arena, waiting, instances: Instance.objects.filter(
        family=waiting, status=Instance.Status.AWAITING_CAPTION).delete(),
    "instances added in bulk": lambda arena, waiting, instances: Instance.objects.bulk_create(
        [Instance(family=waiting, instruction=f"Added {n}.") for n in range(3)]),
    "responses imported in bulk": lambda arena, waiting, instances: ModelResponse.objects.bulk_create(
        [ModelResponse(instance=instance, model_name="model-z", text="An answer.") for instance in instances]),
    "a response deleted": lambda arena, waiting, instances: ModelResponse.objects.filter(
        instance=instances[0], model_name="model-y").delete(),
    "a response renamed": lambda arena, waiting, instances: ModelResponse.objects.filter(
        model_name="model-x").update(model_name="model-x-v2"),
    "a response moved to another instance": lambda arena, waiting, instances: ModelResponse.objects.filter(
        instance=instances[0], model_name="model-y").update(instance=instances[2]),
    "a prediction named as the verified reference": lambda arena, waiting, instances: ModelResponse.objects.filter(
        instance=instances[1]).update(model_name=REFERENCE_MODEL_NAME),
}


@pytest.mark.parametrize("whole", [False, True], ids=["marked instances", "whole families"])
@pytest.mark.parametrize("change", CHANGES)
def test_kept_workflow_counts_equal_a_count_from_scratch_after_each_change_however_made(world, change, whole):
    arena, waiting, instances = world
    before = count_from_scratch(per_instance=True)
    CHANGES[change](arena, waiting, instances)
    assert count_from_scratch(per_instance=True) != before, "the change reaches the workflow counts"
    marked = set(WorkflowCount.objects.filter(stale=True).values_list("family_id", flat=True))
    assert marked
    assert_unmarked_counts_equal_a_count_from_scratch([WORKFLOW])
    # Counted again instance by instance, as after a few decisions, or family by family, as after many.
    count_again(sorted(marked), whole_past=0 if whole else workflow_counts.kept.CHUNK)
    assert_kept_counts_equal_a_count_from_scratch([WORKFLOW])
    assert_workflow_figures_equal_a_count_made_directly([arena, waiting])


def test_a_change_the_workflow_does_not_count_leaves_no_mark(world):
    arena, waiting, instances = world
    Instance.objects.filter(family=arena).update(instruction="Edited.")
    Instance.objects.filter(family=waiting).update(status=F("status"))
    ModelResponse.objects.update(text="Edited.")
    assert not WorkflowCount.objects.filter(stale=True).exists()


def test_responses_deleted_in_the_admin_leave_the_kept_counts_equal_a_count_from_scratch(admin_client, world):
    arena, waiting, instances = world
    one = ModelResponse.objects.filter(model_name="model-y").get()
    page = admin_client.post(reverse("admin:annotation_modelresponse_delete", args=[one.pk]), {"post": "yes"})
    assert page.status_code == 302 and not ModelResponse.objects.filter(pk=one.pk).exists()
    assert WorkflowCount.objects.filter(stale=True, instance=one.instance_id).exists()
    chosen = list(ModelResponse.objects.filter(model_name="model-x").values_list("pk", flat=True))
    page = admin_client.post(reverse("admin:annotation_modelresponse_changelist"),
                             {"action": "delete_selected", "_selected_action": chosen, "post": "yes"})
    assert page.status_code == 302 and not ModelResponse.objects.filter(pk__in=chosen).exists()
    assert_kept_counts_equal_a_count_from_scratch([WORKFLOW])
    assert_workflow_figures_equal_a_count_made_directly([arena, waiting])
    assert workflow_figures(InstructionFamily.objects.filter(pk=arena.pk)).responses == {}


def test_a_tournament_without_families_counts_every_family_s_verified_instances(world):
    arena, waiting, instances = world
    tournament = create_tournament(name="everything", sample=False)
    figures = workflow_figures(InstructionFamily.objects.all())
    assert figures.instances[Instance.Status.VERIFIED] == 3
    assert (figures.response_count, figures.models) == (3, 2)
    assert tournament.families.count() == 0
    assert_workflow_figures_equal_a_count_made_directly([arena, waiting])


def _queries(client, url):
    client.get(url)
    with CaptureQueriesContext(connection) as captured:
        page = client.get(url)
    assert page.status_code == 200
    return len(captured)


def test_the_workflow_pages_read_their_counts_in_queries_that_do_not_grow_with_instances_or_responses(
        admin_client, world):
    arena, waiting, instances = world
    tournament = create_tournament(name="arena", families=[arena], judgements_per_pair=1)
    urls = {"family": reverse("admin:annotation_instructionfamily_workflow", args=[arena.pk]),
            "family status": reverse("admin:annotation_instructionfamily_workflow_status", args=[arena.pk]),
            "tournament": reverse("admin:annotation_tournament_workflow", args=[tournament.pk]),
            "tournament status": reverse("admin:annotation_tournament_workflow_status", args=[tournament.pk])}
    few = {name: _queries(admin_client, url) for name, url in urls.items()}
    for _ in range(5):
        with_responses(verified_instance(family=arena), "model-x", "model-w")
        InstanceFactory(family=arena, status=Instance.Status.DISCARDED)
    assert {name: _queries(admin_client, url) for name, url in urls.items()} == few
    # The session, the user, and the pages' own: one read of the kept counts where three counts were
    # (31 and 15 before they were kept).
    assert max(few["family"], few["family status"]) <= 29, few
    assert max(few["tournament"], few["tournament status"]) <= 13, few


def test_a_read_counts_again_in_queries_that_do_not_grow_with_the_instances_marked(world):
    arena, waiting, instances = world
    families = InstructionFamily.objects.all()
    with CaptureQueriesContext(connection) as captured:
        workflow_figures(families)
    assert len(captured) == 1
    for marked in (1, 3):
        Instance.objects.filter(pk__in=[instance.pk for instance in instances[:marked]]).update(
            status=Instance.Status.DISCARDED)
        with CaptureQueriesContext(connection) as captured:
            workflow_figures(families)
        # The read; the lock, the marks, the parts, the count (two queries), the families' sums, a
        # delete and an insert; the read again; and, in a test's transaction, a savepoint and its release.
        assert len(captured) <= 12
    assert not WorkflowCount.objects.filter(stale=True).exists()


def test_what_instances_wait_for_is_the_same_from_the_kept_counts_as_from_the_instances(world):
    arena, waiting, instances = world
    InstanceFactory(family=arena, status=Instance.Status.AWAITING_REFERENCE)
    InstanceFactory(family=arena, status=Instance.Status.DISCARDED)
    for family in (arena, waiting):
        kept = workflow_figures(InstructionFamily.objects.filter(pk=family.pk)).instances
        assert waits_for(family, instances_by_status=kept).counts() == waits_for(family).counts()
    assert waits_for(arena).counts() == {Waits.DECIDED: 3, Waits.REFERENCE: 1, Waits.DISCARDED: 1}
    assert set(waits_for(waiting).instances) == set(waiting.instances.values_list("pk", flat=True))
