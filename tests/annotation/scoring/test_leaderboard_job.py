"""The leaderboard is computed by a background job when judgements change: its fingerprint says
when a stored result is current, and pages, the API and the command show the last one with its age."""

import random
import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.crowdwork import review
from annotation.crowdwork.queue import next_assignment
from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import (
    Assignment,
    HumanJudgement,
    Instance,
    JudgeRun,
    LeaderboardResult,
    Stage,
    Tournament,
    WorkState,
)
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring import freshness
from crowdbench.celery import app
from tasks.scoring import refresh_leaderboard_job
from tests.factories import WorkerFactory
from tests.openai_fake import completion
from tests.scoring_factories import create_tournament, random_tournament, verified_instance, with_responses

# Transactional: a job records its attempts on fresh connections, and a change queues its job when
# its transaction commits, as in production.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_tournament"))
    client.force_login(user)
    return client


@pytest.fixture
def eager_jobs(request):
    """Jobs run where they are queued, once the transaction that queued them commits (as a worker
    would run them a moment later)."""
    app.conf.task_always_eager = True
    request.addfinalizer(lambda: setattr(app.conf, "task_always_eager", False))


def judge(tournament, worker=None, choice="left"):
    """Every battle the worker is offered, judged; returns their assignments."""
    worker = worker or WorkerFactory()
    done = []
    while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
        submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice=choice)
        done.append(assignment)
    return done


@pytest.fixture
def tournament():
    """Three models on two instances (six battles), judged once by one worker."""
    for _ in range(2):
        with_responses(verified_instance(), "llava", "otter", "idefics")
    tournament = create_tournament(name="Background", include_reference=False, judgements_per_pair=2)
    launch_tournament(tournament=tournament)
    judge(tournament)
    return tournament


def key(tournament):
    return freshness.fingerprint(tournament=tournament)


# --- what a page shows ---------------------------------------------------------------------------


def test_with_nothing_stored_the_page_says_it_is_being_computed_and_computes_nothing(tournament, staff_client):
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()

    assert "The leaderboard is being computed in the background" in page
    assert '<meta http-equiv="refresh" content="10">' in page
    assert "Human judgements" not in page
    assert not LeaderboardResult.objects.exists()


def test_with_nothing_stored_the_api_answers_202_and_when_to_ask_again(tournament, staff_client):
    response = staff_client.get(f"/api/tournaments/{tournament.pk}/leaderboard/")

    assert response.status_code == 202
    assert response.json()["status"] == "computing" and int(response["Retry-After"]) > 0
    assert not LeaderboardResult.objects.exists()


def test_a_page_that_finds_its_result_stale_queues_the_job(tournament, staff_client, eager_jobs):
    staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk]))

    assert freshness.leaderboard_is_current(tournament=tournament)
    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()
    assert "Human judgements" in page and 'data-status="current"' in page


def test_the_stored_result_is_shown_with_its_age_and_what_it_was_computed_from(tournament, staff_client):
    refresh_leaderboard_job.apply(args=[tournament.pk])

    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()
    boards = staff_client.get(f"/api/tournaments/{tournament.pk}/leaderboard/").json()

    assert "Computed 0\xa0minutes ago (" in page and "from 6 judgements: the judgements as they are now." in page
    assert 'data-status="current"' in page and "Computing:" not in page
    assert {(board["status"], board["computed_from"]) for board in boards} == {("current", 6)}
    assert all(0 <= board["age_seconds"] < 60 for board in boards)


def test_after_a_change_the_old_result_is_shown_and_said_to_be_computing(tournament, staff_client):
    refresh_leaderboard_job.apply(args=[tournament.pk])
    stored = LeaderboardResult.objects.get()
    judge(tournament)

    page = staff_client.get(reverse("dashboard:leaderboard", args=[tournament.pk])).content.decode()
    boards = staff_client.get(f"/api/tournaments/{tournament.pk}/leaderboard/").json()

    assert "Computing: the judgements have changed since this result" in page and "from 6 judgements." in page
    assert f'data-key="{stored.data_key}"' in page and "Human judgements" in page
    assert {(board["status"], board["data_key"], board["computed_from"]) for board in boards} == {
        ("computing", stored.data_key, 6)}
    assert LeaderboardResult.objects.get() == stored


def test_the_command_computes_and_says_so_and_stored_prints_the_stored_one(tournament, capsys):
    from django.core.management import call_command

    call_command("leaderboard", tournament.name, "--stored")
    assert "being computed in the background; nothing is stored yet" in capsys.readouterr().out

    call_command("leaderboard", tournament.name)
    assert "from 6 judgements: the judgements as they are now." in capsys.readouterr().out

    judge(tournament)
    call_command("leaderboard", tournament.name, "--stored")
    out = capsys.readouterr().out
    assert "from 6 judgements. Computing:" in out and "== Human judgements: 6 battles, 6 judgements ==" in out


