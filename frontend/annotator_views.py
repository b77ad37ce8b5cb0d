"""Annotator pages: the three ways in, the shared stage page, submission and completion.

- MTurk: a HIT's ExternalQuestion points at /work/unit/<unit_id>/ and MTurk adds assignmentId,
  hitId, workerId and turkSubmitTo; a preview comes with assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE.
- CloudResearch Connect / Prolific: a study link /work/<stage>/ with the platform's participant
  and study parameters; the study (mturk.CrowdStudy) says which work and which completion code.
- In-house annotators: logged in, /work/ lists stages with work waiting, /work/<stage>/ the next.

Whoever arrives, the page gets a signed token naming our assignment and worker (frontend/tokens.py)
and the submit endpoint trusts that token only.

What a worker is shown next is one decision of the domain (annotation/crowdwork/next_step.py; for a study
participant with the study's completion code around it, mturk/participants.py), which these views
render and do not make: a held or new lease; now and then a gold item shown on the stage's own page,
whose answer keeps the worker's accuracy current and is never stored as work; where a stage has a
qualification test (paper §2.2) and a platform worker lacks it, /work/qualify/<stage>/; a refusal
(blocked, or paused for low accuracy on gold items) with its reason; or nothing left.
"""


from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from annotation.crowdwork.leases import lease_terms, return_assignment
from annotation.crowdwork.next_step import Step, next_step
from annotation.crowdwork.platform_claims import ClaimConflict
from annotation.crowdwork.queue import keep_lease_alive
from annotation.crowdwork.standing import local_worker
from annotation.exceptions import AnnotationError
from annotation.models import Assignment, InstructionFamily, Worker, WorkUnit
from crowdbench.security import annotator_page
from frontend import tokens
from frontend.answer_forms import answer_of
from frontend.arrival import (
    arrival_token,
    bind_to_browser,
    bound_to_browser,
    client_address,
    known_participants,
    with_new_token,
)
from frontend.qualification_views import qualify_url, submit_gold
from frontend.rendering import (
    LAST_NOTICES,
    lease_for_page,
    page_or_404,
    problem_page,
    refusal,
    render_gold,
    render_stage_page,
    with_notice,
)
from mturk import identity, links
from mturk.models import CrowdStudy
from mturk.participants import (
    ArrivalKeyNeeded,
    StageAsk,
    StudyNotKnown,
    TooManyNewParticipants,
    done_in_study,
    earned_code,
    finish_participating,
    may_stop,
    next_step_asked,
)

# --- ways in -----------------------------------------------------------------------------------


@annotator_page
@require_GET
def unit_page(request, unit_id):
    """One given unit: an MTurk HIT (preview or accepted), or an in-house annotator's link."""
    unit = get_object_or_404(
        WorkUnit.objects.select_related("family", "instance", "reference__caption"), pk=unit_id
    )
    page = page_or_404(unit.stage)
    params = request.GET
    if "assignmentId" in params or "hitId" in params:
        return _mturk_unit(request, page, unit, params)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    worker = local_worker(request.user)
    try:
        step = next_step(worker=worker, stage=unit.stage, unit=unit, shows_gold=page.shows_gold)
    except AnnotationError as error:
        return problem_page(request, str(error))
    return _shown(request, page, step, next_url=request.get_full_path())


def _mturk_unit(request, page, unit, params):
    try:
        arrival = identity.hit_arrival(unit, params)
    except identity.NotOnMTurk as refused:
        return problem_page(request, str(refused), status=404)
    except identity.IncompleteHitLink as refused:
        return problem_page(request, str(refused), status=400)
    if arrival.preview:
        # MTurk's preview: show the task read-only; nothing is leased until the HIT is accepted.
        if unit.status != WorkUnit.Status.OPEN:
            return problem_page(request, "This task already has all the answers it needs.")
        return render_stage_page(request, page, unit, preview=True)
    try:
        worker, rebind = identity.admit_mturk_worker(unit=unit, arrival=arrival)
    except identity.IdentityRefused as refused:
        return problem_page(request, str(refused), status=403)
    try:
        step = next_step(worker=worker, stage=unit.stage, unit=unit, platform_assignment_id=arrival.assignment_id,
                         platform_listing_id=arrival.hit_id, rebind=rebind, shows_gold=page.shows_gold)
    except ClaimConflict:
        # Another load of this HIT bound a different pair a moment ago.
        return problem_page(request, identity.MTURK_NOT_CONFIRMED, status=403)
    except AnnotationError as error:
        return problem_page(request, str(error))
    return _shown(request, page, step, next_url=request.get_full_path(), mturk=True,
                  grant={"turk_submit_to": arrival.submit_origin, "mturk_assignment_id": arrival.assignment_id})


