import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Q
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Snapshot, Tournament
from annotation.scoring.freshness import refresh_leaderboard
from tests.export_fixtures import RAW_WORKER_IDS, judged_tournament_with_criteria_fixture  # noqa: F401
from tests.factories import FamilyFactory, InstanceFactory
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher():
    """Staff with what the admin would let them see, and the right to request snapshots."""
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(
        Q(content_type__app_label="annotation", codename__startswith="view_") | Q(codename="add_snapshot")))
    return user


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    return client


@pytest.fixture(autouse=True)
def _snapshots_in_a_folder_of_the_test(snapshot_folder):
    return snapshot_folder


def test_a_request_without_a_token_is_401():
    response = APIClient().get("/api/families/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_a_non_staff_token_is_403():
    user = get_user_model().objects.create_user("annotator", password="pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    assert client.get("/api/families/").status_code == 403
    assert client.get("/api/schema/").status_code == 403


def test_families_filter_by_kind_and_name(api):
    FamilyFactory(name="Art knowledge")
    FamilyFactory(name="Image comparison", is_multi_image=True)

    multi = api.get("/api/families/", {"is_multi_image": "true"}).json()
    named = api.get("/api/families/", {"name": "art"}).json()

    assert [f["name"] for f in multi["results"]] == ["Image comparison"]
    assert [f["name"] for f in named["results"]] == ["Art knowledge"]


def test_instances_paginate_and_filter_by_status(api):
    family = FamilyFactory()
    for n in range(5):
        verified_instance(family=family, instruction=f"Question {n}")
    InstanceFactory(family=family, instruction="Still waiting")

    first = api.get("/api/instances/", {"status": "verified", "page_size": 2}).json()
    third = api.get(first["next"]).json()
    third = api.get(third["next"]).json()

    assert first["count"] == 5 and len(first["results"]) == 2
    assert first["results"][0]["instruction"] == "Question 0"
    assert first["results"][0]["images"][0]["licence"] == "CC BY 2.0"
    assert [i["instruction"] for i in third["results"]] == ["Question 4"] and third["next"] is None
    assert api.get("/api/instances/", {"status": "nonsense"}).status_code == 400


def test_judgements_show_pseudonyms_and_filter_by_tournament_and_model(api, judged_tournament_with_criteria):
    tournament, run = judged_tournament_with_criteria

    response = api.get("/api/human-judgements/", {"tournament": tournament.pk, "model": "llava"})

    body = response.content.decode()
    assert response.status_code == 200 and response.json()["count"] > 0
    assert all(raw not in body for raw in RAW_WORKER_IDS)
    rows = response.json()["results"]
    assert all(row["worker"].startswith("w_") for row in rows)
    assert all("llava" in (row["model_a"], row["model_b"]) for row in rows)
    judge_rows = api.get("/api/judge-judgements/", {"run": run.pk, "ordering": "ab"}).json()
    assert judge_rows["count"] > 0 and {r["ordering"] for r in judge_rows["results"]} == {"ab"}


def test_tournament_leaderboard_has_a_board_per_evaluator(api, judged_tournament_with_criteria):
    tournament, run = judged_tournament_with_criteria
    refresh_leaderboard(tournament=tournament, rounds=20)

    boards = api.get(f"/api/tournaments/{tournament.pk}/leaderboard/", {"rounds": 20}).json()

    assert [b["key"] for b in boards] == ["human", f"run-{run.pk}"]
    assert {row["model"] for row in boards[0]["rows"]} >= {"llava", "otter"}
    assert api.get(f"/api/tournaments/{tournament.pk}/leaderboard/", {"rounds": 0}).status_code == 400


def test_each_leaderboard_board_says_which_aggregation_its_figures_used(api, judged_tournament_with_criteria):
    tournament, run = judged_tournament_with_criteria
    tournament.aggregation = Tournament.Aggregation.NOISY_BT
    tournament.save()
    refresh_leaderboard(tournament=tournament, rounds=20)

    boards = {b["key"]: b for b in api.get(f"/api/tournaments/{tournament.pk}/leaderboard/", {"rounds": 20}).json()}

    assert boards["human"]["aggregation"] == "Each judgement a battle (Elo, Bradley-Terry)"
    assert boards["human"]["worker_model_scores"] == []
    noisy = boards["human-noisy_bt"]
    assert noisy["aggregation"] == "Also crowd-kit's noisy Bradley-Terry, weighing workers by skill"
    # The fixture's workers always click the left response, on sides drawn from ids: now and then
    # one model won every judgement, and then the board says so instead of scoring it.
    assert bool(noisy["worker_model_scores"]) != bool(noisy["worker_model_warning"])
    if noisy["worker_model_scores"]:
        assert {row["model"] for row in noisy["worker_model_scores"]} >= {"llava", "otter"}
    assert boards["human"]["worker_model_warning"] == ""
    assert boards[f"run-{run.pk}"]["aggregation"] == "Each battle's two orderings combined by the VisIT-Bench tie rule"


def test_a_snapshot_is_requested_with_post_and_read_by_version(api, judged_tournament_with_criteria,
                                                               django_capture_on_commit_callbacks):
    tournament, _ = judged_tournament_with_criteria

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post("/api/snapshots/", {"note": "api", "tournaments": [tournament.pk]}, format="json")

    assert response.status_code == 202
    assert response.json()["version"] == 1 and response.json()["status"] == "pending"
    assert len(callbacks) == 1
    from annotation.datasets.snapshots import build_snapshot

    build_snapshot(snapshot=Snapshot.objects.get(version=1))
    snapshot = api.get("/api/snapshots/1/").json()
    assert snapshot["status"] == "done" and snapshot["tournaments"] == [tournament.pk]
    assert len(snapshot["content_sha256"]) == 64
    assert api.get("/api/snapshots/1/diff/").json()["added"]
    assert api.put("/api/snapshots/1/", {"note": "x"}, format="json").status_code == 405
    assert api.delete("/api/snapshots/1/").status_code == 405


def test_the_snapshot_list_names_each_file_once_and_leaves_the_manifest_to_the_detail(api):
    files = [{"name": f"table-{n}.csv", "path": f"snapshots/v1/table-{n}.csv", "table": f"table-{n}",
              "format": "csv", "rows": 1, "bytes": 1, "sha256": "0" * 64} for n in range(20)]
    for version in (1, 2, 3):
        Snapshot.objects.create(version=version, status=Snapshot.Status.DONE, files=files,
                                manifest={"files": files, "research_group": None})
    listed = api.get("/api/snapshots/").json()["results"]
    assert [row["version"] for row in listed] == [3, 2, 1]
    assert all("manifest" not in row and "files" not in row for row in listed)
    # Each file once a snapshot: its name and the address that downloads it.
    assert json.dumps(listed).count("table-7.csv") == 2 * 3
    assert [entry["name"] for entry in listed[0]["downloads"]][:2] == ["table-0.csv", "table-1.csv"]
    detail = api.get("/api/snapshots/3/").json()
    assert len(detail["files"]) == len(detail["manifest"]["files"]) == 20


def test_schema_and_docs_are_served(api):
    assert "openapi" in api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert api.get("/api/docs/").status_code == 200


@pytest.mark.integration
def test_schemathesis_fuzz_finds_no_server_error(live_server, transactional_db, judge_server,
                                                 researcher, request):
    import schemathesis

    from crowdbench.celery import app

    request.getfixturevalue("judged_tournament_with_criteria")
    token = Token.objects.create(user=researcher).key
    headers = {"Authorization": f"Token {token}"}
    # POST /api/snapshots/ builds in the request's own thread, so a failing build shows here.
    app.conf.task_always_eager = True
    request.addfinalizer(lambda: setattr(app.conf, "task_always_eager", False))
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json",
                                           headers=headers)
    failures, statuses = [], []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        _fuzz(operation, base_url=live_server.url, headers=headers, failures=failures,
              statuses=statuses)
    assert not failures, failures
    # The token worked: the fuzzing reached real answers and real 202s, not just refusals.
    assert {200, 202, 400} <= set(statuses) and 401 not in statuses, sorted(set(statuses))
    assert Snapshot.objects.filter(status=Snapshot.Status.DONE).exists()


def _fuzz(operation, *, base_url, headers, failures, statuses):
    from hypothesis import HealthCheck, given, settings

    @given(case=operation.as_strategy())
    @settings(max_examples=15, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def fuzz(case):
        response = case.call(base_url=base_url, headers=headers)
        statuses.append(response.status_code)
        if response.status_code >= 500:
            failures.append((operation.label, case.path_parameters, case.query, case.body,
                             response.status_code))

    fuzz()
