"""How an annotator page is answered: the page of a unit or of a live gold item, a problem page, and
the notices shown after an action."""


from django.conf import settings
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac

from frontend import tokens
from frontend.arrival import IDLE_SECONDS
from frontend.page_parts import gold_material
from frontend.stage_pages import PAGES


def page_or_404(stage):
    page = PAGES.get(stage)
    if page is None:
        raise Http404("No such kind of task.")
    return page


def problem_page(request, message, *, status=200, heading="This task is not available"):
    return render(request, "annotator/problem.html", {"heading": heading, "message": message},
                  status=status)


# What the page after a submit or a give-back says about it (`?after=`), so it is seen whichever
# way the worker moved on (with or without JavaScript, without cookies inside MTurk's iframe).
NOTICES = {
    "saved": "Saved. Your answer is stored; here is the next task.",
    "kept": "You had already submitted that task, so your first answer is kept; here is the next task.",
    "given-back": "Task given back: it is free for someone else now. Here is the next one.",
}
# The same, on the page that says nothing is left: there is no next task to point to.
LAST_NOTICES = {
    "saved": "Saved. Your answer is stored.",
    "kept": "You had already submitted that task, so your first answer is kept.",
    "given-back": "Task given back: it is free for someone else now.",
}


def with_notice(url, what):
    return f"{url}{'&' if '?' in url else '?'}after={what}"


def _task_page(request, page, material, *, form, study, done, session, token, worker_token, draft_key,
               mturk=False, preview=False, can_give_back=True, error="", status=200, **context):
    """A task's page (`page.template`), the same for a unit and for a live gold item: the worker
    cannot tell them apart. `form` is a refused answer's, shown again as posted with `error`."""
    context = {**page.context(material, form or page.form(shown=material)), **context}
    config = context.pop("config", {})
    context.update({
        "notice": NOTICES.get(request.GET.get("after", "")) if form is None else "",
        "can_give_back": can_give_back,
        "page": page,
        "preview": preview,
        "mturk": mturk,
        "token": token,
        "study": study,
        "done_in_study": done,
        "session_token": tokens.sign_session(session) if session else "",
        "worker_token": worker_token,
        "error": error,
        "config": {"draftKey": draft_key, "preview": preview, "idleSeconds": IDLE_SECONDS,
                   "allowedImageHosts": settings.IMAGE_URL_ALLOWED_HOSTS, **config},
    })
    return render(request, page.template, context, status=status)


def render_stage_page(request, page, unit, *, assignment=None, grant=None, preview=False,
                      study=None, lease=None, done=0, form=None, error="", status=200):
    """A unit's page; `lease` is the assignment's terms (annotation.crowdwork.leases.LeaseTerms), `done` the
    study's tasks the worker has submitted, and `form` a refused answer's, shown again as posted
    with `error`."""
    keeps_lease = bool(assignment and grant and not preview)
    return _task_page(
        request, page, page.material(unit, assignment), form=form, study=study, done=done,
        session=grant.session if grant else None, preview=preview, error=error, status=status,
        can_give_back=bool(grant) and not preview, mturk=bool(grant and grant.turk_submit_to) or preview,
        token=tokens.sign_assignment(grant) if grant else "",
        worker_token=tokens.sign_worker(grant.worker_id, assignment_id=grant.assignment_id) if grant else "",
        draft_key=f"assignment-{assignment.pk}" if assignment else "",
        unit=unit, assignment=assignment,
        config={
            # A leased task's page keeps its lease alive while its worker is active.
            "heartbeatUrl": reverse("frontend:heartbeat") if keeps_lease else "",
            "heartbeatSeconds": settings.LEASE_HEARTBEAT_SECONDS,
            "lease": lease_for_page(lease) if keeps_lease else None,
            "leaseWarningSeconds": settings.LEASE_WARNING_SECONDS,
        },
    )


def render_gold(request, page, item, grant, *, worker, study=None, session=None, mturk=False, done=0,
                form=None, error="", status=200):
    """A live gold item (annotation.crowdwork.next_step), rendered exactly as the stage's own task: same
    template, same controls, same button, same form; `form` is a refused answer's."""
    draft = salted_hmac("crowdbench.frontend.draft", f"{worker.pk}:{item['id']}").hexdigest()[:16]
    return _task_page(request, page, gold_material(item["content"]), form=form, study=study, done=done,
                      session=session, mturk=mturk, error=error, status=status, token=tokens.sign_gold(grant),
                      worker_token=tokens.sign_worker(worker.pk), draft_key=f"task-{draft}")


def lease_for_page(terms):
    """A lease's terms as the task page and its heartbeat read them. The page counts down from
    `expires_in`, not from the time: the worker's clock may be minutes off ours."""
    return {"expires_at": terms.expires_at.isoformat(),
            "expires_in": max(0, int((terms.expires_at - timezone.now()).total_seconds())),
            "renewable": terms.renewable}


def refusal(request, message, *, wants_json):
    if wants_json:
        return JsonResponse({"ok": False, "error": message}, status=403)
    return problem_page(request, message, status=403, heading="This answer could not be saved")
