"""Registering webhooks and reading the delivery log, in the admin and through the REST API."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.crowdwork import stages
from annotation.models import Stage
from tests.factories import FamilyFactory
from tests.scoring_factories import create_tournament
from webhooks.models import Delivery, Endpoint

pytestmark = pytest.mark.django_db


def staff(*codenames):
    user = get_user_model().objects.create_user("researcher", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="webhooks", codename__in=codenames))
    return user


def api_for(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def admin_client_of_lead():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    return client


def test_a_researcher_registers_an_endpoint_in_the_admin_and_sees_its_deliveries(admin_client_of_lead):
    family = FamilyFactory(name="Parades")
    page = admin_client_of_lead.get(reverse("admin:webhooks_endpoint_add"))
    assert page.status_code == 200 and "Judge run failed" in page.content.decode()

    response = admin_client_of_lead.post(reverse("admin:webhooks_endpoint_add"), {
        "url": "https://hooks.example.org/crowdbench", "events": ["stage.launched", "stage.completed"],
        "family": family.pk, "active": "on", "description": "Lab bot", "secret": "s3cret-of-the-lab"})
    assert response.status_code == 302
    endpoint = Endpoint.objects.get()
    assert (endpoint.events, endpoint.family, endpoint.secret) == (["stage.launched", "stage.completed"], family,
                                                                   "s3cret-of-the-lab")

    stages.launch_stage(family=family, stage=Stage.CAPTION)
    log = admin_client_of_lead.get(reverse("admin:webhooks_delivery_changelist")).content.decode()
    assert "stage.launched" in log and "Parades" in log and "Pending" in log
    endpoints = admin_client_of_lead.get(reverse("admin:webhooks_endpoint_changelist")).content.decode()
    assert "instruction family “Parades”" in endpoints


def test_the_admin_refuses_an_endpoint_of_two_scopes_or_no_event(admin_client_of_lead):
    family, tournament = FamilyFactory(), create_tournament(name="t", sample=False)
    response = admin_client_of_lead.post(reverse("admin:webhooks_endpoint_add"), {
        "url": "https://hooks.example.org/x", "events": ["stage.launched"], "family": family.pk,
        "tournament": tournament.pk, "secret": "s"})
    assert "Choose one family, tournament or study" in response.content.decode()
    response = admin_client_of_lead.post(reverse("admin:webhooks_endpoint_add"), {
        "url": "ftp://hooks.example.org/x", "secret": "s"})
    assert response.status_code == 200 and not Endpoint.objects.exists()


def test_the_api_registers_an_endpoint_and_hands_back_its_secret():
    api = api_for(staff("add_endpoint", "view_endpoint", "change_endpoint"))
    family = FamilyFactory()
    response = api.post("/api/webhook-endpoints/", {"url": "https://hooks.example.org/a",
                                                    "events": ["judge_run.failed", "judge_run.failed"],
                                                    "family": family.pk}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["events"] == ["judge_run.failed"] and len(response.json()["secret"]) == 64
    assert Endpoint.objects.get().secret == response.json()["secret"]

    bad = api.post("/api/webhook-endpoints/", {"url": "https://hooks.example.org/a", "events": ["nothing"]},
                   format="json")
    assert bad.status_code == 400 and "events" in bad.json()
    tournament = create_tournament(name="t", sample=False)
    both = api.patch(f"/api/webhook-endpoints/{response.json()['id']}/", {"tournament": tournament.pk},
                     format="json")
    assert both.status_code == 400


def test_the_api_reads_the_delivery_log_and_sends_a_delivery_again():
    family = FamilyFactory()
    Endpoint.objects.create(url="https://hooks.example.org/a", events=["stage.launched"], family=family)
    stages.launch_stage(family=family, stage=Stage.CAPTION)
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(status=Delivery.Status.FAILED, attempts=10,
                                                   last_error="Attempt 10: HTTP 500: down")

    reader = api_for(staff("view_delivery"))
    (row,) = reader.get("/api/webhook-deliveries/?status=failed").json()["results"]
    assert (row["event"], row["attempts"], row["last_error"]) == ("stage.launched", 10, "Attempt 10: HTTP 500: down")
    assert reader.post(f"/api/webhook-deliveries/{delivery.pk}/send_again/").status_code == 403

    get_user_model().objects.all().delete()
    sender = api_for(staff("view_delivery", "change_delivery"))
    again = sender.post(f"/api/webhook-deliveries/{delivery.pk}/send_again/")
    assert again.status_code == 200
    assert (again.json()["status"], again.json()["attempts"]) == ("pending", 0)


def test_a_staff_member_without_webhook_permissions_sees_nothing():
    api = api_for(staff())
    assert api.get("/api/webhook-endpoints/").status_code == 403
    assert api.get("/api/webhook-deliveries/").status_code == 403


def test_a_research_group_s_members_register_and_read_webhooks_of_their_group_only():
    from annotation import teams
    from annotation.models import Membership

    vision, speech = teams.create_group(name="Vision lab"), teams.create_group(name="Speech lab")
    ours, theirs = FamilyFactory(name="Recipes", group=vision), FamilyFactory(name="Signs", group=speech)
    member = get_user_model().objects.create_user("vera", password="pw")
    teams.add_member(group=vision, user=member, role=Membership.Role.RESEARCHER)
    hidden = Endpoint.objects.create(url="https://hooks.example.org/speech", events=["stage.launched"], family=theirs)
    api = api_for(member)

    assert api.get("/api/webhook-endpoints/").json()["results"] == []
    assert api.get(f"/api/webhook-endpoints/{hidden.pk}/").status_code == 404
    body = {"url": "https://hooks.example.org/vision", "events": ["stage.launched"]}
    assert api.post("/api/webhook-endpoints/", {**body, "family": theirs.pk}, format="json").status_code == 400
    refused = api.post("/api/webhook-endpoints/", body, format="json")
    assert refused.status_code == 400 and "your group" in str(refused.json())
    made = api.post("/api/webhook-endpoints/", {**body, "family": ours.pk}, format="json")
    assert made.status_code == 201
    assert [row["url"] for row in api.get("/api/webhook-endpoints/").json()["results"]] == [body["url"]]
