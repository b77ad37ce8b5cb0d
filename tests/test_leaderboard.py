from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation.judge import create_judge_run, run_judge
from annotation.models import REFERENCE_MODEL_NAME, JudgeRun, Stage
from annotation.preferences import create_study, launch_study, submit_pairwise_judgement
from annotation.queue import next_assignment
from tests.factories import FamilyFactory, WorkerFactory
from tests.openai_fake import completion
from tests.scoring_factories import verified_instance, with_responses

pytestmark = pytest.mark.django_db

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def judged_study(judge_server):
    """Two single-image and one multi-image instance, three workers on every battle, one judge."""
    for family in (FamilyFactory(name="Contextual knowledge"), FamilyFactory(name="Art knowledge")):
        with_responses(verified_instance(family=family), "llava", "otter")
    with_responses(
        verified_instance(family=FamilyFactory(name="Image comparison", is_multi_image=True)),
        "llava",
        "otter",
    )
    study = create_study(name="Table 3", judgements_per_pair=3)
    launch_study(study=study)
    for _ in range(3):
        worker = WorkerFactory()
        while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
            submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice="left")
    judge_server.default = completion("Overall, Response A is better.")
    run = create_judge_run(study=study, mode=JudgeRun.Mode.REFERENCE_FREE)
    run_judge(run=run)
    return study, run


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    client.force_login(user)
    return client


def test_leaderboard_page_shows_a_table_per_evaluator(judged_study, staff_client):
    study, run = judged_study
    response = staff_client.get(reverse("dashboard:leaderboard", args=[study.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Human judgements" in page and f"LLM judge: {run.engine}" in page
    assert "Single Image" in page and "Multiple Images" in page
    assert REFERENCE_MODEL_NAME in page and "llava" in page
    assert "Win-rate vs. reference (w/ # ratings)" in page
    assert "(n=" in page
    assert "Cohen" in page


def test_leaderboard_plots_are_pngs(judged_study, staff_client):
    study, run = judged_study
    for url in (
        reverse("dashboard:elo_plot", args=[study.pk, "human"]),
        reverse("dashboard:elo_plot", args=[study.pk, f"run-{run.pk}"]),
        reverse("dashboard:category_plot", args=[study.pk, "human"]),
        reverse("dashboard:agreement_plot", args=[study.pk, f"run-{run.pk}"]),
    ):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Type"] == "image/png"
        assert response.content.startswith(PNG)
    assert (
        staff_client.get(reverse("dashboard:elo_plot", args=[study.pk, "run-999"])).status_code
        == 404
    )


def test_dashboard_is_for_staff_only(judged_study, client):
    study, _ = judged_study
    response = client.get(reverse("dashboard:leaderboard", args=[study.pk]))
    assert response.status_code == 302 and "login" in response["Location"]


def test_dashboard_index_lists_studies_and_judge_runs(judged_study, staff_client):
    study, run = judged_study
    page = staff_client.get(reverse("dashboard:index")).content.decode()
    assert study.name in page and run.progress in page


def test_leaderboard_command_prints_the_tables(judged_study):
    study, _ = judged_study
    out = StringIO()
    call_command("leaderboard", study.name, "--rounds", "50", stdout=out)
    text = out.getvalue()
    assert "== Human judgements (27 battles) ==" in text  # 9 battles x 3 workers
    assert "Win-rate vs. reference" in text and "Single Image" in text
    assert "Agreement of the judges with the crowd" in text


def test_leaderboard_command_names_an_unknown_study(db):
    with pytest.raises(CommandError, match="No preference study"):
        call_command("leaderboard", "missing")
