"""Platform claims on a lease: which platform assignment (MTurk's assignmentId and hitId, a study's
participant session) a worker's lease on a unit belongs to.

A worker id or assignment id in a URL is a claim anybody can make. The first lease binds the pair
it arrived with to the assignment, and a later claim that disagrees is refused (`ClaimConflict`)
until the platform confirms it (mturk/identity.py); leasing itself is annotation/crowdwork/queue.py's.
"""

from django.db.models import Q

from annotation.exceptions import AnnotationError
from annotation.models import Assignment


class ClaimConflict(AnnotationError):
    """A platform claim that disagrees with the (assignment id, task id) pair bound at first load.

    The caller may check the claim with the platform and, if it holds, lease again with
    `rebind=True`; until then nothing is leased and nothing stored changes.
    """


def binding_conflict(*, platform, worker, unit, platform_assignment_id, platform_listing_id):
    """Why a claim of (platform_assignment_id, platform_listing_id) for `worker` (None: a worker id
    we have never seen) on `unit` disagrees with the pairs bound at first load, or "" when not."""
    mine = Q(unit=unit, worker=worker) if worker is not None else Q(pk__in=[])
    bound = Assignment.objects.filter(
        mine | Q(platform_assignment_id=platform_assignment_id, worker__platform=platform)
    ).values_list("worker_id", "unit_id", "platform_assignment_id", "platform_listing_id")
    for worker_id, unit_id, bound_assignment_id, bound_task_id in bound:
        if worker is None or worker_id != worker.pk:
            return "This assignment is already bound to another worker."
        if unit_id != unit.pk:
            return "This assignment belongs to another task."
        if bound_assignment_id and (bound_assignment_id, bound_task_id) != (
            platform_assignment_id, platform_listing_id
        ):
            return "This task is already open for you under another assignment."
    return ""


def check_claim(*, worker, unit, platform_assignment_id, platform_listing_id, rebind):
    """Raise ClaimConflict for a claim that disagrees with the pair bound at first load; with
    `rebind` (the platform confirmed the claim) free the slot of whoever held it before instead."""
    if not rebind:
        conflict = binding_conflict(platform=worker.platform, worker=worker, unit=unit,
                                    platform_assignment_id=platform_assignment_id,
                                    platform_listing_id=platform_listing_id)
        if conflict:
            raise ClaimConflict(conflict)
        return
    # The platform has confirmed the assignment is this worker's now, so whoever held it before
    # returned it there: their unsubmitted lease gives its slot back at once.
    Assignment.objects.filter(
        platform_assignment_id=platform_assignment_id, worker__platform=worker.platform,
        status=Assignment.Status.LEASED,
    ).exclude(worker=worker).update(status=Assignment.Status.RETURNED)


def bind_claim(assignment, *, platform_assignment_id, platform_listing_id):
    """Record on the lease the platform pair it is worked under (checked by `check_claim`)."""
    if not platform_assignment_id or (assignment.platform_assignment_id, assignment.platform_listing_id) == (
        platform_assignment_id, platform_listing_id
    ):
        return
    assignment.platform_assignment_id = platform_assignment_id
    assignment.platform_listing_id = platform_listing_id
    assignment.save(update_fields=["platform_assignment_id", "platform_listing_id"])
