"""Whether a worker who arrives by a platform link is who the link says (DESIGN: "MTurk's worker
side"). A worker id, participant id or assignment id in a URL is a claim anybody can type; these
functions check a claim against the platform's own record before it gets anything of ours.

Every refusal is an IdentityRefused whose message is for the claimant; nothing is written here.
"""

import re
from dataclasses import dataclass

from annotation.crowdwork.platform_claims import binding_conflict
from annotation.exceptions import WorkerFacingError
from annotation.models import Assignment, Worker
from annotation.workforce.standing import platform_worker
from crowdbench import shared_cache
from crowdbench.security import mturk_submit_origin
from mturk import client as mturk_client
from mturk.exceptions import PlatformError
from mturk.links import valid_platform_id
from mturk.models import Hit, Submission


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
    if not (valid_platform_id(hit_id) and Hit.objects.filter(
            unit=unit, hit_id=hit_id, study__platform=Worker.Platform.MTURK).exists()):
        raise NotOnMTurk()
    assignment_id = params.get("assignmentId", "")
    worker_id = params.get("workerId", "").strip()
    if assignment_id == MTURK_PREVIEW_ASSIGNMENT or not worker_id:
        return HitArrival(hit_id=hit_id)
    submit_origin = mturk_submit_origin(params.get("turkSubmitTo", ""))
    if not (submit_origin and valid_platform_id(worker_id) and valid_platform_id(assignment_id)):
        raise IncompleteHitLink()
    return HitArrival(hit_id=hit_id, assignment_id=assignment_id, worker_id=worker_id,
                      submit_origin=submit_origin)


def admit_mturk_worker(*, unit, arrival):
    """(worker, rebind) for an accepted HitArrival on `unit`.

    The (assignmentId, workerId) pair is fixed at first load; any other claim is checked with MTurk
    (GetAssignment) before the claimant gets a Worker row, a lease or a look at anybody's work, and
    ``rebind`` says the queue may move the lease to the confirmed pair. Raises IdentityRefused.
    """
    worker = Worker.objects.filter(platform=Worker.Platform.MTURK, external_id=arrival.worker_id).first()
    rebind = bool(binding_conflict(platform=Worker.Platform.MTURK, worker=worker, unit=unit,
                                   platform_assignment_id=arrival.assignment_id,
                                   platform_listing_id=arrival.hit_id))
    if rebind:
        confirm_mturk_assignment(assignment_id=arrival.assignment_id, worker_id=arrival.worker_id,
                                 hit_id=arrival.hit_id)
    return worker or platform_worker(Worker.Platform.MTURK, arrival.worker_id), rebind


def confirm_mturk_assignment(*, assignment_id, worker_id, hit_id):
    """Ask MTurk (GetAssignment) whether `assignment_id` is `worker_id`'s, on HIT `hit_id`.

    MTurk answers only for assignments it holds as Submitted, Approved or Rejected, so an
    assignment still being worked on cannot be confirmed and the claim is refused: that is the
    price of never handing one worker's task to somebody who typed their id.
    """
    try:
        response = mturk_client.call("get_assignment", AssignmentId=assignment_id)
    except PlatformError as error:
        raise IdentityRefused(MTURK_NOT_CONFIRMED) from error
    record = response.get("Assignment") or {}
    if record.get("WorkerId") != worker_id or record.get("HITId") != hit_id:
        raise IdentityRefused(MTURK_NOT_CONFIRMED)
    return record


_PATH_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
STUDY_NOT_CONFIRMED = (
    "This participant id has already started this work in another browser. Please continue in "
    "the browser where you started; if you cannot, message the researchers through your "
    "platform. Nothing was shown or recorded here."
)


def confirm_participant(*, study, participant_id, platform_session_id):
    """Ask Prolific or CloudResearch Connect whether this session / assignment of the study is
    this participant's: Prolific's SESSION_ID is the submission id, Connect lists the project's
    assignments with their participant. Raises IdentityRefused when it is not, or cannot be asked.
    """
    from mturk.platforms.cloudresearch import ConnectApi
    from mturk.platforms.prolific import ProlificApi

    if not (_PATH_SAFE.match(platform_session_id or "") and _PATH_SAFE.match(study.external_id or "")):
        # Both go into the platform's URL path: nothing but plain id characters.
        raise IdentityRefused(STUDY_NOT_CONFIRMED)
    try:
        if study.platform == Worker.Platform.PROLIFIC:
            item = ProlificApi().request("GET", f"submissions/{platform_session_id}/")
            confirmed = (isinstance(item, dict) and item.get("participant_id") == participant_id
                         and item.get("study_id") == study.external_id)
        elif study.platform == Worker.Platform.CLOUDRESEARCH:
            body = ConnectApi().request("GET", f"assignments/{study.external_id}")
            confirmed = any(
                item.get("assignmentId") == platform_session_id
                and item.get("participantId") == participant_id
                for item in (body.get("assignments") or [] if isinstance(body, dict) else [])
            )
        else:
            confirmed = False
    except PlatformError as error:
        raise IdentityRefused(STUDY_NOT_CONFIRMED) from error
    if not confirmed:
        raise IdentityRefused(STUDY_NOT_CONFIRMED)


def mturk_assignment_confirmed(worker, assignment_id):
    """Whether MTurk confirms that our assignment `assignment_id` (from a worker-page link) is this
    worker's: from a synced submission, from an earlier answer kept in the cache, or by asking
    GetAssignment."""
    assignment = Assignment.objects.filter(pk=assignment_id, worker=worker).exclude(
        platform_assignment_id="").first() if assignment_id is not None else None
    if assignment is None:
        return False
    if Submission.objects.filter(worker=worker, study__platform=Worker.Platform.MTURK,
                                 platform_assignment_id=assignment.platform_assignment_id).exists():
        return True
    key = f"crowdbench:mturk-confirmed:{worker.pk}:{assignment.platform_assignment_id}"
    if shared_cache.get(key):
        return True
    try:
        confirm_mturk_assignment(assignment_id=assignment.platform_assignment_id,
                                 worker_id=worker.external_id, hit_id=assignment.platform_listing_id)
    except IdentityRefused:
        return False
    shared_cache.set(key, True, 24 * 3600)
    return True
