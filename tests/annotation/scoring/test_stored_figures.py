"""A leaderboard's figures are drawn once per stored result, by its job, and served as files
(issue 42: every figure was drawn again on each request, 0.25 to 0.97 s each)."""

import io

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.urls import reverse
from PIL import Image

from annotation.models import LeaderboardResult, Tournament
from annotation.scoring import stored_figures
from annotation.scoring.freshness import refresh_leaderboard
from tasks.scoring import refresh_leaderboard_job
from tests.annotation.scoring.test_leaderboard import PNG

pytestmark = pytest.mark.django_db


def _files(stored):
    _, names = storages["figures"].listdir(f"leaderboards/{stored.tournament_id}/{stored.data_key}")
    return sorted(names)


def _png_of_colour(colour):
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def _figure_urls(tournament, run):
    return {
        "elo-human": reverse("dashboard:elo_plot", args=[tournament.pk, "human"]),
        f"elo-run-{run.pk}": reverse("dashboard:elo_plot", args=[tournament.pk, f"run-{run.pk}"]),
        "categories-human": reverse("dashboard:category_plot", args=[tournament.pk, "human"]),
        f"categories-run-{run.pk}": reverse("dashboard:category_plot", args=[tournament.pk, f"run-{run.pk}"]),
        f"agreement-run-{run.pk}": reverse("dashboard:agreement_plot", args=[tournament.pk, f"run-{run.pk}"]),
        stored_figures.JUDGE_REPORT_LENGTH: reverse("dashboard:judge_report_length_plot", args=[tournament.pk]),
    }


# Transactional: a job records its attempts on fresh connections, as in production.
@pytest.mark.django_db(transaction=True)
def test_the_job_draws_every_figure_the_page_shows_and_the_page_serves_those_files(
        judged_tournament_three_workers, staff_client):
    tournament, run = judged_tournament_three_workers
    Tournament.objects.filter(pk=tournament.pk).update(seed=tournament.seed + 1)  # a state not yet stored

    assert refresh_leaderboard_job.apply(args=[tournament.pk, "overall", 1000]).get() == 1

    stored = LeaderboardResult.objects.filter(tournament=tournament).order_by("-computed_at", "-id").first()
    urls = _figure_urls(tournament, run)
    assert _files(stored) == sorted(f"{name}.png" for name in urls)
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()
    for name, url in urls.items():
        assert url in page
        # The file, not a drawing: a file replaced by another picture is what the page serves.
        marked = _png_of_colour((len(name), 0, 0))
        path = f"leaderboards/{tournament.pk}/{stored.data_key}/{name}.png"
        storages["figures"].delete(path)
        storages["figures"].save(path, ContentFile(marked))
        response = staff_client.get(url, {"v": stored.data_key})
        assert response.status_code == 200 and response["Content-Type"] == "image/png"
        assert response.content == marked


def test_a_result_stored_without_figures_has_each_drawn_and_kept_by_its_first_request(
        judged_tournament_three_workers, staff_client):
    tournament, _ = judged_tournament_three_workers
    stored = refresh_leaderboard(tournament=tournament)  # as the command and a snapshot store one
    url = reverse("dashboard:elo_plot", args=[tournament.pk, "human"])
    with pytest.raises(FileNotFoundError):
        _files(stored)

    first = staff_client.get(url, {"v": stored.data_key})

    assert first.status_code == 200 and first.content.startswith(PNG)
    assert _files(stored) == ["elo-human.png"]
    assert staff_client.get(url, {"v": stored.data_key}).content == first.content


def test_a_figure_with_nothing_to_draw_says_why_and_keeps_no_file(judged_tournament_three_workers, staff_client):
    tournament, _ = judged_tournament_three_workers
    stored = refresh_leaderboard(tournament=tournament)
    for url in (reverse("dashboard:elo_plot", args=[tournament.pk, "human-x"]),
                reverse("dashboard:elo_plot", args=[tournament.pk, "run-999"]),
                reverse("dashboard:category_plot", args=[tournament.pk, "run-999"]),
                reverse("dashboard:agreement_plot", args=[tournament.pk, "human"])):
        assert staff_client.get(url, {"v": stored.data_key}).status_code == 404
    for name, reason in (("elo-run-999", "No such evaluator"), ("agreement-human", "shares no battles"),
                         ("sideways-human", "No such figure")):
        with pytest.raises(stored_figures.NoFigure, match=reason):
            stored_figures.figure(stored, name)
    with pytest.raises(FileNotFoundError):
        _files(stored)


def test_a_dropped_result_takes_its_figures_with_it(judged_tournament_three_workers):
    tournament, _ = judged_tournament_three_workers
    first = refresh_leaderboard(tournament=tournament)
    stored_figures.draw_all(first)
    assert _files(first)

    for step in (1, 2):  # the result before the latest is kept; the one before that goes
        Tournament.objects.filter(pk=tournament.pk).update(seed=tournament.seed + step)
        refresh_leaderboard(tournament=tournament)

    assert not LeaderboardResult.objects.filter(pk=first.pk).exists()
    assert _files(first) == []
