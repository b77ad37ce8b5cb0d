"""What the review tests share: a reviewer, and a worker's verifications done through MTurk HITs and
synced, MTurk stubbed at its wire."""

from decimal import Decimal

from annotation.collection import references, verification
from annotation.crowdwork import queue
from annotation.models import Instance, Reference, Stage, WorkUnit
from mturk.models import CrowdStudy, Hit
from mturk.services import syncing
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, launch
from tests.mturk_wire import assignment, make_researcher


def make_reviewer(*, can_block=True):
    """A reviewer of answers; `can_block`: also a researcher allowed to pay and block workers."""
    from django.contrib.auth.models import Permission

    user = make_researcher("reviewer", can_pay=can_block)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="annotation",
                                                         codename__in=["view_answer", "change_answer"]))
    return type(user).objects.get(pk=user.pk)


def verified_on_mturk(mturk, worker, count=2, family=None):
    """`count` references of `family`, each verified correct by `worker` through an MTurk HIT of
    its own, and synced: (study, the worker's assignments)."""
    family = family or FamilyFactory()
    launch(family, Stage.VERIFICATION)
    study = CrowdStudy.objects.create(platform="mturk", stage=Stage.VERIFICATION, family=family, name="Checks",
                                      title="Check an answer", description="Verify", keywords="image",
                                      reward_usd=Decimal("0.20"))
    leases = []
    for number in range(count):
        instance = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE)
        instance.current_caption = CaptionFactory(instance=instance)
        instance.save()
        reference = references.store_reference(instance=instance, text="Two cups.", source=Reference.Source.MANUAL)
        unit = WorkUnit.objects.get(reference=reference)
        hit_id, assignment_id = f"3HIT{number:018d}", f"3ASSIGN{number:013d}"
        Hit.objects.create(study=study, unit=unit, hit_id=hit_id, status=Hit.Status.OPEN, max_assignments=1,
                           reward_usd=study.reward_usd)
        lease = queue.lease_unit(worker=worker, unit=unit, platform_assignment_id=assignment_id,
                                 platform_listing_id=hit_id)
        verification.submit_verification(assignment_id=lease.pk, worker=worker, is_correct=True, active_seconds=2)
        mturk.expect("list_assignments_for_hit", {"NumResults": 1, "Assignments": [
            assignment(assignment_id=assignment_id, worker_id=worker.external_id, hit_id=hit_id)]})
        leases.append(lease)
    syncing.sync_study(study=study)
    return study, leases


