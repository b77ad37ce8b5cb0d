"""Bad numbers, ids and query parameters in the REST API are 400s with a message, never 500s
(issue 10, finding 4: `{"tournaments":[1e400]}`, `?against=²`)."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.crowdwork.queue import next_assignment
from annotation.models import JudgeJudgement, JudgeRun, Snapshot, Stage, Tournament
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from tests.factories import FamilyFactory, WorkerFactory
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db

# Things a JSON number or a query string can hold that int() or the database chokes on.
BAD_NUMBERS = ["1e400", "-1e400", "NaN", "Infinity", "1.5", "99999999999999999999999", "-1", '"x"', "null",
               "true", "[]", "{}"]
BAD_QUERY_NUMBERS = ["²", "١٢", "1.5", "1e3", "-1", "99999999999999999999999", "", " 1", "0x10", "٣", "NaN"]


@pytest.fixture
def api():
    user = get_user_model().objects.create_superuser("researcher", password=None)  # token only: no hashing
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def snapshot():
    return Snapshot.objects.create(version=1, status=Snapshot.Status.DONE)


@pytest.mark.parametrize("number", BAD_NUMBERS)
def test_a_snapshot_request_with_an_impossible_tournament_id_is_a_400_that_names_the_field(api, number):
    body = '{"tournaments": [' + number + ']}'
    response = api.post("/api/snapshots/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    message = response.json()
    assert "tournaments" in message or "JSON parse error" in message["detail"]
    assert not Snapshot.objects.exists()


@pytest.mark.parametrize("number", ["1e400", "NaN", "-Infinity"])
def test_a_top_level_impossible_number_is_a_400(api, number):
    response = api.post("/api/snapshots/", number, content_type="application/json")
    assert response.status_code == 400, response.content


def test_deeply_nested_json_is_a_400(api):
    for depth in (40, 50_000):
        body = '{"note": "x", "tournaments": ' + "[" * depth + "]" * depth + "}"
        response = api.post("/api/snapshots/", body, content_type="application/json")
        assert response.status_code == 400, (depth, response.content[:200])
        assert "nested deeper" in response.json()["detail"]


@pytest.mark.parametrize("against", BAD_QUERY_NUMBERS)
def test_a_diff_against_a_non_version_is_a_400_with_a_message(api, snapshot, against):
    response = api.get("/api/snapshots/1/diff/", {"against": against})
    assert response.status_code == 400, response.content
    assert "against" in response.json()


@pytest.mark.parametrize("rounds", BAD_QUERY_NUMBERS + ["100000000", "0"])
def test_leaderboard_rounds_that_are_not_a_small_whole_number_are_a_400(api, rounds):
    tournament = Tournament.objects.create(name="Empty tournament")
    response = api.get(f"/api/tournaments/{tournament.pk}/leaderboard/", {"rounds": rounds})
    assert response.status_code == 400, response.content
    assert "rounds" in response.json()


# Every numeric query parameter of the list endpoints: each filter by id, and the page's two numbers.
NUMERIC_PARAMETERS = [
    ("/api/human-judgements/", "tournament"),
    ("/api/human-judgements/", "instance"),
    ("/api/human-judgements/", "battle"),
    ("/api/judge-judgements/", "tournament"),
    ("/api/judge-judgements/", "run"),
    ("/api/judge-judgements/", "battle"),
    ("/api/instances/", "family"),
    ("/api/families/", "page"),
    ("/api/instances/", "page_size"),
]
# Beyond 2**63 - 1 (PostgreSQL's bigint, SQLite's INTEGER) SQLite's driver raised OverflowError, a 500
# on the embedded default; "１", "1.5" and " 1" were read as 1 and matched row 1 without a word.
NOT_AN_ID = ["99999999999999999999999", "9223372036854775808", "１", "1.5", " 1", "1 ", "-1", "0", "abc",
             "1e3", "²", "0x10", "NaN", "\x00", "1" * 5000, "1\n"]


@pytest.mark.parametrize(("path", "parameter"), NUMERIC_PARAMETERS)
def test_a_numeric_query_parameter_that_is_not_a_whole_number_in_range_is_a_400_naming_it(
        api, path, parameter):
    answers = {value: api.get(path, {parameter: value}) for value in NOT_AN_ID}
    assert {value[:30]: response.status_code for value, response in answers.items()
            if response.status_code != 400 or parameter not in response.json()} == {}


@pytest.fixture
def judged():
    """One battle with a crowd worker's judgement and a judge run's."""
    instance = verified_instance()
    with_responses(instance, "llava", "otter")
    tournament = create_tournament(name="One battle")
    launch_tournament(tournament=tournament)
    worker = WorkerFactory()
    assignment = next_assignment(worker=worker, stage=Stage.PAIRWISE)
    human = submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice="left")
    run = JudgeRun.objects.create(tournament=tournament, engine="gpt-4")
    judge = JudgeJudgement.objects.create(run=run, battle=human.battle, ordering="ab", winner="a")
    return human, judge


def test_ids_in_ascii_digits_still_filter(api, judged):
    human, judge = judged
    tournament = human.battle.tournament
    for path, parameter, value, expected in [
        ("/api/human-judgements/", "tournament", tournament.pk, 1),
        ("/api/human-judgements/", "instance", human.battle.instance_id, 1),
        ("/api/human-judgements/", "battle", human.battle_id, 1),
        ("/api/judge-judgements/", "tournament", tournament.pk, 1),
        ("/api/judge-judgements/", "run", judge.run_id, 1),
        ("/api/judge-judgements/", "battle", judge.battle_id, 1),
        ("/api/instances/", "family", human.battle.instance.family_id, 1),
        ("/api/human-judgements/", "tournament", 2**63 - 1, 0),
    ]:
        response = api.get(path, {parameter: str(value)})
        assert (response.status_code, response.json()["count"]) == (200, expected), (path, parameter)


def test_a_page_past_the_last_is_a_404_and_page_sizes_beyond_500_are_refused(api):
    assert api.get("/api/families/", {"page": "2"}).status_code == 404
    assert api.get("/api/families/", {"page": "1", "page_size": "500"}).status_code == 200
    assert "page_size" in api.get("/api/families/", {"page_size": "501"}).json()
    assert "page" in api.get("/api/families/", {"page": "last"}).json()


@pytest.mark.parametrize("pk", ["１", "%201", "1%20", "+1", "01x"])
def test_a_detail_id_that_is_not_ascii_digits_opens_no_row(api, pk):
    family = FamilyFactory()
    assert api.get(f"/api/families/{family.pk}/").status_code == 200
    response = api.get(f"/api/families/{pk.replace('1', str(family.pk))}/")
    assert response.status_code == 404, response.content[:200]


def test_every_numeric_filter_of_the_api_reads_ids_strictly():
    from django.db import models
    from django_filters.filters import NumberFilter

    from annotation.api.filters import FilterBackend
    from annotation.api.numbers import IdFilter
    from annotation.api.urls import router

    checked = 0
    for _, viewset, _ in router.registry:
        view = viewset()
        view.action = "list"
        queryset = viewset.queryset if viewset.queryset is not None else view.get_queryset()
        filterset = FilterBackend().get_filterset_class(view, queryset)
        for name, declared in (filterset.base_filters.items() if filterset else []):
            if declared.method is not None:  # a filter of its own making, not a column's value
                continue
            field_name = declared.field_name.split("__")
            model = queryset.model
            for part in field_name[:-1]:
                model = model._meta.get_field(part).related_model
            field = model._meta.get_field(field_name[-1])
            numeric = isinstance(field, (models.IntegerField, models.AutoField, models.ForeignKey))
            assert not isinstance(declared, NumberFilter), (viewset.__name__, name)
            if numeric and not field.choices:
                assert isinstance(declared, IdFilter), (viewset.__name__, name, type(declared))
                checked += 1
    assert checked >= 7


@pytest.mark.parametrize("pk", ["99999999999999999999999", "9223372036854775808"])
def test_detail_ids_beyond_the_database_range_are_404_not_500(api, pk):
    for path in ("families", "instances", "tournaments", "human-judgements", "judge-judgements"):
        response = api.get(f"/api/{path}/{pk}/")
        assert response.status_code == 404, (path, response.status_code)
