"""Bad numbers, ids and query parameters in the REST API are 400s with a message, never 500s
(issue 10, finding 4: `{"tournaments":[1e400]}`, `?against=²`)."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Snapshot, Tournament

pytestmark = pytest.mark.django_db

# Things a JSON number or a query string can hold that int() or the database chokes on.
BAD_NUMBERS = ["1e400", "-1e400", "NaN", "Infinity", "1.5", "99999999999999999999999", "-1", '"x"', "null",
               "true", "[]", "{}"]
BAD_QUERY_NUMBERS = ["²", "١٢", "1.5", "1e3", "-1", "99999999999999999999999", "", " 1", "0x10", "٣", "NaN"]


@pytest.fixture
def api():
    user = get_user_model().objects.create_superuser("researcher", password="pw")
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


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/api/human-judgements/", "tournament"),
        ("/api/human-judgements/", "instance"),
        ("/api/human-judgements/", "battle"),
        ("/api/judge-judgements/", "run"),
        ("/api/judge-judgements/", "tournament"),
        ("/api/instances/", "family"),
        ("/api/families/", "page"),
        ("/api/instances/", "page_size"),
    ],
)
@pytest.mark.parametrize("value", ["1e400", "²", "99999999999999999999999", "NaN", "\x00", "1" * 5000])
def test_number_filters_with_bad_values_never_give_a_server_error(api, path, parameter, value):
    response = api.get(path, {parameter: value})
    assert response.status_code in (200, 400, 404), (response.status_code, response.content[:300])


@pytest.mark.parametrize("pk", ["99999999999999999999999", "9223372036854775808"])
def test_detail_ids_beyond_the_database_range_are_404_not_500(api, pk):
    for path in ("families", "instances", "tournaments", "human-judgements", "judge-judgements"):
        response = api.get(f"/api/{path}/{pk}/")
        assert response.status_code == 404, (path, response.status_code)
