"""The leaderboard job in a real Celery worker: a judgement submitted, its job run by the worker, and
the page showing the new numbers."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from annotation.crowdwork.queue import next_assignment
from annotation.models import LeaderboardResult, Stage
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring import freshness
from tests.celery_support import wait_for
from tests.factories import WorkerFactory
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_judgement_reaches_the_page_through_the_worker(start_worker):
    worker = start_worker()
    with_responses(verified_instance(), "llava", "otter", "idefics")
    tournament = create_tournament(name="Worker", include_reference=False, judgements_per_pair=2)
    launch_tournament(tournament=tournament)
    researcher = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    researcher.user_permissions.add(Permission.objects.get(codename="view_tournament"))
    client = Client()
    client.force_login(researcher)
    url = reverse("dashboard:leaderboard", args=[tournament.pk])

    first = WorkerFactory()
    assignment = next_assignment(worker=first, stage=Stage.PAIRWISE)
    submit_pairwise_judgement(assignment_id=assignment.pk, worker=first, choice="left")
    wait_for(lambda: freshness.leaderboard_is_current(tournament=tournament), what="the first result",
             worker=worker)
    assert "from 1 judgement: the judgements as they are now." in client.get(url).content.decode()

    second = WorkerFactory()
    assignment = next_assignment(worker=second, stage=Stage.PAIRWISE)
    submit_pairwise_judgement(assignment_id=assignment.pk, worker=second, choice="right")
    wait_for(lambda: LeaderboardResult.objects.filter(tournament=tournament, judgements=2).exists(),
             what="the result with the second judgement", worker=worker)

    page = client.get(url).content.decode()
    assert "from 2 judgements: the judgements as they are now." in page
    # The newer result, and the one before it, which a page shown a moment ago still draws its figures from.
    assert list(LeaderboardResult.objects.filter(tournament=tournament).order_by("computed_at")
                .values_list("judgements", flat=True)) == [1, 2]
