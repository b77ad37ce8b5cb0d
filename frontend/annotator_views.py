"""Annotator pages: the three ways in, the shared task page, submission and completion.

- MTurk: a HIT's ExternalQuestion points at /work/unit/<unit_id>/ and MTurk adds assignmentId,
  hitId, workerId and turkSubmitTo; a preview comes with assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE.
- CloudResearch Connect / Prolific: a study link /work/<stage>/ with the platform's participant
  and study parameters; the study (mturk.CrowdStudy) says which work and which completion code.
- In-house annotators: logged in, /work/ lists stages with work waiting, /work/<stage>/ the next.

Whoever arrives, the page gets a signed token naming our assignment and worker (frontend/tokens.py)
and the submit endpoint trusts that token only.
"""

import re

from django.conf import settings
from django.contrib.auth.views import LoginView, redirect_to_login
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from annotation.exceptions import AnnotationError
from annotation.models import Assignment, Worker, WorkUnit
from annotation.queue import lease_unit, next_assignment, return_assignment, units_open_to
from frontend import tokens
from frontend.security import annotator_page, mturk_submit_origin
from frontend.task_pages import PAGES
from frontend.worker_summary import recent_work, stage_tallies
from mturk.models import CrowdStudy

MTURK_PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
# Seconds without input after which the active-time clock stops (frontend/static/.../annotator.js).
IDLE_SECONDS = 60
MAX_ACTIVE_SECONDS = 24 * 3600
_PLATFORM_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


# --- who is working ---------------------------------------------------------------------------


def _local_worker(user):
    worker, _ = Worker.objects.get_or_create(
        platform=Worker.Platform.LOCAL, external_id=f"user-{user.pk}", defaults={"user": user}
    )
    return worker


def _platform_worker(platform, participant_id):
    worker, _ = Worker.objects.get_or_create(platform=platform, external_id=participant_id)
    return worker


def _study_arrival(params):
    """(platform, participant id, study id, platform session id) of a study link, or None."""
    if params.get("participantId") or params.get("projectId"):
        return (Worker.Platform.CLOUDRESEARCH, params.get("participantId", ""),
                params.get("projectId", ""), params.get("assignmentId", ""))
    if params.get("PROLIFIC_PID") or params.get("STUDY_ID"):
        return (Worker.Platform.PROLIFIC, params.get("PROLIFIC_PID", ""),
                params.get("STUDY_ID", ""), params.get("SESSION_ID", ""))
    return None


def _valid_platform_id(value):
    return bool(_PLATFORM_ID.match(value or ""))


def _record_platform_ids(assignment, *, platform_assignment_id, platform_task_id):
    # The key of an MTurk assignment is (assignmentId, workerId): a returned HIT's assignmentId
    # comes back for another worker, who gets their own row here, and a worker who accepts the
    # same unit again gets their row updated with the new assignmentId.
    if (assignment.platform_assignment_id, assignment.platform_task_id) != (
        platform_assignment_id, platform_task_id
    ):
        assignment.platform_assignment_id = platform_assignment_id
        assignment.platform_task_id = platform_task_id
        Assignment.objects.filter(pk=assignment.pk).update(
            platform_assignment_id=platform_assignment_id, platform_task_id=platform_task_id
        )


def _done_in_study(worker, study):
    return Assignment.objects.filter(
        worker=worker, status=Assignment.Status.SUBMITTED, platform_task_id=study.external_id,
        unit__stage=study.stage,
    ).count()


# --- rendering ---------------------------------------------------------------------------------


def _page_or_404(stage):
    page = PAGES.get(stage)
    if page is None:
        raise Http404("No such kind of task.")
    return page


def _problem(request, message, *, status=200, heading="This task is not available"):
    return render(request, "annotator/problem.html", {"heading": heading, "message": message},
                  status=status)


