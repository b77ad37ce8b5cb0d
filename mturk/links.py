"""Study links for CloudResearch Connect and Prolific, and the way back at the end.

The study link opens the stage's page (frontend "frontend:stage") with the platform's participant
and study ids; the page stores them on our assignments (platform_task_id = the study's id,
platform_assignment_id = Connect's assignmentId or Prolific's SESSION_ID), and sync keys our
Submission records by the same ids. At the end `completion_redirect` sends the participant back
with the study's completion code.
"""

from django.conf import settings
from django.urls import NoReverseMatch, reverse

from annotation.models import Worker
from annotation.public_urls import public_url
from mturk.exceptions import PlatformError
from mturk.platforms import cloudresearch, prolific

LINK_PARAMETERS = {
    Worker.Platform.CLOUDRESEARCH: cloudresearch.LINK_PARAMETERS,
    Worker.Platform.PROLIFIC: prolific.LINK_PARAMETERS,
}
COMPLETION_URLS = {
    Worker.Platform.CLOUDRESEARCH: "CLOUDRESEARCH_COMPLETE_URL",
    Worker.Platform.PROLIFIC: "PROLIFIC_COMPLETE_URL",
}


def _stage_page(study, request):
    try:
        path = reverse("frontend:stage", args=[study.stage])
    except NoReverseMatch:
        path = f"/work/{study.stage}/"
    return public_url(path, request=request)


def study_link(study, *, request=None):
    """The URL to paste into the platform's study set-up, with its placeholders for the ids: on
    PUBLIC_BASE_URL, or (unset) on the address of the researcher's ``request``."""
    parameters = LINK_PARAMETERS.get(study.platform)
    if parameters is None:
        raise PlatformError(f"{study.get_platform_display()} studies have no study link.")
    query = "&".join(f"{name}={placeholder}" for name, placeholder in parameters.items())
    return f"{_stage_page(study, request)}?{query}"


def completion_redirect(study):
    """Where a participant goes when they are done: the platform, with the completion code."""
    setting = COMPLETION_URLS.get(study.platform)
    if setting is None:
        raise PlatformError(f"{study.get_platform_display()} studies have no completion redirect.")
    if not study.completion_code:
        raise PlatformError(f"Study “{study.name}” has no completion code; set it in the admin.")
    return getattr(settings, setting).format(code=study.completion_code)
