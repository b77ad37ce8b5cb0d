"""Qualification tests and live gold items on the annotator pages (paper §2.2;
annotation/workforce/qualifications.py)."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from annotation.crowdwork.standing import local_worker
from annotation.exceptions import AnnotationError, WorkerFacingError
from annotation.models import (
    GoldItem,
    QualificationAttempt,
    Worker,
    WorkerQualification,
)
from annotation.typed_text import ANSWER_MAX_CHARS
from annotation.workforce import qualifications
from crowdbench.security import annotator_page
from frontend import tokens
from frontend.answer_forms import PageForm, TypedTextField, answer_of
from frontend.arrival import IDLE_SECONDS, NewArrival, study_participant
from frontend.page_parts import gold_material
from frontend.rendering import problem_page, refusal, render_gold
from frontend.stage_pages import PAGES
from mturk import identity, links
from mturk.models import CrowdStudy
from mturk.platforms import backend_class


def qualify_url(worker, stage, *, next_url=""):
    grant = tokens.QualificationPass(worker_id=worker.pk, stage=stage, next_url=next_url)
    return reverse("frontend:qualify", args=[stage]) + "?q=" + tokens.sign_qualification(grant)


def stage_url(worker, stage):
    """Where a worker finds a stage's tasks on their own: only in-house annotators have such a page;
    platform workers come back through their platform's link."""
    return reverse("frontend:stage", args=[stage]) if worker.platform == Worker.Platform.LOCAL else ""


def submit_gold(request, grant, *, wants_json):
    worker = Worker.objects.filter(pk=grant.worker_id).first()
    item = GoldItem.objects.filter(pk=grant.item_id, qualification__stage=grant.stage).first()
    page = PAGES.get(grant.stage)
    if worker is None or item is None or page is None or not page.shows_gold:
        return refusal(request, tokens.FORGED_MESSAGE, wants_json=wants_json)
    if worker.platform == Worker.Platform.LOCAL and worker.user_id != request.user.pk:
        return refusal(request, "Please log in again to save this answer.", wants_json=wants_json)
    shown = {"id": item.pk, "kind": item.kind, "content": item.content, "question": item.question,
             "options": item.options}
    form = page.form(request.POST, request.FILES, shown=gold_material(item.content))
    try:
        answer = page.gold_answer(answer_of(form))
    except AnnotationError as error:
        if wants_json:
            return JsonResponse({"ok": False, "error": str(error)}, status=400)
        return render_gold(request, page, shown, grant, worker=worker, form=form, error=str(error), status=400)
    qualifications.record_live_gold_answer(worker, item.pk, answer)
    next_url = grant.next_url or reverse("frontend:worker") + "?w=" + tokens.sign_worker(worker.pk)
    if wants_json:
        return JsonResponse({"ok": True, "next": next_url})
    return redirect(next_url)


@dataclass(frozen=True)
class _TestPage:
    """What annotator/stage_page.html needs of a page, for the qualification test."""

    stage: str
    heading: str
    layout: str = "single"
    shortcuts: tuple = (("1 / 2 / …", "choose an answer, then the next question"),
                        ("Tab", "move between questions"), ("Ctrl+Enter", "submit"))


def _test_taker(request, stage):
    """(worker, QualificationPass) for whoever opened the test, or (None, None) for a login; raises
    TokenRefused, or NewArrival for a new participant's study link (frontend/arrival.py)."""
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
    try:
        arrival = links.study_arrival(params)
    except links.IncompleteLink as error:
        raise Http404(str(error)) from None
    if arrival is not None:
        study = CrowdStudy.objects.filter(platform=arrival.platform, external_id=arrival.study_id,
                                          stage=stage).first()
        if study is None:
            raise Http404("This study is not known here. Please tell the researchers.")
        try:
            worker = study_participant(request, arrival=arrival, study=study)
        except identity.IdentityRefused as refused:
            raise tokens.TokenRefused(str(refused)) from None
        session = tokens.StudySession(worker_id=worker.pk, study_id=study.pk,
                                      platform_session_id=arrival.session_id)
        next_url = reverse("frontend:stage", args=[stage]) + "?continue=" + tokens.sign_session(session)
        return worker, tokens.QualificationPass(worker_id=worker.pk, stage=stage, next_url=next_url)
    if params.get("workerId"):
        # A bare MTurk worker id proves nothing; MTurk workers reach the test from a HIT, whose
        # page sends them here with a signed pass once their assignment's claim holds.
        raise tokens.TokenRefused("Please open the test from a HIT of this study on MTurk.")
    if request.user.is_authenticated:
        worker = local_worker(request.user)
        return worker, tokens.QualificationPass(worker_id=worker.pk, stage=stage,
                                                next_url=stage_url(worker, stage))
    return None, None