def _render_task(request, page, unit, *, assignment=None, grant=None, preview=False,
                 study=None, posted=None, error="", status=200):
    context = page.context(unit, posted)
    session = grant.session if grant else None
    context.update({
        "page": page,
        "unit": unit,
        "preview": preview,
        "mturk": bool(grant and grant.turk_submit_to) or preview,
        "token": tokens.sign_assignment(grant) if grant else "",
        "assignment": assignment,
        "study": study,
        "done_in_study": _done_in_study(assignment.worker, study) if study and assignment else 0,
        "session_token": tokens.sign_session(session) if session else "",
        "worker_token": tokens.sign_worker(grant.worker_id) if grant else "",
        "error": error,
        "config": {
            "draftKey": f"assignment-{assignment.pk}" if assignment else "",
            "preview": preview,
            "idleSeconds": IDLE_SECONDS,
            "allowedImageHosts": settings.IMAGE_URL_ALLOWED_HOSTS,
        },
    })
    return render(request, page.template, context, status=status)


# --- ways in -----------------------------------------------------------------------------------


@annotator_page
@require_GET
def unit_page(request, unit_id):
    """One given unit: an MTurk HIT (preview or accepted), or an in-house annotator's link."""
    unit = get_object_or_404(
        WorkUnit.objects.select_related("family", "instance", "reference__caption"), pk=unit_id
    )
    page = _page_or_404(unit.stage)
    params = request.GET
    if "assignmentId" in params or "hitId" in params:
        return _mturk_unit(request, page, unit, params)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    worker = _local_worker(request.user)
    try:
        assignment = lease_unit(worker=worker, unit=unit)
    except AnnotationError as error:
        return _problem(request, str(error))
    grant = tokens.AssignmentGrant(assignment_id=assignment.pk, worker_id=worker.pk)
    return _render_task(request, page, unit, assignment=assignment, grant=grant)


def _mturk_unit(request, page, unit, params):
    platform_assignment_id = params.get("assignmentId", "")
    worker_id = params.get("workerId", "").strip()
    if platform_assignment_id == MTURK_PREVIEW_ASSIGNMENT or not worker_id:
        # MTurk's preview: show the task read-only; nothing is leased until the HIT is accepted.
        if unit.status != WorkUnit.Status.OPEN:
            return _problem(request, "This task already has all the answers it needs.")
        return _render_task(request, page, unit, preview=True)
    submit_origin = mturk_submit_origin(params.get("turkSubmitTo", ""))
    hit_id = params.get("hitId", "")
    if not (submit_origin and _valid_platform_id(worker_id)
            and _valid_platform_id(platform_assignment_id) and _valid_platform_id(hit_id)):
        return _problem(request, "This task link is incomplete. Please open it again from MTurk.",
                        status=400)
    worker = _platform_worker(Worker.Platform.MTURK, worker_id)
    try:
        assignment = lease_unit(worker=worker, unit=unit)
    except AnnotationError as error:
        return _problem(request, str(error))
    _record_platform_ids(assignment, platform_assignment_id=platform_assignment_id,
                         platform_task_id=hit_id)
    grant = tokens.AssignmentGrant(assignment_id=assignment.pk, worker_id=worker.pk,
                                   turk_submit_to=submit_origin)
    return _render_task(request, page, unit, assignment=assignment, grant=grant)


