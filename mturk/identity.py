"""Whether a worker who arrives by a platform link is who the link says (DESIGN: "MTurk's worker
side"). A worker id, participant id or assignment id in a URL is a claim anybody can type; these
functions check a claim against the platform's own record before it gets anything of ours.

Every refusal is an IdentityRefused whose message is for the claimant; nothing is written here.
"""

import re
from dataclasses import dataclass

from annotation.crowdwork.platform_claims import binding_conflict
from annotation.crowdwork.standing import platform_worker
from annotation.exceptions import WorkerFacingError
from annotation.models import Assignment, Worker
from crowdbench import shared_cache
from crowdbench.security import mturk_submit_origin
from mturk.exceptions import PlatformError
from mturk.links import valid_platform_id
from mturk.models import Hit, Submission
from mturk.platforms import backend_class, get_backend, per_unit_platforms


class IdentityRefused(WorkerFacingError):
    """A claim the platform does not confirm (or that cannot be checked): the claimant gets nothing."""


MTURK_NOT_CONFIRMED = (
    "MTurk does not confirm that this assignment is yours, so this task cannot be opened here. "
    "If you accepted this HIT on MTurk, please return it there; nothing was recorded for you."
)


MTURK_PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"


class NotOnMTurk(IdentityRefused):
    """A HIT link for a unit we never published as that HIT: nothing of it is shown."""

    def __init__(self):
        super().__init__("This task is not published on MTurk. Please open it from your platform.")


class IncompleteHitLink(IdentityRefused):
    def __init__(self):
        super().__init__("This task link is incomplete. Please open it again from MTurk.")


@dataclass(frozen=True)
class HitArrival:
    """What MTurk's ExternalQuestion link says: a preview, or an accepted assignment of a worker."""

    hit_id: str
    #: The platform the HIT was published on.
    platform: str
    assignment_id: str = ""
    worker_id: str = ""
    #: The MTurk origin the finished work is posted back to (sandbox or production).
    submit_origin: str = ""

    @property
    def preview(self):
        return not self.worker_id


def hit_arrival(unit, params):
    """The HitArrival of a request's query for `unit`. Only units we published as MTurk HITs are
    opened this way, previews included: Prolific, Connect and in-house work is never opened by a
    unit id and a made-up HIT id. Raises NotOnMTurk or IncompleteHitLink."""
    hit_id = params.get("hitId", "")
    platform = valid_platform_id(hit_id) and Hit.objects.filter(
        unit=unit, hit_id=hit_id, study__platform__in=per_unit_platforms()).values_list(
        "study__platform", flat=True).first()
    if not platform:
        raise NotOnMTurk()
    assignment_id = params.get("assignmentId", "")
    worker_id = params.get("workerId", "").strip()
    if assignment_id == MTURK_PREVIEW_ASSIGNMENT or not worker_id:
        return HitArrival(hit_id=hit_id, platform=platform)
    submit_origin = mturk_submit_origin(params.get("turkSubmitTo", ""))
    if not (submit_origin and valid_platform_id(worker_id) and valid_platform_id(assignment_id)):
        raise IncompleteHitLink()
    return HitArrival(hit_id=hit_id, platform=platform, assignment_id=assignment_id, worker_id=worker_id,
                      submit_origin=submit_origin)


def admit_mturk_worker(*, unit, arrival):
    """(worker, rebind) for an accepted HitArrival on `unit`.

    The (assignmentId, workerId) pair is fixed at first load; any other claim is checked with MTurk
    (GetAssignment) before the claimant gets a Worker row, a lease or a look at anybody's work, and
    ``rebind`` says the queue may move the lease to the confirmed pair. Raises IdentityRefused.
    """
    worker = Worker.objects.filter(platform=arrival.platform, external_id=arrival.worker_id).first()
    rebind = bool(binding_conflict(platform=arrival.platform, worker=worker, unit=unit,
                                   platform_assignment_id=arrival.assignment_id,
                                   platform_listing_id=arrival.hit_id))
    if rebind:
        confirm_assignment(platform=arrival.platform, assignment_id=arrival.assignment_id,
                           worker_id=arrival.worker_id, hit_id=arrival.hit_id)
    return worker or platform_worker(arrival.platform, arrival.worker_id), rebind


