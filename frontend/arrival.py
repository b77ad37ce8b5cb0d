"""Who is working: the in-house annotator, or a platform participant arriving with a study link,
bound to this browser, with the platform ids their work is recorded under."""

import re

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from annotation.models import (
    Assignment,
    Worker,
)
from annotation.workforce import workers_with_standing
from mturk import identity
from mturk.models import Submission

MTURK_PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
# Seconds without input after which the active-time clock stops (frontend/static/.../annotator.js).
IDLE_SECONDS = 60
MAX_ACTIVE_SECONDS = 24 * 3600
_PLATFORM_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def local_worker(user, *, stage=None):
    workers = workers_with_standing(stage) if stage else Worker.objects
    worker, _ = workers.get_or_create(
        platform=Worker.Platform.LOCAL, external_id=f"user-{user.pk}", defaults={"user": user}
    )
    return worker


def platform_worker(platform, participant_id):
    worker, _ = Worker.objects.get_or_create(platform=platform, external_id=participant_id)
    return worker


# The study participants this browser arrived as (ids of Worker rows), in a cookie signed with
# the site's secret key: as hard to forge as a session, and read without a database query on
# every next-unit request. Capped, so a shared browser cannot grow it without bound.
PARTICIPANTS_COOKIE = "crowdbench_participants"
_PARTICIPANTS_SALT = "crowdbench.participants"
_MAX_PARTICIPANTS = 20


def _browser_participants(request):
    if not hasattr(request, "browser_participants"):
        signed = request.get_signed_cookie(PARTICIPANTS_COOKIE, default="", salt=_PARTICIPANTS_SALT,
                                           max_age=settings.SESSION_COOKIE_AGE)
        request.browser_participants = [int(pk) for pk in signed.split(",") if pk.isdigit()]
    return request.browser_participants


# Where the binding was kept before the cookie: browsers mid-study when a site upgrades keep theirs.
_SESSION_PARTICIPANTS = "crowdbench.participants"


def bound_to_browser(request, worker_id):
    return (worker_id in _browser_participants(request)
            or worker_id in request.session.get(_SESSION_PARTICIPANTS, []))


def remember_participants(get_response):
    """Middleware: writes the participants cookie when a request bound a new one to the browser,
    with the session cookie's attributes (Secure, SameSite for MTurk's and the platforms' pages)."""

    def middleware(request):
        response = get_response(request)
        if getattr(request, "browser_participants_changed", False):
            response.set_signed_cookie(
                PARTICIPANTS_COOKIE, ",".join(map(str, request.browser_participants)),
                salt=_PARTICIPANTS_SALT, max_age=settings.SESSION_COOKIE_AGE,
                domain=settings.SESSION_COOKIE_DOMAIN, secure=settings.SESSION_COOKIE_SECURE,
                httponly=True, samesite=settings.SESSION_COOKIE_SAMESITE,
            )
        return response

    return middleware


def study_participant(request, *, study, participant_id, platform_session_id):
    """The Worker a Prolific / Connect study link names, if this browser may act as them.

    A participant id in a link is no secret, so it is bound to the browser that first arrives with
    it (its session cookie); a later arrival with the same id from another browser is a fresh
    claim, which the platform must confirm before it sees any of that participant's work or their
    completion code. Raises IdentityRefused.
    """
    worker, created = participants_of(study).get_or_create(
        platform=study.platform, external_id=participant_id)
    if not created and not bound_to_browser(request, worker.pk):
        identity.confirm_participant(study=study, participant_id=participant_id,
                                     platform_session_id=platform_session_id)
    bound = _browser_participants(request)
    if bound[-1:] != [worker.pk]:
        request.browser_participants = [*[pk for pk in bound if pk != worker.pk],
                                        worker.pk][-_MAX_PARTICIPANTS:]
        request.browser_participants_changed = True
    return worker


def study_arrival(params):
    """(platform, participant id, study id, platform session id) of a study link, or None."""
    if params.get("participantId") or params.get("projectId"):
        return (Worker.Platform.CLOUDRESEARCH, params.get("participantId", ""),
                params.get("projectId", ""), params.get("assignmentId", ""))
    if params.get("PROLIFIC_PID") or params.get("STUDY_ID"):
        return (Worker.Platform.PROLIFIC, params.get("PROLIFIC_PID", ""),
                params.get("STUDY_ID", ""), params.get("SESSION_ID", ""))
    return None


def valid_platform_id(value):
    return bool(_PLATFORM_ID.match(value or ""))


def _submitted_in(study, worker):
    return Assignment.objects.filter(
        worker=worker, status=Assignment.Status.SUBMITTED, platform_task_id=study.external_id,
        unit__stage=study.stage,
    )


def participants_of(study):
    """Workers fetched with their standing in the study's stage and the count of their tasks in
    it, so the study's next-unit request asks neither separately."""
    done = _submitted_in(study, OuterRef("pk")).order_by().values("worker").annotate(
        n=Count("pk")).values("n")
    return workers_with_standing(study.stage).annotate(
        done_in_study_id=Value(study.pk), done_count=Coalesce(Subquery(done), 0))


def done_in_study(worker, study):
    if getattr(worker, "done_in_study_id", None) == study.pk:
        return worker.done_count
    return _submitted_in(study, worker).count()


def mturk_confirmed(worker, assignment_id):
    """Whether MTurk confirms the assignment behind a worker-page link is this worker's: from a
    synced submission, from an earlier answer kept in the cache, or by asking GetAssignment."""
    assignment = Assignment.objects.filter(pk=assignment_id, worker=worker).exclude(
        platform_assignment_id="").first() if assignment_id is not None else None
    if assignment is None:
        return False
    if Submission.objects.filter(worker=worker, study__platform=Worker.Platform.MTURK,
                                 platform_assignment_id=assignment.platform_assignment_id).exists():
        return True
    key = f"crowdbench:mturk-confirmed:{worker.pk}:{assignment.platform_assignment_id}"
    if cache.get(key):
        return True
    try:
        identity.confirm_mturk_assignment(assignment_id=assignment.platform_assignment_id,
                                          worker_id=worker.external_id,
                                          hit_id=assignment.platform_task_id)
    except identity.IdentityRefused:
        return False
    cache.set(key, True, 24 * 3600)
    return True
