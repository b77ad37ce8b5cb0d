"""Whether a worker who arrives by a platform link is who the link says (DESIGN: "MTurk's worker
side"). A worker id, participant id or assignment id in a URL is a claim anybody can type; these
functions check a claim against the platform's own record before it gets anything of ours.

Every refusal is an IdentityRefused whose message is for the claimant; nothing is written here.
"""

import re

from annotation.exceptions import AnnotationError
from annotation.models import Worker
from mturk import client as mturk_client
from mturk.exceptions import PlatformError
from mturk.models import Hit


class IdentityRefused(AnnotationError):
    """A claim the platform does not confirm (or that cannot be checked): the claimant gets nothing."""


MTURK_NOT_CONFIRMED = (
    "MTurk does not confirm that this assignment is yours, so this task cannot be opened here. "
    "If you accepted this HIT on MTurk, please return it there; nothing was recorded for you."
)


def mturk_hit_of_unit(unit, hit_id):
    """The HIT `hit_id` if it is one we published for this unit, else None."""
    if not hit_id:
        return None
    return Hit.objects.filter(unit=unit, hit_id=hit_id, study__platform=Worker.Platform.MTURK).first()


def unit_published_on_mturk(unit):
    return Hit.objects.filter(unit=unit, study__platform=Worker.Platform.MTURK).exclude(hit_id="").exists()


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