@annotator_page
@require_GET
def stage_page(request, stage):
    """The next unit of a stage, for a study participant or an in-house annotator."""
    page = _page_or_404(stage)
    if "continue" in request.GET:
        try:
            session = tokens.read_session(request.GET["continue"])
        except tokens.TokenRefused as error:
            return _problem(request, str(error), status=403)
        study = CrowdStudy.objects.select_related("family").filter(
            pk=session.study_id, stage=stage).first()
        worker = Worker.objects.filter(pk=session.worker_id).first()
        if study is None or worker is None:
            return _problem(request, tokens.FORGED_MESSAGE, status=403)
        return _study_task(request, page, study, worker, session)
    arrival = _study_arrival(request.GET)
    if arrival is not None:
        platform, participant_id, study_id, platform_session_id = arrival
        if not (_valid_platform_id(participant_id) and _valid_platform_id(study_id)):
            return _problem(request, "This study link is incomplete. Please open it again from "
                            "your platform.", status=400)
        study = CrowdStudy.objects.select_related("family").filter(
            platform=platform, external_id=study_id).first()
        if study is None or study.stage != stage:
            return _problem(request, "This study is not known here. Please tell the researchers.",
                            status=404)
        if platform_session_id and not _valid_platform_id(platform_session_id):
            platform_session_id = ""
        worker = _platform_worker(platform, participant_id)
        session = tokens.StudySession(worker_id=worker.pk, study_id=study.pk,
                                      platform_session_id=platform_session_id)
        return _study_task(request, page, study, worker, session)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    worker = _local_worker(request.user)
    assignment = next_assignment(worker=worker, stage=stage)
    if assignment is None:
        return render(request, "annotator/nothing_waiting.html", {"page": page})
    grant = tokens.AssignmentGrant(assignment_id=assignment.pk, worker_id=worker.pk)
    return _render_task(request, page, assignment.unit, assignment=assignment, grant=grant)


def _study_task(request, page, study, worker, session):
    assignment = next_assignment(worker=worker, stage=study.stage, family=study.family)
    if assignment is None:
        if _done_in_study(worker, study):
            return _completion(request, study)
        return _problem(
            request, "There are no tasks for you right now. Please return the study on your "
            "platform; you have not been charged any time.", heading="No tasks right now",
        )
    _record_platform_ids(assignment, platform_assignment_id=session.platform_session_id,
                         platform_task_id=study.external_id)
    grant = tokens.AssignmentGrant(assignment_id=assignment.pk, worker_id=worker.pk,
                                   study_id=study.pk,
                                   platform_session_id=session.platform_session_id)
    unit = WorkUnit.objects.select_related("family", "instance", "reference__caption").get(
        pk=assignment.unit_id
    )
    return _render_task(request, page, unit, assignment=assignment, grant=grant, study=study)


def _completion(request, study):
    code = study.completion_code
    template = {
        Worker.Platform.CLOUDRESEARCH: settings.CLOUDRESEARCH_COMPLETE_URL,
        Worker.Platform.PROLIFIC: settings.PROLIFIC_COMPLETE_URL,
    }.get(study.platform, "")
    return render(request, "annotator/completion.html", {
        "study": study, "code": code,
        "return_url": template.format(code=code) if template and code else "",
        "platform": study.get_platform_display(),
    })


# --- submitting --------------------------------------------------------------------------------


def _active_seconds(value):
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return min(max(seconds, 0.0), MAX_ACTIVE_SECONDS) if seconds == seconds else None


def _refuse(request, message, *, wants_json):
    if wants_json:
        return JsonResponse({"ok": False, "error": message}, status=403)
    return _problem(request, message, status=403, heading="This answer could not be saved")