@annotator_page
@require_GET
def stage_page(request, stage):
    """The next unit of a stage, for a study participant or an in-house annotator: the request is
    read once (`_asked`), the domain asked once (`next_step_asked`), and its answer rendered
    (`_answered`)."""
    page = page_or_404(stage)
    try:
        ask = _asked(request, stage)
    except tokens.TokenRefused as error:
        return problem_page(request, str(error), status=403)
    except links.IncompleteLink as error:
        return problem_page(request, str(error), status=400)
    if not ask.given_back_too and "take" not in request.GET:
        # After a give-back the next task waits for the worker to ask: leased at once, it was held
        # from others while they took a break or left (issue 38: the last open caption, for 5
        # minutes). The button asks for this same URL with `take`, so the unit given back comes last.
        may_finish = may_stop(ask)
        if may_finish is None:
            return problem_page(request, tokens.FORGED_MESSAGE, status=403)
        return render(request, "annotator/given_back.html", {
            "page": page, "query": [(name, value) for name, value in request.GET.items() if name != "take"],
            "finish_token": request.GET["continue"] if may_finish else "", "in_house": not ask.in_study,
        })
    if not ask.in_study and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    try:
        study, step = next_step_asked(ask, shows_gold=page.shows_gold)
    except ArrivalKeyNeeded as needed:
        return redirect(with_new_token(request, ask.arrival, needed.study))
    except StudyNotKnown as error:
        return problem_page(request, str(error), status=404)
    except identity.IdentityRefused as refused:
        return problem_page(request, str(refused), status=403)
    except TooManyNewParticipants as refused:
        throttled = problem_page(request, str(refused), status=429, heading="Please try again later")
        throttled["Retry-After"] = str(refused.retry_after)
        return throttled
    if step is None:
        return problem_page(request, tokens.FORGED_MESSAGE, status=403)
    return _answered(request, page, step, ask=ask, study=study)


def _asked(request, stage):
    """What a stage page's request asks, as plain values (StageAsk): a study session's signed token
    (`continue`), else a study link's arrival, and what the browser holds; else the signed-in
    annotator and the family they chose. Raises TokenRefused or IncompleteLink."""
    params = request.GET
    # An in-house annotator's choice is kept in their session; a study session's request makes none.
    family = None if "continue" in params else _chosen_family(request, stage)
    asked = {"stage": stage, "given_back_too": params.get("after") != "given-back",
             "known_here": known_participants(request), "client_address": client_address(request)}
    token = arrival_token(request)
    if "continue" in params:
        session = tokens.read_session(params["continue"])
        return StageAsk(**asked, worker_id=session.worker_id, study_id=session.study_id,
                        platform_session_id=session.platform_session_id)
    arrival = links.study_arrival(params)
    if arrival is None:
        return StageAsk(**asked, user=request.user, family=family)
    return StageAsk(**asked, arrival=arrival, platform_session_id=arrival.session_id, arrival_token=token)


def _chosen_family(request, stage):
    """The family an in-house annotator chose for a stage on their home page (?family=<id>; kept in
    their session for the tasks that follow, until they choose "any"), or None for any family or
    for anybody not signed in (a study participant has their study's)."""
    if not request.user.is_authenticated:
        return None
    choices = request.session.get("work_families", {})
    value = request.GET.get("family", choices.get(stage, ""))
    family = None
    if value and value.isascii() and value.isdigit() and len(value) <= 18:
        family = InstructionFamily.objects.filter(pk=int(value)).first()
    if "family" in request.GET:
        request.session["work_families"] = {**choices, stage: str(family.pk) if family else ""}
    return family


def _answered(request, page, step, *, ask, study):
    """The page of the domain's answer to a stage page's request: a study's, whose participant this
    browser now holds, or an in-house annotator's."""
    if study is None:
        return _shown(request, page, step, next_url=request.get_full_path())
    shown = _shown_in_study(request, page, step, study=study, session=tokens.StudySession(
        worker_id=step.worker.pk, study_id=study.pk, platform_session_id=ask.platform_session_id))
    if ask.arrival is not None:
        bind_to_browser(request, step.worker.pk)
    return shown