def confirm_assignment(*, platform, assignment_id, worker_id, hit_id):
    """Ask the platform (MTurk: GetAssignment) whether `assignment_id` is `worker_id`'s, on HIT
    `hit_id`.

    MTurk answers only for assignments it holds as Submitted, Approved or Rejected, so an
    assignment still being worked on cannot be confirmed and the claim is refused: that is the
    price of never handing one worker's task to somebody who typed their id.
    """
    try:
        record = get_backend(platform).confirm_assignment(assignment_id=assignment_id, worker_id=worker_id,
                                                          listing_id=hit_id)
    except PlatformError as error:
        raise IdentityRefused(MTURK_NOT_CONFIRMED) from error
    if record is None:
        raise IdentityRefused(MTURK_NOT_CONFIRMED)
    return record


_PATH_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
STUDY_NOT_CONFIRMED = (
    "This participant id has already started this work in another browser. Please continue in "
    "the browser where you started; if you cannot, message the researchers through your "
    "platform. Nothing was shown or recorded here."
)


def confirm_participant(*, study, participant_id, platform_session_id):
    """Ask the study's platform whether this session of the study is this participant's
    (Backend.confirms_participant). Raises IdentityRefused when it is not, or cannot be asked.
    """
    if not participant_confirmed(study=study, participant_id=participant_id, platform_session_id=platform_session_id):
        raise IdentityRefused(STUDY_NOT_CONFIRMED)


def participant_confirmed(*, study, participant_id, platform_session_id, remember_seconds=0):
    """Whether the study's platform confirms that this session of the study is this participant's
    (Backend.confirms_participant); False when it cannot be asked. A yes is remembered on the shared
    cache for `remember_seconds`, so that each next task of a session does not ask again.
    """
    if not (_PATH_SAFE.match(platform_session_id or "") and _PATH_SAFE.match(study.external_id or "")):
        # Both go into the platform's URL path: nothing but plain id characters.
        return False
    backend = backend_class(study.platform)
    key = f"crowdbench:new-study-session:{study.pk}:{participant_id}:{platform_session_id}"
    if remember_seconds and shared_cache.get(key):
        return True
    try:
        confirmed = bool(backend().confirms_participant(study, participant_id=participant_id,
                                                        session_id=platform_session_id))
    except PlatformError:
        return False
    if confirmed and remember_seconds:
        shared_cache.set(key, True, remember_seconds)
    return confirmed


def assignment_unconfirmed(worker, assignment_id):
    """Whether the worker's platform publishes per unit (MTurk's HITs), where whoever opened a HIT
    first with a worker id is bound to it, and has not confirmed that our assignment
    `assignment_id` (from a worker-page link) is this worker's."""
    return (backend_class(worker.platform).publishes_per_unit
            and not mturk_assignment_confirmed(worker, assignment_id))


def mturk_assignment_confirmed(worker, assignment_id):
    """Whether MTurk confirms that our assignment `assignment_id` (from a worker-page link) is this
    worker's: from a synced submission, from an earlier answer kept in the cache, or by asking
    GetAssignment."""
    assignment = Assignment.objects.filter(pk=assignment_id, worker=worker).exclude(
        platform_assignment_id="").first() if assignment_id is not None else None
    if assignment is None:
        return False
    if Submission.objects.filter(worker=worker, study__platform=worker.platform,
                                 platform_assignment_id=assignment.platform_assignment_id).exists():
        return True
    key = f"crowdbench:mturk-confirmed:{worker.pk}:{assignment.platform_assignment_id}"
    if shared_cache.get(key):
        return True
    try:
        confirm_assignment(platform=worker.platform, assignment_id=assignment.platform_assignment_id,
                           worker_id=worker.external_id, hit_id=assignment.platform_listing_id)
    except IdentityRefused:
        return False
    shared_cache.set(key, True, 24 * 3600)
    return True
