"""Researcher dashboard views: tournament progress, leaderboards and plots (paper Tables 3-4, Figs. 8-9).

Thin views: the numbers come from annotation.scoring.leaderboard's stored result (one computation per
state of the judgements, made by a background job and shared with the API: a page shows the last one
with its age and never computes), the pictures are the files the same job drew for that result
(annotation.scoring.stored_figures). Both are imported inside the views that use them: pandas and
SciPy then load in a web worker only when a researcher asks for a leaderboard, not in every worker
at start-up, and matplotlib only to draw a figure the job has not drawn.
"""

import functools
import re

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpResponse, HttpResponseNotFound
from django.shortcuts import get_object_or_404, render

from annotation import scoring, teams
from annotation.models import CHIRP_CRITERIA, REFERENCE_MODEL_NAME, JudgeRun, LeaderboardResult, Tournament
from tasks.models import Job

_DATA_KEY = re.compile(r"[0-9a-f]{64}")


def researcher_view(view):
    """Staff who may view tournaments, as the API asks (annotation/api/permissions.py): a
    staff account without that permission reads the crowd's judgements through neither."""
    return staff_member_required(permission_required("annotation.view_tournament",
                                                     raise_exception=True)(view))


def _tournaments(request):
    """The tournaments this researcher's groups own (annotation/teams.py)."""
    return teams.visible(Tournament.objects.all(), request.user)


def _tournament(request, tournament_id):
    return get_object_or_404(_tournaments(request), pk=tournament_id)


def _criterion(request):
    criterion = request.GET.get("criterion", "overall")
    if criterion not in CHIRP_CRITERIA:
        raise Http404("Unknown criterion.")
    return criterion


@researcher_view
def index(request):
    tournaments = _tournaments(request).with_progress().order_by("-created_at")
    runs = teams.visible(JudgeRun.objects.all(), request.user, via="tournament__group")
    runs = runs.select_related("tournament").order_by("-created_at")[:50]
    # A job names no group; its errors may name any group's rows, so members of groups see none.
    failed_jobs = Job.objects.none() if teams.is_member(request.user) and not request.user.is_superuser else (
        Job.objects.filter(status=Job.Status.FAILED).order_by("-updated_at")[:50])
    return render(request, "dashboard/index.html",
                  {"tournaments": tournaments, "runs": runs, "failed_jobs": failed_jobs})


@researcher_view
def leaderboard(request, tournament_id):
    from annotation.scoring import freshness
    tournament = _tournament(request, tournament_id)
    criterion = _criterion(request)
    state = freshness.leaderboard_state(tournament=tournament, criterion=criterion)
    return render(
        request,
        "dashboard/leaderboard.html",
        {
            "tournament": tournament,
            "criterion": criterion,
            "state": state,
            "result": state.result,
            "rounds": scoring.DEFAULT_ROUNDS,
            "min_matches": scoring.MIN_MATCHES,
            "reference_model": REFERENCE_MODEL_NAME,
            "criteria": CHIRP_CRITERIA if tournament.with_criteria else CHIRP_CRITERIA[:1],
            "runs": tournament.judge_runs.order_by("id"),
        },
    )


class FigureReplaced(Exception):
    """The result a figure was named by is gone: two newer ones came since its page was shown."""


def _figure(view):
    """A figure view that answers a replaced result with a plain 404 saying to reload the page."""
    @functools.wraps(view)
    def figure(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except FigureReplaced:
            return HttpResponseNotFound("This figure's leaderboard has been replaced by a newer one: reload the page.",
                                        content_type="text/plain; charset=utf-8")
    return figure


def _result(request, tournament):
    """The stored result the page showed (its figures carry ?v=<data key>), so a figure is the same
    picture for the same key, and the figure of a page beside its table is drawn from the table's
    result (the result before the latest is kept for this). A key whose result is gone (two newer
    ones came meanwhile) is refused, never drawn from another result: the page is reloaded.
    Without a key, the last stored one. A figure never computes anything."""
    from annotation.scoring import freshness
    criterion = _criterion(request)
    key = request.GET.get("v", "")
    if _DATA_KEY.fullmatch(key):
        found = LeaderboardResult.objects.filter(tournament=tournament, criterion=criterion,
                                                 rounds=scoring.DEFAULT_ROUNDS, data_key=key).first()
        if found is None:
            raise FigureReplaced
        return found, True
    stored = freshness.latest_stored(tournament=tournament, criterion=criterion)
    if stored is None:
        raise Http404("The leaderboard is being computed.")
    return stored, False


def _figure_response(request, tournament_id, name):
    """The figure as its file, drawn by the leaderboard job when it stored the result
    (annotation/scoring/stored_figures.py)."""
    from annotation.scoring import stored_figures
    tournament = _tournament(request, tournament_id)
    stored, immutable = _result(request, tournament)
    try:
        picture = stored_figures.figure(stored, name)
    except stored_figures.NoFigure as missing:
        raise Http404(str(missing)) from None
    response = HttpResponse(picture, content_type="image/png")
    # A figure named by its data key never changes; without one it follows the judgements.
    response["Cache-Control"] = "private, max-age=86400, immutable" if immutable else "private, no-cache"
    return response


@researcher_view
@_figure
def elo_plot(request, tournament_id, judge):
    return _figure_response(request, tournament_id, f"elo-{judge}")


@researcher_view
@_figure
def category_plot(request, tournament_id, judge):
    return _figure_response(request, tournament_id, f"categories-{judge}")


@researcher_view
@_figure
def agreement_plot(request, tournament_id, judge):
    return _figure_response(request, tournament_id, f"agreement-{judge}")


@researcher_view
@_figure
def judge_report_length_plot(request, tournament_id):
    from annotation.scoring.stored_figures import JUDGE_REPORT_LENGTH
    return _figure_response(request, tournament_id, JUDGE_REPORT_LENGTH)