def _shown_in_study(request, page, step, *, study, session):
    if step.kind == Step.COMPLETION:
        return _completion(request, study, step.completion, again=step.again)
    if step.kind == Step.NOTHING:
        return problem_page(
            request, "There are no tasks for you right now. Please return the study on your "
            "platform; you have not been charged any time.", heading="No tasks right now",
        )
    next_url = reverse("frontend:stage", args=[study.stage]) + "?continue=" + tokens.sign_session(session)
    return _shown(request, page, step, next_url=next_url, study=study, session=session,
                  grant={"study_id": study.pk, "platform_session_id": session.platform_session_id})


def _shown(request, page, step, *, next_url, study=None, session=None, mturk=False, grant=None):
    """The page of a decision of annotation.crowdwork.next_step: what the worker is shown next."""
    worker = step.worker
    if step.kind == Step.LEASE:
        assignment = step.assignment
        grant = tokens.AssignmentGrant(assignment_id=assignment.pk, worker_id=worker.pk, **(grant or {}))
        return render_stage_page(request, page, assignment.unit, assignment=assignment, grant=grant, study=study,
                                 lease=step.lease, done=step.done)
    if step.kind == Step.QUALIFICATION_TEST:
        return redirect(qualify_url(worker, page.stage, next_url=next_url))
    if step.kind == Step.GOLD:
        grant = tokens.GoldGrant(item_id=step.gold_item["id"], worker_id=worker.pk, stage=page.stage,
                                 next_url=next_url)
        return render_gold(request, page, step.gold_item, grant, worker=worker, study=study, session=session,
                           mturk=mturk, done=step.done)
    if step.kind == Step.BLOCKED:
        return problem_page(request, step.reason, heading="No tasks for you here")
    if step.kind == Step.PAUSED:
        context = {"heading": "Your work on these tasks is paused", "message": step.reason}
        if step.may_finish:
            context["finish_token"] = tokens.sign_session(session)
        return render(request, "annotator/problem.html", context)
    return render(request, "annotator/nothing_waiting.html", {
        "page": page, "notice": LAST_NOTICES.get(request.GET.get("after", ""), "")})


def _completion(request, study, completion, *, again=False):
    return render(request, "annotator/completion.html", {"study": study, "completion": completion, "again": again})


# --- submitting --------------------------------------------------------------------------------


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
        grant = tokens.read_form_grant(request.POST.get("token", ""))
    except tokens.TokenRefused as error:
        return refusal(request, str(error), wants_json=wants_json)
    if isinstance(grant, tokens.GoldGrant):
        return submit_gold(request, grant, wants_json=wants_json)
    # Only what every submit reads: the page's own parts are fetched when it is shown again with an
    # error, since PostgreSQL plans every join of this query on every submit.
    assignment = (
        Assignment.objects.select_related("worker", "unit")
        .filter(pk=grant.assignment_id, worker_id=grant.worker_id).first()
    )
    if assignment is None:
        return refusal(request, tokens.FORGED_MESSAGE, wants_json=wants_json)
    worker = assignment.worker
    if worker.platform == Worker.Platform.LOCAL and worker.user_id != request.user.pk:
        # An in-house annotator's token is good only in their own logged-in session.
        return refusal(request, "Please log in again to save this answer.", wants_json=wants_json)
    if grant.turk_submit_to and grant.mturk_assignment_id != assignment.platform_assignment_id:
        # MTurk confirmed a newer assignment for this task: this page belongs to an older one.
        return refusal(request, "This task was opened again under another MTurk assignment. "
                       "Please continue there.", wants_json=wants_json)
    page = page_or_404(assignment.unit.stage)
    form = page.form(request.POST, request.FILES)
    # A task answered already (its page again by the Back button) keeps its first answer: the page
    # after says so, where "Saved" would tell the worker their changed answer was stored.
    answered_before = assignment.status == Assignment.Status.SUBMITTED
    try:
        label = page.store(answer=answer_of(form), assignment_id=assignment.pk, worker=worker)
    except AnnotationError as error:
        if wants_json:
            return JsonResponse({"ok": False, "error": str(error)}, status=400)
        study = CrowdStudy.objects.filter(pk=grant.study_id).first() if grant.study_id else None
        return render_stage_page(request, page, assignment.unit, assignment=assignment, grant=grant,
                                 study=study, lease=lease_terms(assignment),
                                 done=done_in_study(worker, study) if study else 0,
                                 form=form, error=str(error), status=400)
    if grant.turk_submit_to:
        # MTurk learns of the work only from this POST, made by the worker's browser.
        handback = {"action": f"{grant.turk_submit_to}/mturk/externalSubmit",
                    "fields": {"assignmentId": grant.mturk_assignment_id,
                               "submission": label}}
        if wants_json:
            return JsonResponse({"ok": True, "submission": label, "mturk": handback})
        return render(request, "annotator/mturk_handback.html", {"handback": handback})
    next_url = with_notice(_next_unit_url(assignment, grant), "kept" if answered_before else "saved")
    if wants_json:
        return JsonResponse({"ok": True, "submission": label, "next": next_url})
    return redirect(next_url)


