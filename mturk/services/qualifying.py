"""A stage's qualification on MTurk: a worker who passed the stage's test here
(annotation/workforce/qualifications.py) is granted the stage's MTurk qualification type, so that
MTurk lets them accept its HITs."""

import logging

from annotation.models import Worker, WorkerQualification
from mturk import client as mturk_client
from mturk.exceptions import PlatformError
from mturk.models import AuditLog
from mturk.platforms.mturk import ensure_mturk_qualification_type
from mturk.services.audit import audited

logger = logging.getLogger(__name__)


def grant_mturk_qualification(granted):
    """Associate the stage's MTurk qualification with a qualified MTurk worker, once; a failure is
    retried by the periodic platform job (push_pending_mturk_qualifications)."""
    worker, qualification = granted.worker, granted.qualification
    if (worker.platform != Worker.Platform.MTURK or granted.mturk_granted
            or granted.status != WorkerQualification.Status.QUALIFIED):
        return False
    try:
        with audited(action=AuditLog.Action.QUALIFY, worker=worker,
                     request={"qualification": qualification.name}):
            params = {
                "QualificationTypeId": ensure_mturk_qualification_type(qualification),
                "WorkerId": worker.external_id,
                "IntegerValue": int(granted.test_score * 100),
                "SendNotification": True,
            }
            mturk_client.call("associate_qualification_with_worker", **params)
    except PlatformError as error:
        logger.warning("MTurk qualification for %s not granted yet: %s", worker, error)
        return False
    WorkerQualification.objects.filter(pk=granted.pk).update(mturk_granted=True)
    return True


def push_pending_mturk_qualifications():
    if not mturk_client.credentials_found():
        # Nothing could reach MTurk; the grants wait here, and the study pages say what to set.
        return 0
    pending = WorkerQualification.objects.filter(
        mturk_granted=False, status=WorkerQualification.Status.QUALIFIED,
        worker__platform=Worker.Platform.MTURK).select_related("worker", "qualification")
    return sum(grant_mturk_qualification(granted) for granted in pending)
