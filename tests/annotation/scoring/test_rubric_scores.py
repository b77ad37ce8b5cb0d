"""Rubric scores where researchers look: each model's mean 1-5 score per rubric criterion with n and
an interval, and Spearman's rho against the pairwise rating, on the dashboard's leaderboard, in the
API and in the `leaderboard` command, for the crowd and for a Prometheus judge."""

import math
from io import StringIO

import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.urls import reverse

from annotation.datasets import formats, streams
from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import JudgeRun, LeaderboardResult
from annotation.scoring.freshness import refresh_leaderboard
from annotation.scoring.rubrics import ALL_RUBRICS, rating_correlation, rubric_criterion, rubric_table
from tests.openai_fake import completion
from tests.scoring_factories import DESERVES, GROUNDED, rubric_tournament

pytestmark = pytest.mark.django_db

# Student's t for 95% with 2 degrees of freedom.
T_2 = 4.302652729911275


# --- the numbers, worked by hand ------------------------------------------------------------------


def scores(rows):
    return pd.DataFrame(rows, columns=["model", "question_id", "rubric", "score"])


def test_a_models_mean_is_over_its_responses_with_a_t_interval_clipped_to_the_scale():
    table = rubric_table(scores([
        # llava's three responses: 5 (two workers), 4 and 5, so the means are 5, 4, 5.
        ("llava", 1, "Grounded", 5), ("llava", 1, "Grounded", 5), ("llava", 2, "Grounded", 4),
        ("llava", 3, "Follows", 5),
        ("otter", 1, "Grounded", 2), ("otter", 2, "Grounded", 3), ("otter", 3, "Follows", 1),
    ])).set_index(["rubric", "model"])

    llava = table.loc[(ALL_RUBRICS, "llava")]
    half_width = T_2 * (math.sqrt(1 / 3) / math.sqrt(3))
    assert llava["mean"] == pytest.approx(14 / 3)
    assert (llava["responses"], llava["scores"]) == (3, 4)
    assert llava["lower"] == pytest.approx(14 / 3 - half_width)
    assert llava["upper"] == 5.0  # 14/3 + 1.43 lies past the scale
    otter = table.loc[(ALL_RUBRICS, "otter")]
    assert otter["mean"] == pytest.approx(2.0)
    assert otter["lower"] == pytest.approx(max(1.0, 2 - T_2 * 1 / math.sqrt(3)))
    # Per criterion: one response has no interval.
    follows = table.loc[("Follows", "otter")]
    assert (follows["mean"], follows["responses"]) == (1.0, 1)
    assert pd.isna(follows["lower"]) and pd.isna(follows["upper"])
    grounded = table.loc[("Grounded", "llava")]
    assert (grounded["mean"], grounded["responses"], grounded["scores"]) == (4.5, 2, 3)
    # Responses that all got the same score: a t interval of no width would claim certainty.
    same = rubric_table(scores([("a", 1, "R", 3), ("a", 2, "R", 3), ("a", 3, "R", 3)])).iloc[0]
    assert same["mean"] == 3.0 and pd.isna(same["lower"]) and pd.isna(same["upper"])
    # Best first within each rubric, every rubric after the overall rows.
    assert list(table.index.get_level_values("rubric")) == [ALL_RUBRICS] * 2 + ["Follows"] * 2 + ["Grounded"] * 2


def test_rank_correlation_is_a_number_from_three_models_and_says_why_not_below():
    table = rubric_table(scores([("a", 1, "R", 5), ("b", 1, "R", 3), ("c", 1, "R", 4), ("d", 1, "R", 1)]))
    # Elo orders a, b, c, d; the scores a, c, b, d: d^2 = 0 + 1 + 1 + 0, rho = 1 - 6 * 2 / (4 * 15).
    found = rating_correlation(table, pd.Series({"a": 1100.0, "b": 1050.0, "c": 1000.0, "d": 900.0}))
    assert found["rho"] == pytest.approx(0.8) and found["models"] == 4
    two = rating_correlation(table, pd.Series({"a": 1100.0, "b": 1050.0}))
    assert (two["rho"], two["models"]) == (None, 2)
    flat = rating_correlation(rubric_table(scores([(m, 1, "R", 4) for m in "abc"])),
                              pd.Series({"a": 1100.0, "b": 1050.0, "c": 1000.0}))
    assert (flat["rho"], flat["models"]) == (None, 3)


def test_a_rubrics_criterion_is_its_first_line():
    assert rubric_criterion(GROUNDED) == "Is the response grounded in the image?"
    assert rubric_criterion("\n  Score 1: wrong. Score 5: right.  ") == "Score 1: wrong. Score 5: right."
    assert rubric_criterion("x" * 300).endswith("…") and len(rubric_criterion("x" * 300)) == 100


# --- a rubric tournament, judged through the real queue ------------------------------------------

@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_tournament"))
    client.force_login(user)
    return client