# Exempt from Django's CSRF check on purpose: inside MTurk's iframe the CSRF cookie is third-party
# and Safari drops it, so the check would refuse every honest worker there. The signed assignment
# token in the form is the CSRF defence instead: another site cannot read it from our page, cannot
# forge it without SECRET_KEY, and it only lets its bearer answer the one assignment it names.
@csrf_exempt
@annotator_page
@require_POST
def submit(request):
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        grant = tokens.read_assignment(request.POST.get("token", ""))
    except tokens.TokenRefused as error:
        return _refuse(request, str(error), wants_json=wants_json)
    assignment = (
        Assignment.objects.select_related("worker", "unit__family", "unit__instance",
                                          "unit__reference__caption")
        .filter(pk=grant.assignment_id, worker_id=grant.worker_id).first()
    )
    if assignment is None:
        return _refuse(request, tokens.FORGED_MESSAGE, wants_json=wants_json)
    worker = assignment.worker
    if worker.platform == Worker.Platform.LOCAL and worker.user_id != request.user.pk:
        # An in-house annotator's token is good only in their own logged-in session.
        return _refuse(request, "Please log in again to save this answer.", wants_json=wants_json)
    page = _page_or_404(assignment.unit.stage)
    try:
        label = page.submit(request=request, assignment_id=assignment.pk, worker=worker,
                            active_seconds=_active_seconds(request.POST.get("active_seconds")))
    except AnnotationError as error:
        if wants_json:
            return JsonResponse({"ok": False, "error": str(error)}, status=400)
        study = CrowdStudy.objects.filter(pk=grant.study_id).first() if grant.study_id else None
        return _render_task(request, page, assignment.unit, assignment=assignment, grant=grant,
                            study=study, posted=request.POST, error=str(error), status=400)
    if grant.turk_submit_to:
        # MTurk learns of the work only from this POST, made by the worker's browser.
        handback = {"action": f"{grant.turk_submit_to}/mturk/externalSubmit",
                    "fields": {"assignmentId": assignment.platform_assignment_id,
                               "submission": label}}
        if wants_json:
            return JsonResponse({"ok": True, "submission": label, "mturk": handback})
        return render(request, "annotator/mturk_handback.html", {"handback": handback})
    next_url = reverse("frontend:stage", args=[assignment.unit.stage])
    if grant.session is not None:
        next_url += "?continue=" + tokens.sign_session(grant.session)
    if wants_json:
        return JsonResponse({"ok": True, "submission": label, "next": next_url})
    return redirect(next_url)


# Exempt from CSRF for the reason given at `submit`: the signed study-session token is the defence.
@csrf_exempt
@annotator_page
@require_POST
def finish(request):
    """A study participant stops: the unit on screen goes back to the pool, the code is shown."""
    try:
        session = tokens.read_session(request.POST.get("session", ""))
    except tokens.TokenRefused as error:
        return _problem(request, str(error), status=403)
    study = get_object_or_404(CrowdStudy, pk=session.study_id)
    worker = get_object_or_404(Worker, pk=session.worker_id)
    if not _done_in_study(worker, study):
        return _problem(request, "Finish a task first: the code is given once your first answer "
                        "is saved.", heading="No code yet")
    held = Assignment.objects.filter(worker=worker, status=Assignment.Status.LEASED,
                                     platform_task_id=study.external_id)
    for assignment in held:
        return_assignment(assignment=assignment)
    return _completion(request, study)


# --- in-house annotators' home and a worker's own page ------------------------------------------


@annotator_page(frameable=False)
@require_GET
def home(request):
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    worker = _local_worker(request.user)
    stages = [
        {"stage": stage, "heading": page.heading,
         "waiting": units_open_to(worker=worker, stage=stage).count()}
        for stage, page in PAGES.items()
    ]
    return render(request, "annotator/home.html", {"stages": stages, "worker": worker})


@annotator_page
@require_GET
def worker_page(request):
    """What a worker did, what became of it, and (once wired) their qualification state."""
    if "w" in request.GET:
        try:
            worker = get_object_or_404(Worker, pk=tokens.read_worker(request.GET["w"]))
        except tokens.TokenRefused as error:
            return _problem(request, str(error), status=403)
    elif request.user.is_authenticated:
        worker = _local_worker(request.user)
    else:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    return render(request, "annotator/worker.html", {
        "worker": worker,
        "tallies": stage_tallies(worker),
        "rows": recent_work(worker),
        # Filled from mturk.qualifications.qualification_status(worker) once that module lands
        # (#3); the template's qualification section already renders it.
        "qualification": None,
    })


class AnnotatorLoginView(LoginView):
    template_name = "annotator/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self):
        return reverse("frontend:home")


login = annotator_page(AnnotatorLoginView.as_view(), frameable=False)