def _next_unit_url(assignment, grant):
    next_url = reverse("frontend:stage", args=[assignment.unit.stage])
    if grant.session is not None:
        next_url += "?continue=" + tokens.sign_session(grant.session)
    return next_url


# Exempt from CSRF for the reason given at `submit`: the task's signed token is the defence.
@csrf_exempt
@annotator_page
@require_POST
def heartbeat(request):
    """The task page's sign of life while its worker is active: the lease runs on. JSON only."""
    try:
        grant = tokens.read_assignment(request.POST.get("token", ""))
    except tokens.TokenRefused as error:
        return JsonResponse({"ok": False, "error": str(error)}, status=403)
    assignment = Assignment.objects.filter(pk=grant.assignment_id, worker_id=grant.worker_id) \
        .select_related("worker", "unit").first()
    if assignment is None or (assignment.worker.platform == Worker.Platform.LOCAL
                              and assignment.worker.user_id != request.user.pk):
        return JsonResponse({"ok": False, "error": tokens.FORGED_MESSAGE}, status=403)
    try:
        keep_lease_alive(assignment=assignment)
    except AnnotationError as error:
        return JsonResponse({"ok": False, "error": str(error)}, status=409)
    # Read again: a lease taken back after it lapsed has a new start, and with it a new limit.
    assignment.refresh_from_db(fields=["leased_at", "lease_expires_at"])
    return JsonResponse({"ok": True, **lease_for_page(lease_terms(assignment))})


# Exempt from CSRF for the reason given at `submit`: the task's signed token is the defence.
@csrf_exempt
@annotator_page
@require_POST
def give_back(request):
    """The worker gives the task on screen back: its lease ends now, so the slot is free for someone
    else at once, and the worker is offered their next task, leased when they ask (on MTurk: asked
    to return the HIT there)."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        grant = tokens.read_form_grant(request.POST.get("token", ""))
    except tokens.TokenRefused as error:
        return refusal(request, str(error), wants_json=wants_json)
    if isinstance(grant, tokens.GoldGrant):
        # A check question holds no lease; nothing is recorded and the worker moves on.
        next_url = with_notice(grant.next_url or reverse("frontend:home"), "given-back")
        return JsonResponse({"ok": True, "next": next_url}) if wants_json else redirect(next_url)
    assignment = (Assignment.objects.select_related("worker", "unit")
                  .filter(pk=grant.assignment_id, worker_id=grant.worker_id).first())
    if assignment is None:
        return refusal(request, tokens.FORGED_MESSAGE, wants_json=wants_json)
    if assignment.worker.platform == Worker.Platform.LOCAL and assignment.worker.user_id != request.user.pk:
        return refusal(request, "Please log in again to give this task back.", wants_json=wants_json)
    if grant.turk_submit_to and grant.mturk_assignment_id != assignment.platform_assignment_id:
        return refusal(request, tokens.FORGED_MESSAGE, wants_json=wants_json)
    return_assignment(assignment=assignment)
    if grant.turk_submit_to:
        # Only MTurk can end the worker's assignment there; our slot is free already.
        page = render(request, "annotator/problem.html", {
            "heading": "Task given back",
            "message": "This task is free for someone else now. Please press “Return” on MTurk "
                       "to give the HIT back there too; you will not be charged for it."})
        return JsonResponse({"ok": True, "next": ""}) if wants_json else page
    next_url = with_notice(_next_unit_url(assignment, grant), "given-back")
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
        return problem_page(request, str(error), status=403)
    study = get_object_or_404(CrowdStudy, pk=session.study_id)
    worker = get_object_or_404(Worker, pk=session.worker_id)
    if not bound_to_browser(request, worker.pk):
        # The code goes only to the browser that did the work, not to whoever holds its token.
        return problem_page(request, identity.STUDY_NOT_CONFIRMED, status=403)
    if not earned_code(worker=worker, study=study, platform_session_id=session.platform_session_id):
        return problem_page(request, "Finish a task first: the code is given once your first answer "
                        "is saved.", heading="No code yet")
    finish_participating(worker=worker, study=study, platform_session_id=session.platform_session_id)
    return _completion(request, study, links.completion(study))
