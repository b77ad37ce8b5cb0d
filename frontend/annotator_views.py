"""Annotator pages: the three ways in, the shared task page, submission and completion.

- MTurk: a HIT's ExternalQuestion points at /work/unit/<unit_id>/ and MTurk adds assignmentId,
  hitId, workerId and turkSubmitTo; a preview comes with assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE.
- CloudResearch Connect / Prolific: a study link /work/<stage>/ with the platform's participant
  and study parameters; the study (mturk.CrowdStudy) says which work and which completion code.
- In-house annotators: logged in, /work/ lists stages with work waiting, /work/<stage>/ the next.

Whoever arrives, the page gets a signed token naming our assignment and worker (frontend/tokens.py)
and the submit endpoint trusts that token only.

Where a stage has a qualification test (paper §2.2) a platform worker without it is sent to
/work/qualify/<stage>/, and a worker paused for low accuracy on gold items is told so. Now and then
the next task is a gold item shown on the stage's own page; its answer keeps the worker's accuracy
current and is never stored as work.
"""

import re
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.views import LoginView, LogoutView, redirect_to_login
from django.core.cache import cache
from django.db import transaction
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from annotation.exceptions import AnnotationError
from annotation.models import (
    Assignment,
    GoldAnswer,
    GoldItem,
    QualificationAttempt,
    Worker,
    WorkerBlock,
    WorkerQualification,
    WorkUnit,
)
from annotation.queue import (
    ClaimConflict,
    binding_conflict,
    lease_unit,
    next_assignment,
    return_assignment,
    units_open_to,
)
from annotation.typed_text import ANSWER_MAX_CHARS, clean_typed_text
from annotation.workforce import may_work
from crowdbench.security import annotator_page, mturk_submit_origin
from frontend import tokens
from frontend.task_pages import PAGES, gold_material
from frontend.worker_summary import recent_work, stage_tallies
from mturk import identity, qualifications
from mturk.exceptions import PlatformError
from mturk.models import CrowdStudy, Submission

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


# The study participants this browser arrived as (ids of Worker rows), in its signed session.
_BROWSER_PARTICIPANTS = "crowdbench.participants"


def _bound_here(request, worker_id):
    return worker_id in request.session.get(_BROWSER_PARTICIPANTS, [])


def _participant(request, *, study, participant_id, platform_session_id):
    """The Worker a Prolific / Connect study link names, if this browser may act as them.

    A participant id in a link is no secret, so it is bound to the browser that first arrives with
    it (its session cookie); a later arrival with the same id from another browser is a fresh
    claim, which the platform must confirm before it sees any of that participant's work or their
    completion code. Raises IdentityRefused.
    """
    worker, created = Worker.objects.get_or_create(platform=study.platform, external_id=participant_id)
    if not created and not _bound_here(request, worker.pk):
        identity.confirm_participant(study=study, participant_id=participant_id,
                                     platform_session_id=platform_session_id)
    request.session[_BROWSER_PARTICIPANTS] = [
        *[pk for pk in request.session.get(_BROWSER_PARTICIPANTS, []) if pk != worker.pk], worker.pk]
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
    # A study participant's assignments carry the study id and their platform session, so sync
    # finds them; the participant themselves was checked against this browser (_participant).
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


# What the page after a submit or a give-back says about it (`?after=`), so it is seen whichever
# way the worker moved on (with or without JavaScript, without cookies inside MTurk's iframe).
NOTICES = {
    "saved": "Saved. Your answer is stored; here is the next task.",
    "given-back": "Task given back: it is free for someone else now. Here is the next one.",
}


def _after(url, what):
    return f"{url}{'&' if '?' in url else '?'}after={what}"


