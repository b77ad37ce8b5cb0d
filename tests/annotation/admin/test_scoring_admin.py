import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import JudgeRun, ModelResponse
from tests.annotation.preferences.test_preferences import predictions_csv, row_for
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client):
    user = get_user_model().objects.create_superuser("admin", "admin@example.org", "pw")
    client.force_login(user)
    return client


def test_scoring_changelists_render_with_progress(admin_client_, judge_server):
    instance = verified_instance()
    with_responses(instance, "llava", "otter")
    tournament = create_tournament(name="admin tournament")
    create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    for name in ("tournament", "battle", "modelresponse", "humanjudgement", "judgerun", "judgejudgement", "judgecall"):
        response = admin_client_.get(reverse(f"admin:annotation_{name}_changelist"))
        assert response.status_code == 200, name
    page = admin_client_.get(reverse("admin:annotation_judgerun_changelist")).content.decode()
    assert "0/0" in page
    page = admin_client_.get(reverse("admin:annotation_tournament_changelist")).content.decode()
    assert "0/15" in page  # 3 battles x 5 judgements each


def test_predictions_import_view_reports_errors_by_row(admin_client_):
    instance = verified_instance()
    sheet = predictions_csv([row_for(instance, "A red bike.", ""), ["nope", "x", "https://x.org/a.jpg", "a", "b"]])
    response = admin_client_.post(reverse("admin:annotation_modelresponse_import"), {"predictions": sheet})
    assert response.status_code == 200
    page = response.content.decode()
    assert "row 2, column" in page and "row 3: no instance" in page
    assert not ModelResponse.objects.exists()


def test_an_action_over_several_tournaments_reports_the_one_it_cannot_do_and_does_the_rest(admin_client_):
    from annotation.models import Tournament, WorkUnit

    with_responses(verified_instance(), "llava", "otter")
    ready = create_tournament(name="Ready to launch")
    empty = create_tournament(name="Nothing sampled", sample=False)
    response = admin_client_.post(reverse("admin:annotation_tournament_changelist"), {
        "action": "launch", "_selected_action": [empty.pk, ready.pk]}, follow=True)
    said = [str(message) for message in response.context["messages"]]
    assert any(text.startswith("Nothing sampled: ") and "sample them first" in text for text in said)
    assert "Ready to launch: launched." in said
    assert WorkUnit.objects.filter(battle__tournament=ready).count() == ready.battles.count() > 0
    assert not Tournament.objects.get(pk=empty.pk).battles.exists()


def test_a_second_judge_run_with_another_model_is_added_beside_the_first(admin_client_, judge_server,
                                                                         django_capture_on_commit_callbacks):
    from annotation.judging.prompts import prompts_sha256
    from tests.openai_fake import completion

    with_responses(verified_instance(), "llava", "otter")
    tournament = create_tournament(name="two judges")
    first = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    judge_server.default = completion("Overall, Response A is better.")

    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_client_.post(reverse("admin:annotation_judgerun_add"), {
            "tournament": tournament.pk, "engine": "gpt-4o", "mode": JudgeRun.Mode.VISION, "concurrency": 1})

    assert response.status_code == 302
    second = tournament.judge_runs.exclude(pk=first.pk).get()
    assert (second.engine, second.mode, second.prompts_sha256) == (
        "gpt-4o", JudgeRun.Mode.VISION, prompts_sha256(JudgeRun.Mode.VISION))
    assert len(callbacks) == 1  # its job, queued once the run is committed
    run_judge(run=second)
    assert {request.body["model"] for request in judge_server.requests} == {"gpt-4o"}
    assert second.judgements.exists()


def test_a_judge_run_on_a_tournament_without_battles_is_refused_on_the_form(admin_client_):
    tournament = create_tournament(name="no battles", sample=False)

    response = admin_client_.post(reverse("admin:annotation_judgerun_add"), {
        "tournament": tournament.pk, "engine": "gpt-4o", "mode": JudgeRun.Mode.VISION, "concurrency": 1})

    assert response.status_code == 200
    assert "has no battles to judge" in response.content.decode()
    assert not tournament.judge_runs.exists()