def test_the_command_help_says_it_computes_synchronously():
    from annotation.management.commands.leaderboard import Command

    assert "computes synchronously" in Command.help


# --- the job -----------------------------------------------------------------------------------


def test_the_job_stores_a_result_keyed_by_the_current_fingerprint(tournament):
    refresh_leaderboard_job.apply(args=[tournament.pk])

    stored = LeaderboardResult.objects.get()
    assert (stored.data_key, stored.criterion, stored.judgements) == (key(tournament), "overall", 6)
    assert next(board for board in stored.result["boards"] if board["key"] == "human")["judgements"] == 6


def test_a_second_job_for_the_same_state_computes_nothing(tournament):
    refresh_leaderboard_job.apply(args=[tournament.pk])
    first = LeaderboardResult.objects.get()

    refresh_leaderboard_job.apply(args=[tournament.pk])

    assert list(LeaderboardResult.objects.values_list("pk", "computed_at")) == [(first.pk, first.computed_at)]


def test_a_newer_state_replaces_the_older_result_keeping_the_one_before_for_the_pages_showing_it(tournament):
    refresh_leaderboard_job.apply(args=[tournament.pk])
    oldest = LeaderboardResult.objects.get()
    judge(tournament)

    refresh_leaderboard_job.apply(args=[tournament.pk])

    newer = LeaderboardResult.objects.latest("computed_at")
    assert newer.pk != oldest.pk and (newer.data_key, newer.judgements) == (key(tournament), 12)
    # A page rendered from the older result a moment ago still draws its figures from it.
    assert set(LeaderboardResult.objects.values_list("pk", flat=True)) == {oldest.pk, newer.pk}
    Tournament.objects.filter(pk=tournament.pk).update(seed=tournament.seed + 1)
    refresh_leaderboard_job.apply(args=[tournament.pk])
    assert oldest.pk not in set(LeaderboardResult.objects.values_list("pk", flat=True))
    assert LeaderboardResult.objects.count() == 2


def test_a_tournament_with_criteria_keeps_a_board_per_criterion(tournament):
    Tournament.objects.filter(pk=tournament.pk).update(with_criteria=True)
    tournament.refresh_from_db()

    refresh_leaderboard_job.apply(args=[tournament.pk])

    assert sorted(LeaderboardResult.objects.values_list("criterion", flat=True)) == sorted(
        ["overall", "relevance_and_completeness", "understanding_and_reasoning", "hallucination", "detail"])


# --- what changes the fingerprint, and what does not ---------------------------------------------


def test_a_new_judgement_changes_the_fingerprint(tournament):
    before = key(tournament)
    judge(tournament)
    assert key(tournament) != before


def test_a_rejected_judgement_changes_the_fingerprint(tournament):
    before = key(tournament)
    review.reject_work(assignments=[HumanJudgement.objects.first().assignment], reason="Always left.")
    assert key(tournament) != before


def test_an_accepted_judgement_changes_it_where_only_accepted_judgements_count(tournament):
    Tournament.objects.filter(pk=tournament.pk).update(counts_provisional=False)
    before = key(tournament)
    review.accept_work(assignments=[HumanJudgement.objects.first().assignment])
    assert key(tournament) != before


def test_counting_provisional_judgements_or_not_changes_the_fingerprint(tournament):
    before = key(tournament)
    Tournament.objects.filter(pk=tournament.pk).update(counts_provisional=False)
    assert key(tournament) != before


def test_an_instance_no_longer_verified_changes_the_fingerprint(tournament):
    before = key(tournament)
    instance = HumanJudgement.objects.first().battle.instance
    instance.status = Instance.Status.AWAITING_VERIFICATION
    instance.save(update_fields=["status", "updated_at"])
    assert key(tournament) != before


def test_a_judge_run_finishing_changes_the_fingerprint(tournament, judge_server):
    judge_server.default = completion("Overall, Response A is better.")
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    pending = key(tournament)
    run_judge(run=run)
    assert key(tournament) != pending


def test_a_judgement_edited_in_the_admin_changes_the_fingerprint(tournament):
    before = key(tournament)
    judgement = HumanJudgement.objects.first()
    judgement.choice = "right"
    judgement.save()
    assert key(tournament) != before


def test_a_model_response_edited_in_the_admin_changes_the_fingerprint(tournament):
    # The judge report's length bias counts the response's tokens.
    before = key(tournament)
    response = HumanJudgement.objects.first().battle.response_a
    response.text += " And a second sentence, added by hand."
    response.save()
    assert key(tournament) != before


