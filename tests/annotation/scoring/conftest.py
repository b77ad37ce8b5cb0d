"""The judged tournament most leaderboard tests read, and the researcher who reads it."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from annotation.crowdwork.queue import next_assignment
from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import JudgeRun, Stage
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring.freshness import refresh_leaderboard
from tests.factories import FamilyFactory, WorkerFactory
from tests.openai_fake import completion
from tests.scoring_factories import create_tournament, verified_instance, with_responses


@pytest.fixture
def judged_tournament_three_workers(judge_server):
    """Two single-image and one multi-image instance, three workers on every battle, one judge."""
    for family in (FamilyFactory(name="Contextual knowledge"), FamilyFactory(name="Art knowledge")):
        with_responses(verified_instance(family=family), "llava", "otter")
    with_responses(
        verified_instance(family=FamilyFactory(name="Image comparison", is_multi_image=True)),
        "llava",
        "otter",
    )
    tournament = create_tournament(name="Table 3", judgements_per_pair=3)
    launch_tournament(tournament=tournament)
    for _ in range(3):
        worker = WorkerFactory()
        while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
            submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice="left")
    judge_server.default = completion("Overall, Response A is better.")
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    run_judge(run=run)
    # What the background job does once the judgements change (test_leaderboard_job.py).
    refresh_leaderboard(tournament=tournament)
    return tournament, run


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_tournament"))
    client.force_login(user)
    return client
