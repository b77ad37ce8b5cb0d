"""A webhook's signing secret is write-only: shown once, to the member who made or rotated it, and
never again in the admin, the API or the audit trail; every role of the group, viewers included,
reads the endpoint without it."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation import teams
from annotation.models import Membership
from tests.factories import FamilyFactory
from webhooks.models import Endpoint

pytestmark = pytest.mark.django_db
Role = Membership.Role


class Group:
    """One research group with a family, a member of each role, and an endpoint of the family."""

    def __init__(self):
        self.group = teams.create_group(name="Vision lab")
        self.family = FamilyFactory(name="Recipes", group=self.group)
        self.people = {}
        for role in Role.values:
            user = get_user_model().objects.create_user(f"vision-{role}", password="pw")
            teams.add_member(group=self.group, user=user, role=role)
            self.people[role] = get_user_model().objects.get(pk=user.pk)
        self.endpoint = Endpoint.objects.create(url="https://hooks.example.org/vision", events=["stage.launched"],
                                                family=self.family)

    def browser(self, role):
        client = Client()
        client.force_login(self.people[role])
        return client

    def api(self, role):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=self.people[role]).key}")
        return client


@pytest.fixture
def vision():
    return Group()


def admin_pages(endpoint):
    return [reverse("admin:webhooks_endpoint_changelist"),
            reverse("admin:webhooks_endpoint_change", args=[endpoint.pk]),
            reverse("admin:webhooks_endpoint_history", args=[endpoint.pk]),
            reverse("admin:webhooks_delivery_changelist")]


def shown_in_admin(client, endpoint):
    endpoint.refresh_from_db()
    return [page for page in admin_pages(endpoint) if endpoint.secret in client.get(page).content.decode()]


@pytest.mark.parametrize("role", Role.values)
def test_no_role_reads_the_secret_in_the_admin_or_the_api(vision, role):
    assert shown_in_admin(vision.browser(role), vision.endpoint) == []
    api = vision.api(role)
    listed = api.get("/api/webhook-endpoints/")
    assert listed.status_code == 200 and [row["url"] for row in listed.json()["results"]] == [vision.endpoint.url]
    detail = api.get(f"/api/webhook-endpoints/{vision.endpoint.pk}/")
    assert "secret" not in detail.json() and vision.endpoint.secret not in listed.content.decode()


def test_the_admin_shows_a_new_endpoint_s_secret_once_to_its_maker(vision):
    client = vision.browser(Role.RESEARCHER)
    made = client.post(reverse("admin:webhooks_endpoint_add"), {
        "url": "https://hooks.example.org/new", "events": ["stage.launched"], "family": vision.family.pk,
        "active": "on"}, follow=True)
    endpoint = Endpoint.objects.get(url="https://hooks.example.org/new")
    assert len(endpoint.secret) == 64 and endpoint.secret in made.content.decode()
    assert shown_in_admin(client, endpoint) == []
    assert shown_in_admin(vision.browser(Role.OWNER), endpoint) == []


def test_rotating_in_the_admin_shows_the_new_secret_once_and_the_trail_says_only_that_it_changed(vision):
    client, old = vision.browser(Role.RESEARCHER), vision.endpoint.secret
    rotated = client.post(reverse("admin:webhooks_endpoint_changelist"),
                          {"action": "rotate_secret", "_selected_action": [vision.endpoint.pk]}, follow=True)
    vision.endpoint.refresh_from_db()
    assert vision.endpoint.secret != old and vision.endpoint.secret in rotated.content.decode()
    assert shown_in_admin(client, vision.endpoint) == []
    history = client.get(reverse("admin:webhooks_endpoint_history", args=[vision.endpoint.pk])).content.decode()
    assert "rotated" in history and old not in history


@pytest.mark.parametrize("role", [Role.VIEWER, Role.REVIEWER])
def test_a_viewer_or_reviewer_cannot_rotate_a_secret(vision, role):
    old = vision.endpoint.secret
    vision.browser(role).post(reverse("admin:webhooks_endpoint_changelist"),
                              {"action": "rotate_secret", "_selected_action": [vision.endpoint.pk]})
    assert vision.api(role).post(f"/api/webhook-endpoints/{vision.endpoint.pk}/rotate_secret/").status_code == 403
    vision.endpoint.refresh_from_db()
    assert vision.endpoint.secret == old


def test_the_api_hands_the_secret_back_at_registration_and_rotation_only(vision):
    api = vision.api(Role.RESEARCHER)
    made = api.post("/api/webhook-endpoints/", {"url": "https://hooks.example.org/api", "events": ["stage.launched"],
                                                "family": vision.family.pk}, format="json")
    assert made.status_code == 201 and made.json()["secret"] == Endpoint.objects.get(pk=made.json()["id"]).secret
    changed = api.patch(f"/api/webhook-endpoints/{made.json()['id']}/", {"description": "bot"}, format="json")
    assert changed.status_code == 200 and "secret" not in changed.json()

    rotated = api.post(f"/api/webhook-endpoints/{made.json()['id']}/rotate_secret/")
    assert rotated.status_code == 200
    assert rotated.json()["secret"] == Endpoint.objects.get(pk=made.json()["id"]).secret != made.json()["secret"]
    assert "secret" not in api.get(f"/api/webhook-endpoints/{made.json()['id']}/").json()


def test_a_viewer_cannot_change_the_group_s_endpoint_through_the_api(vision):
    # A member who changes rows in another group holds the model's change permission; the row's
    # group decides.
    other = teams.create_group(name="Speech lab")
    teams.add_member(group=other, user=vision.people[Role.VIEWER], role=Role.RESEARCHER)
    api = vision.api(Role.VIEWER)
    refused = api.patch(f"/api/webhook-endpoints/{vision.endpoint.pk}/", {"url": "https://evil.example.org/"},
                        format="json")
    assert refused.status_code == 403
    vision.endpoint.refresh_from_db()
    assert vision.endpoint.url == "https://hooks.example.org/vision"