@pytest.mark.parametrize(("counts_provisional", "state"), [(True, WorkState.REJECTED), (False, WorkState.ACCEPTED)])
def test_a_work_state_changed_without_a_review_changes_the_fingerprint(tournament, counts_provisional, state):
    Tournament.objects.filter(pk=tournament.pk).update(counts_provisional=counts_provisional)
    before = key(tournament)
    Assignment.objects.filter(pk=HumanJudgement.objects.first().assignment_id).update(work_state=state)
    assert key(tournament) != before


def test_an_instance_no_longer_verified_without_its_stamp_changes_the_fingerprint(tournament):
    before = key(tournament)
    Instance.objects.filter(pk=HumanJudgement.objects.first().battle.instance_id).update(
        status=Instance.Status.AWAITING_VERIFICATION)
    assert key(tournament) != before


def test_the_fingerprint_costs_the_same_few_queries_however_many_judgements(tournament):
    # Pages read it on every view: a fixed number of aggregate queries, never a row per judgement.
    with CaptureQueriesContext(connection) as small:
        key(tournament)
    judge(tournament)
    with_responses(verified_instance(), "llava", "otter", "idefics")
    with CaptureQueriesContext(connection) as larger:
        key(tournament)
    assert len(larger) == len(small) <= 10


def test_a_work_state_change_that_cannot_alter_the_result_leaves_the_fingerprint_alone(tournament):
    # Provisional judgements count here: accepting one changes nothing a board shows.
    before = key(tournament)
    Assignment.objects.filter(pk=HumanJudgement.objects.first().assignment_id).update(work_state=WorkState.ACCEPTED)
    assert key(tournament) == before


def test_what_cannot_alter_the_result_leaves_the_fingerprint_alone(tournament, judge_server):
    judge(tournament)  # every battle's second judgement: none of this tournament's is offered again
    with_responses(verified_instance(), "llava", "otter")
    other = create_tournament(name="Other", include_reference=False, judgements_per_pair=2)
    launch_tournament(tournament=other)
    before = key(tournament)

    next_assignment(worker=WorkerFactory(), stage=Stage.PAIRWISE)  # a battle leased, not yet judged
    create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)  # a run not finished
    judge(other)  # another tournament's judgement

    assert key(tournament) == before


# --- every change queues the job (run here as the worker would, once the change commits) --------


def test_a_submitted_judgement_queues_the_job_that_stores_the_new_result(tournament, eager_jobs):
    judge(tournament)
    assert freshness.latest_stored(tournament=tournament).judgements == 12


def test_a_review_queues_the_job(tournament, eager_jobs):
    review.reject_work(assignments=[HumanJudgement.objects.first().assignment], reason="Always left.")
    assert freshness.latest_stored(tournament=tournament).judgements == 5


def test_a_finished_judge_run_queues_the_job(tournament, judge_server, eager_jobs):
    judge_server.default = completion("Overall, Response A is better.")
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    run_judge(run=run)
    stored = freshness.latest_stored(tournament=tournament)
    assert stored.judgements == 6 + 12 and stored.data_key == key(tournament)


def test_an_instance_verified_again_queues_the_job(tournament, eager_jobs):
    from annotation.collection.verification import verify_instance

    instance = HumanJudgement.objects.first().battle.instance
    Instance.objects.filter(pk=instance.pk).update(status=Instance.Status.AWAITING_VERIFICATION)
    instance.refresh_from_db()
    verify_instance(instance=instance)
    assert freshness.latest_stored(tournament=tournament).data_key == key(tournament)


# --- at the size of a real tournament ------------------------------------------------------------


def test_fifteen_models_on_a_hundred_questions_compute_in_seconds_and_render_in_under_one(staff_client):
    # Ten random pairs per question: random verdicts, but preference graphs too small for the
    # contradiction count to explode (issue 27: 24.8 million cycles for one question of 105 pairs).
    tournament = random_tournament(name="Fifteen", rng=random.Random(27), models=15, questions=100,
                                   pairs_per_question=10, judgements_per_battle=2, judge_runs=1)

    started = time.perf_counter()
    refresh_leaderboard_job.apply(args=[tournament.pk])
    job_seconds = time.perf_counter() - started

    url = reverse("dashboard:leaderboard", args=[tournament.pk])
    started = time.perf_counter()
    page = staff_client.get(url).content.decode()
    page_seconds = time.perf_counter() - started

    assert LeaderboardResult.objects.get().judgements == 2000 + 2000
    assert "model-14" in page and 'data-status="current"' in page
    assert job_seconds < 30, f"the job took {job_seconds:.1f} s"
    assert page_seconds < 1, f"the page took {page_seconds:.2f} s"
