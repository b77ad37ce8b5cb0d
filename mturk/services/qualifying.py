"""A stage's qualification on the platforms that have their own (MTurk's qualification types): a
worker who passed the stage's test here (annotation/workforce/qualifications.py) is granted it
there too, so that the platform lets them accept its tasks. The `mturk_granted` flag and the job
names keep MTurk's name, the one platform that has such qualifications."""

import logging

from annotation.models import WorkerQualification
from mturk.exceptions import PlatformError
from mturk.models import AuditLog
from mturk.platforms import backend_class, backend_classes, get_backend
from mturk.services.audit import audited

logger = logging.getLogger(__name__)


def grant_mturk_qualification(granted):
    """Associate the stage's MTurk qualification with a qualified MTurk worker, once; a failure is
    retried by the periodic platform job (push_pending_mturk_qualifications)."""
    worker, qualification = granted.worker, granted.qualification
    backend = backend_class(worker.platform)
    if (not backend.grants_qualifications or granted.mturk_granted
            or granted.status != WorkerQualification.Status.QUALIFIED):
        return False
    try:
        with audited(action=AuditLog.Action.QUALIFY, worker=worker,
                     request={"qualification": qualification.name}):
            backend().grant_qualification(granted)
    except PlatformError as error:
        logger.warning("%s qualification for %s not granted yet: %s", backend.label, worker, error)
        return False
    WorkerQualification.objects.filter(pk=granted.pk).update(mturk_granted=True)
    return True


def push_pending_mturk_qualifications():
    # A platform whose credentials are unset could not be reached; its grants wait here, and the
    # study pages say what to set.
    reachable = [platform for platform in qualifying_platforms() if not get_backend(platform).missing_credentials()]
    if not reachable:
        return 0
    pending = WorkerQualification.objects.filter(
        mturk_granted=False, status=WorkerQualification.Status.QUALIFIED,
        worker__platform__in=reachable).select_related("worker", "qualification")
    return sum(grant_mturk_qualification(granted) for granted in pending)


def qualifying_platforms():
    """The platforms whose workers are granted a platform qualification on passing our test."""
    return [platform for platform, backend in backend_classes().items() if backend.grants_qualifications]
