"""Study links for CloudResearch Connect and Prolific: the link a researcher pastes into the
platform, reading it when a participant arrives, and the way back at the end.

The study link opens the stage's page (frontend "frontend:stage") with the platform's participant,
study and session ids, named as the platform's backend declares them (``link_parameters``). Our
assignments store the study's id as platform_listing_id and the session's as platform_assignment_id,
and sync keys our Submission records by the same ids. At the end `completion` sends the participant
back with the study's completion code.
"""

import re
from dataclasses import dataclass

from django.conf import settings
from django.urls import NoReverseMatch, reverse

from annotation.exceptions import WorkerFacingError
from annotation.public_urls import public_url
from mturk.exceptions import PlatformError
from mturk.platforms import backend_classes

# What a platform id may look like (MTurk's, Connect's and Prolific's are all far narrower); anything
# else in a link is a typo or an attack and is never looked up or stored.
_PLATFORM_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def valid_platform_id(value):
    return bool(_PLATFORM_ID.match(value or ""))


def _study_links():
    """{platform: StudyLinkParameters} of the platforms whose participants arrive by a study link."""
    return {platform: backend.link_parameters for platform, backend in backend_classes().items()
            if backend.link_parameters is not None}


def _stage_page(study, request):
    try:
        path = reverse("frontend:stage", args=[study.stage])
    except NoReverseMatch:
        path = f"/work/{study.stage}/"
    return public_url(path, request=request)


def study_link(study, *, request=None):
    """The URL to paste into the platform's study set-up, with its placeholders for the ids: on
    PUBLIC_BASE_URL, or (unset) on the address of the researcher's ``request``."""
    parameters = _study_links().get(study.platform)
    if parameters is None:
        raise PlatformError(f"{study.get_platform_display()} studies have no study link.")
    return f"{_stage_page(study, request)}?{parameters.query()}"


class IncompleteLink(WorkerFacingError):
    """A study link whose participant or study id is missing or malformed."""

    def __init__(self):
        super().__init__("This study link is incomplete. Please open it again from your platform.")


@dataclass(frozen=True)
class StudyArrival:
    """Who a study link says has arrived, and from which study; a claim until checked."""

    platform: str
    participant_id: str
    study_id: str
    #: Empty when the link carried none, or one that is not a platform id.
    session_id: str


def study_arrival(params):
    """The StudyArrival a request's query names, None when it is no study link, or IncompleteLink."""
    for platform, parameters in _study_links().items():
        ids = parameters.read(params)
        if ids is None:
            continue
        participant_id, study_id, session_id = ids
        if not (valid_platform_id(participant_id) and valid_platform_id(study_id)):
            raise IncompleteLink()
        return StudyArrival(platform=platform, participant_id=participant_id, study_id=study_id,
                            session_id=session_id if valid_platform_id(session_id) else "")
    return None


@dataclass(frozen=True)
class Completion:
    """What a participant who is done is shown: the code, and the platform's page to enter it on."""

    code: str
    return_url: str
    platform: str


def _return_page(study):
    """The platform's page a participant enters the code on, with {code} in it; "" if none."""
    backend = backend_classes().get(study.platform)
    setting = backend.completion_url_setting if backend else ""
    return getattr(settings, setting) if setting else ""


def completion(study):
    """The study's Completion; without a code or a platform page, the parts that are missing are
    empty and the page says to message the researchers."""
    page, code = _return_page(study), study.completion_code
    return Completion(code=code, return_url=page.format(code=code) if page and code else "",
                      platform=study.get_platform_display())


def completion_redirect(study):
    """Where a participant goes when they are done, for the researcher to check in the admin;
    raises PlatformError when the study cannot send anybody back."""
    page = _return_page(study)
    if not page:
        raise PlatformError(f"{study.get_platform_display()} studies have no completion redirect.")
    if not study.completion_code:
        raise PlatformError(f"Study “{study.name}” has no completion code; set it in the admin.")
    return page.format(code=study.completion_code)
