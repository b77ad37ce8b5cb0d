"""Sign-ins are throttled with django-axes: admin, annotator login and API tokens (issue 10, finding 5)."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

PASSWORD = "the-right-password-1"


@pytest.fixture
def researcher():
    return get_user_model().objects.create_superuser("researcher", password=PASSWORD)


def _sign_in(client, path, password, **extra):
    return client.post(path, {"username": "researcher", "password": password}, **extra)


def _signed_in(client):
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("path", ["/admin/login/", "/work/login/"])
def test_25_wrong_passwords_then_the_right_one_does_not_sign_in(researcher, path, settings):
    client = Client()
    for attempt in range(25):
        _sign_in(client, path, f"guess-{attempt}")

    response = _sign_in(client, path, PASSWORD)

    assert response.status_code == 429
    assert not _signed_in(client)
    page = response.content.decode()
    assert f"Too many failed sign-in attempts ({settings.AXES_FAILURE_LIMIT})" in page
    assert "blocked for 15 minutes" in page
    assert response["Retry-After"] == "900"


def test_fewer_failures_than_the_limit_still_let_the_right_password_in(researcher, settings):
    client = Client()
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _sign_in(client, "/admin/login/", f"guess-{attempt}").status_code == 200

    assert _sign_in(client, "/admin/login/", PASSWORD).status_code == 302
    assert _signed_in(client)


def test_guesses_spread_over_many_addresses_still_lock_the_account(researcher, settings):
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(Client(REMOTE_ADDR=f"203.0.113.{attempt + 1}"), "/work/login/", f"guess-{attempt}")

    fresh = Client(REMOTE_ADDR="198.51.100.7")
    assert _sign_in(fresh, "/work/login/", PASSWORD).status_code == 429
    assert not _signed_in(fresh)


def test_one_address_walking_through_accounts_is_locked_out(researcher, settings):
    client = Client(REMOTE_ADDR="203.0.113.50")
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        client.post("/admin/login/", {"username": f"someone-{attempt}", "password": "guess"})

    assert _sign_in(client, "/admin/login/", PASSWORD).status_code == 429
    assert not _signed_in(client)


def test_a_forged_forwarded_for_header_does_not_reset_the_count(researcher, settings):
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(Client(), "/admin/login/", f"guess-{attempt}", HTTP_X_FORWARDED_FOR=f"10.0.0.{attempt}")

    locked = Client()
    assert _sign_in(locked, "/admin/login/", PASSWORD, HTTP_X_FORWARDED_FOR="10.9.9.9").status_code == 429


def test_25_wrong_api_tokens_then_the_right_one_gets_no_data(researcher):
    right = Token.objects.create(user=researcher).key
    client = APIClient(REMOTE_ADDR="203.0.113.9")
    statuses = set()
    for attempt in range(25):
        client.credentials(HTTP_AUTHORIZATION=f"Token {attempt:040x}")
        statuses.add(client.get("/api/families/").status_code)

    client.credentials(HTTP_AUTHORIZATION=f"Token {right}")
    response = client.get("/api/families/")

    assert statuses == {401, 429}
    assert response.status_code == 429
    assert "Too many failed sign-in attempts" in response.json()["detail"]
    other_address = APIClient(REMOTE_ADDR="198.51.100.8")
    other_address.credentials(HTTP_AUTHORIZATION=f"Token {right}")
    assert other_address.get("/api/families/").status_code == 200
