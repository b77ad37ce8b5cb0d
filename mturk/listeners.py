"""What the crowd platforms do when the domain says something happened: the domain sends its
signals and never calls up into the platforms (DESIGN: mturk uses the domain; the domain does not
use it). Connected once, in MturkConfig.ready."""

from django.dispatch import receiver

from annotation.crowdwork.review import work_reviewed
from annotation.workforce.qualifications import qualification_granted
from crowdbench.jobs import enqueue
from mturk.platforms import backend_class
from mturk.services import reviewing


@receiver(qualification_granted, dispatch_uid="mturk_grant_platform_qualification")
def grant_platform_qualification(sender, *, granted, **kwargs):
    if backend_class(granted.worker.platform).grants_qualifications:
        enqueue("tasks.grant_mturk_qualification", granted.pk)


@receiver(work_reviewed, dispatch_uid="mturk_review_on_platforms")
def review_on_platforms(sender, *, assignments, reviewer, reason, **kwargs):
    """A reviewer's decision, carried to the platforms the work was done on; the lines are theirs."""
    return reviewing.review_on_platforms(assignments=assignments, actor=reviewer, reason=reason)