def _render_task(request, page, unit, *, assignment=None, grant=None, preview=False,
                 study=None, posted=None, error="", status=200):
    context = page.context(unit, posted, assignment)
    session = grant.session if grant else None
    context.update({
        "notice": NOTICES.get(request.GET.get("after", "")) if posted is None else "",
        "can_give_back": bool(grant) and not preview,
        "page": page,
        "unit": unit,
        "preview": preview,
        "mturk": bool(grant and grant.turk_submit_to) or preview,
        "token": tokens.sign_assignment(grant) if grant else "",
        "assignment": assignment,
        "study": study,
        "done_in_study": _done_in_study(assignment.worker, study) if study and assignment else 0,
        "session_token": tokens.sign_session(session) if session else "",
        "worker_token": tokens.sign_worker(grant.worker_id, assignment_id=grant.assignment_id)
        if grant else "",
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
    hit_id = params.get("hitId", "")
    hit = identity.mturk_hit_of_unit(unit, hit_id) if _valid_platform_id(hit_id) else None
    if hit is None:
        # Only units we published as MTurk HITs are shown to MTurk's visitors, previews included:
        # Prolific, Connect and in-house work is never opened by a unit id and a made-up HIT id.
        return _problem(request, "This task is not published on MTurk. Please open it from your "
                        "platform.", status=404)
    if platform_assignment_id == MTURK_PREVIEW_ASSIGNMENT or not worker_id:
        # MTurk's preview: show the task read-only; nothing is leased until the HIT is accepted.
        if unit.status != WorkUnit.Status.OPEN:
            return _problem(request, "This task already has all the answers it needs.")
        return _render_task(request, page, unit, preview=True)
    submit_origin = mturk_submit_origin(params.get("turkSubmitTo", ""))
    if not (submit_origin and _valid_platform_id(worker_id)
            and _valid_platform_id(platform_assignment_id)):
        return _problem(request, "This task link is incomplete. Please open it again from MTurk.",
                        status=400)
    worker = Worker.objects.filter(platform=Worker.Platform.MTURK, external_id=worker_id).first()
    # The (assignmentId, workerId) pair is fixed at first load; any other claim is checked with
    # MTurk before the claimant gets a token, a lease or a look at anybody's work.
    rebind = bool(binding_conflict(platform=Worker.Platform.MTURK, worker=worker, unit=unit,
                                   platform_assignment_id=platform_assignment_id,
                                   platform_task_id=hit_id))
    if rebind:
        try:
            identity.confirm_mturk_assignment(assignment_id=platform_assignment_id,
                                              worker_id=worker_id, hit_id=hit_id)
        except identity.IdentityRefused as refused:
            return _problem(request, str(refused), status=403)
    worker = worker or _platform_worker(Worker.Platform.MTURK, worker_id)
    held_before = Assignment.objects.filter(unit=unit, worker=worker).exists()
    gate = _qualification_gate(request, worker, unit.stage, next_url=request.get_full_path())
    if gate is not None:
        return gate
    if not held_before:
        gold = _offer_gold(request, page, worker, unit.stage, next_url=request.get_full_path(),
                           units=units_open_to(worker=worker, stage=unit.stage).filter(pk=unit.pk),
                           mturk=True)
        if gold is not None:
            return gold
    try:
        assignment = lease_unit(worker=worker, unit=unit, platform_assignment_id=platform_assignment_id,
                                platform_task_id=hit_id, rebind=rebind)
    except ClaimConflict:
        # Another load of this HIT bound a different pair a moment ago.
        return _problem(request, identity.MTURK_NOT_CONFIRMED, status=403)
    except AnnotationError as error:
        return _problem(request, str(error))
    grant = tokens.AssignmentGrant(assignment_id=assignment.pk, worker_id=worker.pk,
                                   turk_submit_to=submit_origin,
                                   mturk_assignment_id=platform_assignment_id)
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
        if not _bound_here(request, worker.pk):
            return _problem(request, identity.STUDY_NOT_CONFIRMED, status=403)
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
        try:
            worker = _participant(request, study=study, participant_id=participant_id,
                                  platform_session_id=platform_session_id)
        except identity.IdentityRefused as refused:
            return _problem(request, str(refused), status=403)
        session = tokens.StudySession(worker_id=worker.pk, study_id=study.pk,
                                      platform_session_id=platform_session_id)
        return _study_task(request, page, study, worker, session)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    worker = _local_worker(request.user)
    gate = _qualification_gate(request, worker, stage, next_url=request.get_full_path())
    if gate is not None:
        return gate
    assignment = next_assignment(worker=worker, stage=stage)
    if assignment is None:
        return render(request, "annotator/nothing_waiting.html", {
            "page": page, "notice": NOTICES.get(request.GET.get("after", ""), "")})
    grant = tokens.AssignmentGrant(assignment_id=assignment.pk, worker_id=worker.pk)
    return _render_task(request, page, assignment.unit, assignment=assignment, grant=grant)


def _study_task(request, page, study, worker, session):
    next_url = reverse("frontend:stage", args=[study.stage]) + "?continue=" + tokens.sign_session(session)
    gate = _qualification_gate(request, worker, study.stage, next_url=next_url, study=study,
                               session=session)
    if gate is not None:
        return gate
    holding = Assignment.objects.filter(
        worker=worker, unit__stage=study.stage, status=Assignment.Status.LEASED,
        lease_expires_at__gt=timezone.now()).exists()
    if not holding:
        gold = _offer_gold(request, page, worker, study.stage, next_url=next_url,
                           units=units_open_to(worker=worker, stage=study.stage, family=study.family),
                           study=study, session=session)
        if gold is not None:
            return gold
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
        grant = tokens.read_task(request.POST.get("token", ""))
    except tokens.TokenRefused as error:
        return _refuse(request, str(error), wants_json=wants_json)
    if isinstance(grant, tokens.GoldGrant):
        return _submit_gold(request, grant, wants_json=wants_json)
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
    if grant.turk_submit_to and grant.mturk_assignment_id != assignment.platform_assignment_id:
        # MTurk confirmed a newer assignment for this task: this page belongs to an older one.
        return _refuse(request, "This task was opened again under another MTurk assignment. "
                       "Please continue there.", wants_json=wants_json)
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
                    "fields": {"assignmentId": grant.mturk_assignment_id,
                               "submission": label}}
        if wants_json:
            return JsonResponse({"ok": True, "submission": label, "mturk": handback})
        return render(request, "annotator/mturk_handback.html", {"handback": handback})
    next_url = _after(_next_task_url(assignment, grant), "saved")
    if wants_json:
        return JsonResponse({"ok": True, "submission": label, "next": next_url})
    return redirect(next_url)


def _next_task_url(assignment, grant):
    next_url = reverse("frontend:stage", args=[assignment.unit.stage])
    if grant.session is not None:
        next_url += "?continue=" + tokens.sign_session(grant.session)
    return next_url


# Exempt from CSRF for the reason given at `submit`: the task's signed token is the defence.
@csrf_exempt
@annotator_page
@require_POST
def give_back(request):
    """The worker gives the task on screen back: its lease ends now, so the slot is free for someone
    else at once, and the worker moves on to their next task (on MTurk: returns the HIT there)."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        grant = tokens.read_task(request.POST.get("token", ""))
    except tokens.TokenRefused as error:
        return _refuse(request, str(error), wants_json=wants_json)
    if isinstance(grant, tokens.GoldGrant):
        # A check question holds no lease; nothing is recorded and the worker moves on.
        next_url = _after(grant.next_url or reverse("frontend:home"), "given-back")
        return JsonResponse({"ok": True, "next": next_url}) if wants_json else redirect(next_url)
    assignment = (Assignment.objects.select_related("worker", "unit")
                  .filter(pk=grant.assignment_id, worker_id=grant.worker_id).first())
    if assignment is None:
        return _refuse(request, tokens.FORGED_MESSAGE, wants_json=wants_json)
    if assignment.worker.platform == Worker.Platform.LOCAL and assignment.worker.user_id != request.user.pk:
        return _refuse(request, "Please log in again to give this task back.", wants_json=wants_json)
    if grant.turk_submit_to and grant.mturk_assignment_id != assignment.platform_assignment_id:
        return _refuse(request, tokens.FORGED_MESSAGE, wants_json=wants_json)
    return_assignment(assignment=assignment)
    if grant.turk_submit_to:
        # Only MTurk can end the worker's assignment there; our slot is free already.
        page = render(request, "annotator/problem.html", {
            "heading": "Task given back",
            "message": "This task is free for someone else now. Please press “Return” on MTurk "
                       "to give the HIT back there too; you will not be charged for it."})
        return JsonResponse({"ok": True, "next": ""}) if wants_json else page
    next_url = _after(_next_task_url(assignment, grant), "given-back")
    return JsonResponse({"ok": True, "next": next_url}) if wants_json else redirect(next_url)


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
    if not _bound_here(request, worker.pk):
        # The code goes only to the browser that did the work, not to whoever holds its token.
        return _problem(request, identity.STUDY_NOT_CONFIRMED, status=403)
    if not _done_in_study(worker, study):
        return _problem(request, "Finish a task first: the code is given once your first answer "
                        "is saved.", heading="No code yet")
    held = Assignment.objects.filter(worker=worker, status=Assignment.Status.LEASED,
                                     platform_task_id=study.external_id)
    for assignment in held:
        return_assignment(assignment=assignment)
    return _completion(request, study)


# --- qualification tests and live gold items (paper §2.2; mturk/qualifications.py) ----------------


def _qualify_url(worker, stage, *, next_url=""):
    grant = tokens.QualificationPass(worker_id=worker.pk, stage=stage, next_url=next_url)
    return reverse("frontend:qualify", args=[stage]) + "?q=" + tokens.sign_qualification(grant)


def _tasks_url(worker, stage):
    """Where a worker finds a stage's tasks on their own: only in-house annotators have such a page;
    platform workers come back through their platform's link."""
    return reverse("frontend:stage", args=[stage]) if worker.platform == Worker.Platform.LOCAL else ""


def _qualification_gate(request, worker, stage, *, next_url, study=None, session=None):
    """None when the worker may take the stage's units; otherwise the page that says what to do:
    the qualification test, or why they are paused or blocked."""
    if may_work(worker, stage):
        return None
    if WorkerBlock.objects.filter(worker=worker, active=True).exists():
        return _problem(request, "Your account cannot take these tasks. If you think this is a "
                        "mistake, please message the researchers through your platform.",
                        heading="No tasks for you here")
    granted = (WorkerQualification.objects.select_related("qualification")
               .filter(qualification__stage=stage, worker=worker).first())
    if granted is None:
        return redirect(_qualify_url(worker, stage, next_url=next_url))
    # Paused for low accuracy on gold items: a lease still held goes back to the pool at once.
    for held in Assignment.objects.filter(worker=worker, unit__stage=stage,
                                          status=Assignment.Status.LEASED):
        return_assignment(assignment=held)
    bar = granted.qualification.live_accuracy_bar
    accuracy = granted.live_accuracy
    message = (
        "Some tasks are check questions whose answer is known. "
        + (f"Of your recent ones {accuracy:.0%} were right, below the {bar:.0%} needed, "
           if accuracy is not None else "Too few of your recent ones were right, ")
        + "so these tasks are paused for you. Everything you submitted is saved. A researcher "
        "will look at your answers and get in touch through your platform."
    )
    context = {"heading": "Your work on these tasks is paused", "message": message}
    if study is not None and session is not None and _done_in_study(worker, study):
        context["finish_token"] = tokens.sign_session(session)
    return render(request, "annotator/problem.html", context)


def _offer_gold(request, page, worker, stage, *, next_url, units, study=None, session=None,
                mturk=False):
    """A live gold item shown as this stage's next task, or None."""
    if page.gold_context is None or worker.platform in (Worker.Platform.LOCAL,
                                                        Worker.Platform.IMPORT):
        # In-house annotators are trained in person and hold no qualification to keep current.
        return None
    if not units.exists():
        return None
    item = qualifications.live_gold_item(worker, stage)
    if item is None:
        return None
    grant = tokens.GoldGrant(item_id=item["id"], worker_id=worker.pk, stage=stage, next_url=next_url)
    return _render_gold(request, page, item, grant, worker=worker, study=study, session=session,
                        mturk=mturk)


def _render_gold(request, page, item, grant, *, worker, study=None, session=None, mturk=False,
                 posted=None, error="", status=200):
    # Rendered exactly as the stage's own task: same template, same controls, same button.
    context = page.gold_context(item, posted)
    context.update({
        "notice": NOTICES.get(request.GET.get("after", "")) if posted is None else "",
        "can_give_back": True,
        "page": page,
        "preview": False,
        "mturk": mturk,
        "token": tokens.sign_gold(grant),
        "study": study,
        "done_in_study": _done_in_study(worker, study) if study else 0,
        "session_token": tokens.sign_session(session) if session else "",
        "worker_token": tokens.sign_worker(worker.pk),
        "error": error,
        "config": {
            "draftKey": "task-" + salted_hmac("crowdbench.frontend.draft",
                                              f"{worker.pk}:{item['id']}").hexdigest()[:16],
            "preview": False,
            "idleSeconds": IDLE_SECONDS,
            "allowedImageHosts": settings.IMAGE_URL_ALLOWED_HOSTS,
        },
    })
    return render(request, page.template, context, status=status)


def _submit_gold(request, grant, *, wants_json):
    worker = Worker.objects.filter(pk=grant.worker_id).first()
    item = GoldItem.objects.filter(pk=grant.item_id, qualification__stage=grant.stage).first()
    page = PAGES.get(grant.stage)
    if worker is None or item is None or page is None or page.gold_answer is None:
        return _refuse(request, tokens.FORGED_MESSAGE, wants_json=wants_json)
    if worker.platform == Worker.Platform.LOCAL and worker.user_id != request.user.pk:
        return _refuse(request, "Please log in again to save this answer.", wants_json=wants_json)
    shown = {"id": item.pk, "kind": item.kind, "content": item.content, "question": item.question,
             "options": item.options}
    try:
        answer = page.gold_answer(request.POST, shown)
    except AnnotationError as error:
        if wants_json:
            return JsonResponse({"ok": False, "error": str(error)}, status=400)
        return _render_gold(request, page, shown, grant, worker=worker, posted=request.POST,
                            error=str(error), status=400)
    with transaction.atomic():
        # One answer per item, whatever a double click or a resent form does.
        Worker.objects.select_for_update().filter(pk=worker.pk).first()
        if not GoldAnswer.objects.filter(item=item, worker=worker,
                                         source=GoldAnswer.Source.LIVE).exists():
            qualifications.record_live_gold_answer(worker, item.pk, answer)
    next_url = grant.next_url or reverse("frontend:worker") + "?w=" + tokens.sign_worker(worker.pk)
    if wants_json:
        return JsonResponse({"ok": True, "next": next_url})
    return redirect(next_url)


@dataclass(frozen=True)
class _TestPage:
    """What annotator/task.html needs of a page, for the qualification test."""

    stage: str
    heading: str
    layout: str = "single"
    shortcuts: tuple = (("1 / 2 / …", "choose an answer, then the next question"),
                        ("Tab", "move between questions"), ("Ctrl+Enter", "submit"))


def _test_taker(request, stage):
    """(worker, QualificationPass) for whoever opened the test, or a response to send instead."""
    params = request.GET
    token = params.get("q") if request.method == "GET" else request.POST.get("token", "")
    if token or request.method != "GET":
        grant = tokens.read_qualification(token)
        worker = Worker.objects.filter(pk=grant.worker_id).first()
        if worker is None or grant.stage != stage:
            raise tokens.TokenRefused(tokens.FORGED_MESSAGE)
        if worker.platform == Worker.Platform.LOCAL and worker.user_id != request.user.pk:
            raise tokens.TokenRefused("Please log in again to take the test.")
        return worker, grant
    arrival = _study_arrival(params)
    if arrival is not None:
        platform, participant_id, study_id, platform_session_id = arrival
        study = CrowdStudy.objects.filter(platform=platform, external_id=study_id,
                                          stage=stage).first()
        if study is None or not _valid_platform_id(participant_id):
            raise Http404("This study is not known here. Please tell the researchers.")
        platform_session_id = platform_session_id if _valid_platform_id(platform_session_id) else ""
        try:
            worker = _participant(request, study=study, participant_id=participant_id,
                                  platform_session_id=platform_session_id)
        except identity.IdentityRefused as refused:
            raise tokens.TokenRefused(str(refused)) from None
        session = tokens.StudySession(worker_id=worker.pk, study_id=study.pk,
                                      platform_session_id=platform_session_id)
        next_url = reverse("frontend:stage", args=[stage]) + "?continue=" + tokens.sign_session(session)
        return worker, tokens.QualificationPass(worker_id=worker.pk, stage=stage, next_url=next_url)
    if params.get("workerId"):
        # A bare MTurk worker id proves nothing; MTurk workers reach the test from a HIT, whose
        # page sends them here with a signed pass once their assignment's claim holds.
        raise tokens.TokenRefused("Please open the test from a HIT of this study on MTurk.")
    if request.user.is_authenticated:
        worker = _local_worker(request.user)
        return worker, tokens.QualificationPass(worker_id=worker.pk, stage=stage,
                                                next_url=_tasks_url(worker, stage))
    return None, None


def _test_items(attempt, posted=None):
    posted = posted or {}
    items = []
    for number, item in enumerate(qualifications.qualification_items(attempt), start=1):
        name = f"item-{item['id']}"
        items.append({
            "number": number,
            "name": name,
            "kind": item["kind"],
            "question": item["question"],
            "options": [{"value": str(option), "key": index, "checked": posted.get(name) == str(option)}
                        for index, option in enumerate(item["options"] or [], start=1)],
            "text": posted.get(name, "") if item["kind"] == GoldItem.Kind.FREE_TEXT else "",
            "material": gold_material(item["content"]),
        })
    return items


def _render_test(request, stage, worker, grant, attempt, *, posted=None, error="", status=200):
    qualification = attempt.qualification
    page = _TestPage(stage=stage, heading=f"Qualification test: {qualification.name}")
    return render(request, "annotator/qualification.html", {
        "page": page,
        "qualification": qualification,
        "items": _test_items(attempt, posted),
        "pass_percent": round(qualification.pass_score * 100),
        "answer_max_chars": ANSWER_MAX_CHARS,
        "token": tokens.sign_qualification(grant),
        "worker_token": tokens.sign_worker(worker.pk),
        "mturk": False,
        "preview": False,
        "error": error,
        "config": {"draftKey": f"qualification-{attempt.pk}", "preview": False,
                   "idleSeconds": IDLE_SECONDS,
                   "allowedImageHosts": settings.IMAGE_URL_ALLOWED_HOSTS},
    }, status=status)


@csrf_exempt
@annotator_page
def qualify(request, stage):
    """A stage's qualification test: five to ten gold items on one page, submitted once, then each
    item's feedback, the score and whether the worker passed (paper §2.2).

    Exempt from CSRF for the reason given at `submit`: the signed test token is the defence.
    """
    if request.method not in ("GET", "POST"):
        return _problem(request, "Please open the test from its link.", status=405)
    if stage not in PAGES or qualifications.stage_qualification(stage) is None:
        raise Http404("This task has no qualification test.")
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        worker, grant = _test_taker(request, stage)
    except tokens.TokenRefused as error:
        if request.method == "POST":
            return _refuse(request, str(error), wants_json=wants_json)
        return _problem(request, str(error), status=403)
    if worker is None:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    if request.method == "POST":
        return _take_test(request, stage, worker, grant, wants_json=wants_json)
    if "result" in request.GET:
        attempt = (QualificationAttempt.objects.select_related("qualification")
                   .filter(qualification__stage=stage, worker=worker)
                   .exclude(status=QualificationAttempt.Status.STARTED).first())
        if attempt is not None:
            return _test_result(request, stage, worker, grant, attempt)
    granted = WorkerQualification.objects.filter(qualification__stage=stage, worker=worker).first()
    if granted is not None:
        last = (QualificationAttempt.objects.select_related("qualification")
                .filter(qualification__stage=stage, worker=worker).first())
        if granted.status == WorkerQualification.Status.QUALIFIED and last is not None:
            return _test_result(request, stage, worker, grant, last)
    try:
        attempt = qualifications.start_qualification_test(worker, stage)
    except PlatformError as error:
        return _problem(request, str(error), heading="Qualification test")
    return _render_test(request, stage, worker, grant, attempt)


def _take_test(request, stage, worker, grant, *, wants_json):
    attempt = (QualificationAttempt.objects.select_related("qualification")
               .filter(qualification__stage=stage, worker=worker).first())
    if attempt is None:
        return _refuse(request, "Please open the test again from its link.", wants_json=wants_json)
    try:
        answers = _test_answers(request.POST, attempt)
        qualifications.submit_qualification_answers(worker, stage, answers)
    except AnnotationError as error:
        if wants_json:
            return JsonResponse({"ok": False, "error": str(error)}, status=400)
        return _render_test(request, stage, worker, grant, attempt, posted=request.POST,
                            error=str(error), status=400)
    attempt.refresh_from_db()
    if wants_json:
        result_url = (reverse("frontend:qualify", args=[stage]) + "?result=1&q="
                      + tokens.sign_qualification(grant))
        return JsonResponse({"ok": True, "next": result_url})
    return _test_result(request, stage, worker, grant, attempt)


def _test_answers(posted, attempt):
    if attempt.status != QualificationAttempt.Status.STARTED:
        return {}
    answers = {}
    items = GoldItem.objects.in_bulk(attempt.item_ids)
    for number, pk in enumerate(attempt.item_ids, start=1):
        item = items.get(pk)
        text = clean_typed_text(posted.get(f"item-{pk}", ""), what=f"Your answer to question {number}",
                                max_chars=ANSWER_MAX_CHARS)
        if item is None or not text:
            continue
        # The stored answer is the option itself (it may be a number), not its text.
        answer = next((option for option in item.options or [] if str(option) == text),
                      text if item.kind == GoldItem.Kind.FREE_TEXT else None)
        if answer is not None:
            answers[pk] = answer
    return answers


def _test_result(request, stage, worker, grant, attempt):
    qualification = attempt.qualification
    result = qualifications.qualification_result(attempt)
    contents = {item.pk: item.content for item in GoldItem.objects.filter(pk__in=attempt.item_ids)}
    feedback = [
        {"number": number, "item": entry,
         "instruction": gold_material(contents.get(entry.item_id, {})).instruction}
        for number, entry in enumerate(result.feedback, start=1)
    ]
    granted = WorkerQualification.objects.filter(qualification=qualification, worker=worker).first()
    paused = granted is not None and granted.status == WorkerQualification.Status.PAUSED
    retake_at = None
    if attempt.status == QualificationAttempt.Status.FAILED:
        retake_at = attempt.submitted_at + timedelta(hours=qualification.retake_after_hours)
    return render(request, "annotator/qualification_result.html", {
        "qualification": qualification,
        "result": result,
        "feedback": feedback,
        "score_percent": round(result.score * 100) if result.score is not None else None,
        "pass_percent": round(qualification.pass_score * 100),
        "next_url": grant.next_url if result.passed and not paused else "",
        "paused": paused,
        "retake_at": retake_at,
        "retake_url": (reverse("frontend:qualify", args=[stage]) + "?q="
                       + tokens.sign_qualification(grant))
        if retake_at is not None and retake_at <= timezone.now() else "",
        "worker_token": tokens.sign_worker(worker.pk),
    })


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
    via = None
    if "w" in request.GET:
        try:
            worker_id, via = tokens.read_worker(request.GET["w"])
        except tokens.TokenRefused as error:
            return _problem(request, str(error), status=403)
        worker = get_object_or_404(Worker, pk=worker_id)
    elif request.user.is_authenticated:
        worker = _local_worker(request.user)
    else:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    only = None
    if worker.platform == Worker.Platform.MTURK and not _mturk_confirmed(worker, via):
        # Whoever opened a HIT first with this worker id got this link, and MTurk cannot confirm
        # an assignment still being worked on: until it does, the link shows that task only.
        only = [via] if via is not None else []
    rows = qualifications.qualification_status(worker) if only is None else []
    for row in rows:
        if row["status"] in ("not_taken", "started") or (
                row["status"] == "failed" and row["retake_at"] <= timezone.now()):
            row["test_url"] = _qualify_url(worker, row["stage"], next_url=_tasks_url(worker, row["stage"]))
    return render(request, "annotator/worker.html", {
        "worker": worker,
        "tallies": stage_tallies(worker, only=only),
        "rows": recent_work(worker, only=only),
        "qualifications": rows,
        "in_house": worker.platform == Worker.Platform.LOCAL,
        "partial": only is not None,
    })


def _mturk_confirmed(worker, assignment_id):
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


class AnnotatorLoginView(LoginView):
    template_name = "annotator/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self):
        return reverse("frontend:home")


login = annotator_page(AnnotatorLoginView.as_view(), frameable=False)


# In-house annotators log out here (a POST, as Django's LogoutView requires).
logout = annotator_page(LogoutView.as_view(next_page="frontend:login"), frameable=False)