class TestAnswersForm(PageForm):
    """The answers to a test's items (`item-<id>`), each an option of its item or, for a free-text
    item, the text typed; an answer that is neither counts as unanswered."""

    def __init__(self, data=None, *, items, **kwargs):
        """`items`: the test's item ids in the order shown, each with its GoldItem (None if gone)."""
        super().__init__(data, **kwargs)
        self.items = items
        for number, (pk, _) in enumerate(items, start=1):
            self.fields[f"item-{pk}"] = TypedTextField(what=f"Your answer to question {number}",
                                                       max_chars=ANSWER_MAX_CHARS)

    def clean(self):
        answers = {}
        for pk, item in self.items:
            text = self.cleaned_data.get(f"item-{pk}")
            if item is None or not text:
                continue
            # The stored answer is the option itself (it may be a number), not its text.
            answer = next((option for option in item.options or [] if str(option) == text),
                          text if item.kind == GoldItem.Kind.FREE_TEXT else None)
            if answer is not None:
                answers[pk] = answer
        return {"answers": answers}


def _test_items(attempt, form):
    items = []
    for number, item in enumerate(qualifications.qualification_items(attempt), start=1):
        name = f"item-{item['id']}"
        items.append({
            "number": number,
            "name": name,
            "kind": item["kind"],
            "question": item["question"],
            "options": [{"value": str(option), "key": index, "checked": form.shown(name) == str(option)}
                        for index, option in enumerate(item["options"] or [], start=1)],
            "text": form.shown(name) if item["kind"] == GoldItem.Kind.FREE_TEXT else "",
            "material": gold_material(item["content"]),
        })
    return items


def _render_test(request, stage, worker, grant, attempt, *, form=None, error="", status=200):
    qualification = attempt.qualification
    page = _TestPage(stage=stage, heading=f"Qualification test: {qualification.name}")
    return render(request, "annotator/qualification.html", {
        "page": page,
        "qualification": qualification,
        "items": _test_items(attempt, form or TestAnswersForm(items=())),
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
        return problem_page(request, "Please open the test from its link.", status=405)
    if stage not in PAGES or qualifications.stage_qualification(stage) is None:
        raise Http404("This task has no qualification test.")
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        worker, grant = _test_taker(request, stage)
    except NewArrival as first:
        return redirect(first.location)
    except tokens.TokenRefused as error:
        if request.method == "POST":
            return refusal(request, str(error), wants_json=wants_json)
        return problem_page(request, str(error), status=403)
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
    except WorkerFacingError as error:
        return problem_page(request, str(error), heading="Qualification test")
    return _render_test(request, stage, worker, grant, attempt)


def _take_test(request, stage, worker, grant, *, wants_json):
    attempt = (QualificationAttempt.objects.select_related("qualification")
               .filter(qualification__stage=stage, worker=worker).first())
    if attempt is None:
        return refusal(request, "Please open the test again from its link.", wants_json=wants_json)
    items = []
    if attempt.status == QualificationAttempt.Status.STARTED:
        # A test submitted already reads no answers: the service says so.
        found = GoldItem.objects.in_bulk(attempt.item_ids)
        items = [(pk, found.get(pk)) for pk in attempt.item_ids]
    form = TestAnswersForm(request.POST, items=items)
    try:
        qualifications.submit_qualification_answers(worker, stage, answer_of(form)["answers"])
    except AnnotationError as error:
        if wants_json:
            return JsonResponse({"ok": False, "error": str(error)}, status=400)
        return _render_test(request, stage, worker, grant, attempt, form=form, error=str(error), status=400)
    attempt.refresh_from_db()
    if wants_json:
        result_url = (reverse("frontend:qualify", args=[stage]) + "?result=1&q="
                      + tokens.sign_qualification(grant))
        return JsonResponse({"ok": True, "next": result_url})
    return _test_result(request, stage, worker, grant, attempt)


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
    retake_now = retake_at is not None and retake_at <= timezone.now()
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
                       + tokens.sign_qualification(grant)) if retake_now else "",
        "give_back": _give_back_after_failing(worker, retake_now=retake_now)
        if attempt.status == QualificationAttempt.Status.FAILED else "",
        "worker_token": tokens.sign_worker(worker.pk),
    })


def _give_back_after_failing(worker, *, retake_now):
    """What a platform worker who failed the test should do on their platform: give their place
    back, so that it goes to someone who can do the work rather than waiting out its time."""
    step = backend_class(worker.platform).give_back_step
    if not step:
        return ""
    if retake_now:
        return f"These tasks need the test passed. If you do not take it again now, please {step}."
    return f"These tasks need the test passed, so there is no work for you here now. Please {step}."
