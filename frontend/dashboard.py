"""Researcher dashboard views: study progress, leaderboards and plots (paper Tables 3-4, Figs. 8-9).

Thin views: the numbers come from annotation.leaderboard (which calls annotation.ratings and
annotation.agreement), the pictures from annotation.plots.
"""

from django.contrib.admin.views.decorators import staff_member_required
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render

from annotation import leaderboard as boards
from annotation import plots, ratings
from annotation.models import CHIRP_CRITERIA, REFERENCE_MODEL_NAME, JudgeRun, PreferenceStudy


def _criterion(request):
    criterion = request.GET.get("criterion", "overall")
    if criterion not in CHIRP_CRITERIA:
        raise Http404("Unknown criterion.")
    return criterion


def _png(data):
    response = HttpResponse(data, content_type="image/png")
    # The leaderboard changes as judgements arrive; a stale plot would contradict the table.
    response["Cache-Control"] = "private, no-cache"
    return response


@staff_member_required
def index(request):
    studies = PreferenceStudy.objects.annotate(
        battle_total=Count("battles", distinct=True),
        human_total=Count("battles__human_judgements", distinct=True),
    ).order_by("-created_at")
    runs = JudgeRun.objects.select_related("study").order_by("-created_at")[:50]
    return render(request, "dashboard/index.html", {"studies": studies, "runs": runs})


@staff_member_required
def leaderboard(request, study_id):
    study = get_object_or_404(PreferenceStudy, pk=study_id)
    criterion = _criterion(request)
    leaderboards = boards.study_leaderboards(study=study, criterion=criterion)
    agreement = boards.agreement_rows(boards.study_agreements(study=study, criterion=criterion))
    return render(
        request,
        "dashboard/leaderboard.html",
        {
            "study": study,
            "criterion": criterion,
            "leaderboards": leaderboards,
            "agreement": agreement,
            "reference_model": REFERENCE_MODEL_NAME,
            "criteria": CHIRP_CRITERIA if study.with_criteria else CHIRP_CRITERIA[:1],
            "runs": study.judge_runs.order_by("id"),
        },
    )


def _battles_of(study, judge, criterion):
    for _title, key, battles in boards.evaluator_battles(study=study, criterion=criterion):
        if key == judge:
            return battles
    raise Http404("No such evaluator in this study.")


@staff_member_required
def elo_plot(request, study_id, judge):
    study = get_object_or_404(PreferenceStudy, pk=study_id)
    battles = _battles_of(study, judge, _criterion(request))
    if battles.empty:
        raise Http404("No battles judged yet.")
    return _png(plots.elo_interval_plot(ratings.bootstrap_elo(battles, seed=study.seed)))


@staff_member_required
def category_plot(request, study_id, judge):
    study = get_object_or_404(PreferenceStudy, pk=study_id)
    battles = _battles_of(study, judge, _criterion(request))
    if battles.empty:
        raise Http404("No battles judged yet.")
    return _png(
        plots.category_heatmap(
            ratings.category_win_rates(battles, reference_model=REFERENCE_MODEL_NAME)
        )
    )


@staff_member_required
def agreement_plot(request, study_id, judge):
    study = get_object_or_404(PreferenceStudy, pk=study_id)
    for found in boards.study_agreements(study=study, criterion=_criterion(request)):
        if found.key == judge:
            return _png(
                plots.agreement_bars(
                    found.majority, title=f"{found.judge}: agreement with the crowd majority"
                )
            )
    raise Http404("This judge shares no battles with the crowd yet.")