def test_the_crowds_rubric_scores_and_their_correlation_with_elo_are_in_the_api_and_on_the_page(staff_client):
    tournament = rubric_tournament()
    refresh_leaderboard(tournament=tournament)

    api = staff_client.get(f"/api/tournaments/{tournament.pk}/leaderboard/").json()
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()

    human = next(board for board in api if board["key"] == "human")
    overall = {row["model"]: row for row in human["rubric_scores"] if row["rubric"] == ALL_RUBRICS}
    assert list(overall) == ["llava", "instructblip", "otter", "blip2"]
    # Each model answered 3 instances; each response met 3 opponents before 2 workers: 6 scores.
    assert {model: (row["mean"], row["responses"], row["scores"]) for model, row in overall.items()} == {
        "llava": (pytest.approx(14 / 3), 3, 18), "instructblip": (4.0, 3, 18), "otter": (2.0, 3, 18),
        "blip2": (1.0, 3, 18)}
    # Every response of otter's got 2: a t interval would have no width, so there is none.
    assert (overall["otter"]["lower"], overall["otter"]["upper"]) == (None, None)
    assert overall["llava"]["lower"] == pytest.approx(14 / 3 - T_2 * math.sqrt(1 / 3) / math.sqrt(3))
    by_criterion = {(row["rubric"], row["model"]): row for row in human["rubric_scores"]}
    assert by_criterion[("Is the response grounded in the image?", "llava")]["mean"] == 5.0
    assert by_criterion[("Does the response follow the instruction?", "llava")]["mean"] == 4.5
    assert human["rubric_criteria"] == ["Does the response follow the instruction?",
                                        "Is the response grounded in the image?"]
    # The better response always won, so Elo and the mean scores rank the models alike.
    assert human["rubric_correlation"] == pytest.approx(1.0)
    assert human["rubric_models"] == 4
    assert human["rubric_vs_crowd"] is None

    assert 'id="rubric-human"' in page
    assert "<td>All rubrics</td><td>llava</td><td class=\"num\">4.67</td>" in page
    assert "<td>All rubrics</td><td>otter</td><td class=\"num\">2.00</td><td class=\"num\">–</td>" in page
    assert "3.23 to 5.00" in page
    assert ("Spearman's ρ between the models' mean rubric score and their Elo (All images): "
            "<strong>1.00 over 4 models") in page


def test_the_leaderboard_command_prints_the_rubric_scores():
    tournament = rubric_tournament()
    out = StringIO()
    call_command("leaderboard", tournament.name, "--rounds", "50", stdout=out)
    text = out.getvalue()
    assert "-- Human judgements: rubric scores (1-5) --" in text
    assert "Spearman's rho of mean rubric score against Elo: 1.00 over 4 models" in text
    assert any(line.split()[:4] == ["All", "rubrics", "otter", "2.00"] for line in text.splitlines())


def test_the_wide_preference_export_gives_each_model_the_score_the_crowd_gave_it():
    tournament = rubric_tournament()
    header = formats.HUMAN_PREFERENCES_WIDE.header
    instances = sorted({row[header.index("instance_id")]
                        for row in streams.human_preference_rows(tournaments=[tournament], wide=True)})
    for row in streams.human_preference_rows(tournaments=[tournament], wide=True):
        cell = dict(zip(header, row, strict=True))
        n = instances.index(cell["instance_id"])
        assert cell["rubric_score.A"] == DESERVES[cell["A_model"]][n]
        assert cell["rubric_score.B"] == DESERVES[cell["B_model"]][n]


def test_with_scores_for_two_models_the_correlation_is_null_and_the_page_says_why(staff_client):
    tournament = rubric_tournament(models=("llava", "otter"))
    refresh_leaderboard(tournament=tournament)

    api = staff_client.get(f"/api/tournaments/{tournament.pk}/leaderboard/").json()
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()

    human = next(board for board in api if board["key"] == "human")
    assert len([row for row in human["rubric_scores"] if row["rubric"] == ALL_RUBRICS]) == 2
    assert (human["rubric_correlation"], human["rubric_models"]) == (None, 2)
    assert "none: 2 models with both a rubric score and an Elo, fewer than 3" in page


def test_a_prometheus_judges_scores_have_their_own_table_on_its_board(judge_server, staff_client):
    tournament = rubric_tournament()
    judge_server.default = completion("Feedback: it follows the rubric. [RESULT] 4")
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.PROMETHEUS, concurrency=1)
    run_judge(run=run)
    refresh_leaderboard(tournament=tournament)

    api = staff_client.get(f"/api/tournaments/{tournament.pk}/leaderboard/").json()
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()

    judge = next(board for board in api if board["key"] == f"run-{run.pk}")
    overall = [row for row in judge["rubric_scores"] if row["rubric"] == ALL_RUBRICS]
    # One score per response: the judge is asked once per response, whatever its opponents.
    assert {(row["model"], row["mean"], row["responses"], row["scores"]) for row in overall} == {
        (model, 4.0, 3, 3) for model in DESERVES}
    assert judge["rubric_correlation"] is None and judge["rubric_models"] == 4
    assert judge["rubric_vs_crowd"]["n"] == 12
    assert f'id="rubric-run-{run.pk}"' in page
    assert "none: the mean scores or the ratings do not vary" in page


def test_the_rubric_tables_are_read_from_the_stored_result_not_recomputed(staff_client):
    tournament = rubric_tournament()
    refresh_leaderboard(tournament=tournament)
    staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk]))
    stored = LeaderboardResult.objects.get(tournament=tournament)

    api = staff_client.get(f"/api/tournaments/{tournament.pk}/leaderboard/").json()

    assert LeaderboardResult.objects.get(tournament=tournament).computed_at == stored.computed_at
    human = next(board for board in stored.result["boards"] if board["key"] == "human")
    assert api[0]["data_key"] == stored.data_key
    assert api[0]["rubric_scores"] == human["rubric_scores"]
