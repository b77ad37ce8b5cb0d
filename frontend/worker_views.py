"""An in-house annotator's home, a worker's own page of their work, and signing in and out."""


from django.contrib.auth.views import LoginView, LogoutView, redirect_to_login
from django.db.models import Count
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from annotation.crowdwork.queue import (
    holds_a_lease,
    units_open_to,
)
from annotation.crowdwork.standing import local_worker
from annotation.models import (
    Worker,
)
from annotation.workforce import qualifications
from crowdbench.security import annotator_page
from frontend import tokens
from frontend.qualification_views import qualify_url, stage_url
from frontend.rendering import problem_page
from frontend.stage_pages import PAGES
from frontend.worker_summary import recent_work, stage_tallies
from mturk import identity


@annotator_page(frameable=False)
@require_GET
def home(request):
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    worker = local_worker(request.user)
    stages = []
    for stage, page in PAGES.items():
        # Per family, so an annotator may choose which family's work to do.
        families = list(units_open_to(worker=worker, stage=stage).values("family", "family__name")
                        .annotate(waiting=Count("pk")).order_by("family__name"))
        # A task they hold is not waiting for them, but they may come back to it from here.
        stages.append({"stage": stage, "heading": page.heading, "families": families,
                       "waiting": sum(family["waiting"] for family in families),
                       "held": holds_a_lease(worker=worker, stage=stage)})
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
            return problem_page(request, str(error), status=403)
        worker = get_object_or_404(Worker, pk=worker_id)
    elif request.user.is_authenticated:
        worker = local_worker(request.user)
    else:
        return redirect_to_login(request.get_full_path(), reverse("frontend:login"))
    only = None
    if identity.assignment_unconfirmed(worker, via):
        # Whoever opened a HIT first with this worker id got this link, and MTurk cannot confirm
        # an assignment still being worked on: until it does, the link shows that task only.
        only = [via] if via is not None else []
    rows = qualifications.qualification_status(worker) if only is None else []
    for row in rows:
        if row["status"] in ("not_taken", "started") or (
                row["status"] == "failed" and row["retake_at"] <= timezone.now()):
            row["test_url"] = qualify_url(worker, row["stage"], next_url=stage_url(worker, row["stage"]))
    return render(request, "annotator/worker.html", {
        "worker": worker,
        "tallies": stage_tallies(worker, only=only),
        "rows": recent_work(worker, only=only),
        "qualifications": rows,
        "in_house": worker.platform == Worker.Platform.LOCAL,
        "partial": only is not None,
    })


class AnnotatorLoginView(LoginView):
    template_name = "annotator/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self):
        return reverse("frontend:home")


login = annotator_page(AnnotatorLoginView.as_view(), frameable=False)


# In-house annotators log out here (a POST, as Django's LogoutView requires).
logout = annotator_page(LogoutView.as_view(next_page="frontend:login"), frameable=False)
