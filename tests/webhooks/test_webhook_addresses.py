"""A webhook URL reaches the public internet only: every spelling of an internal address is refused
when it is registered and again at each delivery (the check that guards), unless
WEBHOOK_ALLOWED_NETWORKS names the network; a refused or failed delivery keeps its status and
reason, never the answer's body."""

import socket

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from crowdbench.events import emit
from tests.factories import FamilyFactory
from tests.webhook_support import LOOPBACK, Receiver, deliver_due
from webhooks.models import Delivery, Endpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


def internal_urls(port):
    """Each spelling of an internal address, the receiver's port where it could reach it."""
    return {
        "loopback": f"http://127.0.0.1:{port}/hooks",
        "loopback by name": f"http://localhost:{port}/hooks",
        "decimal loopback": f"http://2130706433:{port}/hooks",
        "IPv6 loopback": f"http://[::1]:{port}/hooks",
        "IPv4-mapped IPv6 loopback": f"http://[::ffff:127.0.0.1]:{port}/hooks",
        "6to4 loopback": f"http://[2002:7f00:1::]:{port}/hooks",
        "unspecified": f"http://0.0.0.0:{port}/hooks",
        "cloud metadata": "http://169.254.169.254/latest/meta-data/",
        "private": "http://10.0.0.1/",
        "IPv6 unique local": "http://[fd00::1]/",
        "multicast": "http://224.0.0.1/",
    }


def delivered_once(url):
    family = FamilyFactory()
    Endpoint.objects.create(url=url, events=["stage.launched"], family=family)
    emit(event="stage.launched", scope=family, key=url, payload={"stage": "caption"})
    (delivery,) = deliver_due()
    Delivery.objects.all().delete()
    return delivery


def test_every_spelling_of_an_internal_address_is_refused_at_delivery_and_nothing_is_sent(receiver):
    for kind, url in internal_urls(receiver.server.server_address[1]).items():
        delivery = delivered_once(url)
        assert delivery.status == Delivery.Status.PENDING, kind
        assert delivery.last_error.startswith("Attempt 1: Refused: "), (kind, delivery.last_error)
        assert "WEBHOOK_ALLOWED_NETWORKS" in delivery.last_error and delivery.response_status is None
    assert receiver.received == []


def test_an_octal_address_is_never_sent(receiver):
    delivery = delivered_once(f"http://0177.0.0.1:{receiver.server.server_address[1]}/hooks")
    assert delivery.status == Delivery.Status.PENDING and delivery.last_error.startswith("Attempt 1: Invalid URL")
    assert receiver.received == []


def test_an_allowed_network_is_reached_by_name_with_the_name_as_host(receiver, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    port = receiver.server.server_address[1]
    delivery = delivered_once(f"http://localhost:{port}/hooks")
    assert (delivery.status, delivery.response_status) == (Delivery.Status.DELIVERED, 200)
    (request,) = receiver.received
    assert request.headers["Host"] == f"localhost:{port}"


def test_the_address_checked_is_the_address_connected_to(receiver, settings, monkeypatch):
    # A name whose answer changes after the check (DNS rebinding): the delivery goes to the
    # address that was checked, with one lookup, and the name stays the Host.
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    port = receiver.server.server_address[1]
    lookups = []
    resolve = socket.getaddrinfo

    def rebinding_resolver(host, *args, **kwargs):
        if host != "hooks.rebind.test":
            return resolve(host, *args, **kwargs)
        lookups.append(host)
        address = "127.0.0.1" if len(lookups) == 1 else "10.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_resolver)
    delivery = delivered_once(f"http://hooks.rebind.test:{port}/hooks")
    assert delivery.status == Delivery.Status.DELIVERED and lookups == ["hooks.rebind.test"]
    assert receiver.received[0].headers["Host"] == f"hooks.rebind.test:{port}"


def test_a_redirect_is_not_followed_even_to_an_allowed_address(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    target = Receiver()
    redirecting = Receiver(statuses=[307], location=target.url)
    try:
        delivery = delivered_once(redirecting.url)
    finally:
        redirecting.stop()
        target.stop()
    assert (delivery.status, delivery.response_status) == (Delivery.Status.PENDING, 307)
    assert delivery.last_error == "Attempt 1: HTTP 307 Temporary Redirect"
    assert len(redirecting.received) == 1 and target.received == []


def test_a_failed_delivery_keeps_the_status_and_never_the_answer_s_body(receiver, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    receiver.statuses = [500]
    delivery = delivered_once(receiver.url)
    assert (delivery.response_status, delivery.last_error) == (500, "Attempt 1: HTTP 500 Internal Server Error")
    assert "receiver is down" not in str(Delivery.objects.values())


def api_of_lead():
    client = APIClient()
    lead = get_user_model().objects.create_superuser("lead", password="pw")
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=lead).key}")
    return client


def test_the_api_refuses_to_register_an_internal_address_unless_its_network_is_allowed(settings):
    api, family = api_of_lead(), FamilyFactory()
    for kind, url in {**internal_urls(5432), "octal loopback": "http://0177.0.0.1:6379/"}.items():
        refused = api.post("/api/webhook-endpoints/", {"url": url, "events": ["stage.launched"],
                                                       "family": family.pk}, format="json")
        assert refused.status_code == 400 and "url" in refused.json(), kind
    assert "points inside our network" in str(refused.json()) or "Enter a valid URL" in str(refused.json())
    assert not Endpoint.objects.exists()

    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    made = api.post("/api/webhook-endpoints/", {"url": "http://10.0.0.1/hooks", "events": ["stage.launched"],
                                                "family": family.pk}, format="json")
    assert made.status_code == 201, made.content


def test_the_admin_refuses_to_register_an_internal_address_with_its_reason():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    response = client.post(reverse("admin:webhooks_endpoint_add"), {
        "url": "http://169.254.169.254/latest/meta-data/", "events": ["stage.launched"],
        "family": FamilyFactory().pk, "active": "on"})
    page = response.content.decode()
    assert response.status_code == 200 and "points inside our network" in page and "link-local" in page
    assert not Endpoint.objects.exists()


UNREADABLE_URLS = {
    "an IPv6 address left open": "http://[::1",
    "an A-label that is no name": "http://xn--zz.com/",
    "another": "http://xn--a.com/",
    "a port past 65535": "http://hooks.example.org:99999/",
    "port 0": "http://hooks.example.org:0/",
    "credentials": "https://user:secret@hooks.example.org/",
}


@pytest.mark.parametrize("kind", UNREADABLE_URLS)
def test_a_url_whose_host_or_port_cannot_be_read_is_refused_with_a_message_on_the_api_and_the_form(kind):
    url = UNREADABLE_URLS[kind]
    user = get_user_model().objects.create_superuser("hooks", "hooks@example.org", "pw")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    refused = api.post("/api/webhook-endpoints/", {"url": url, "events": ["stage.launched"]}, format="json")
    assert refused.status_code == 400, (kind, refused.content)
    assert "url" in refused.json()
    browser = Client()
    browser.force_login(user)
    form = browser.post(reverse("admin:webhooks_endpoint_add"), {"url": url, "events": ["stage.launched"],
                                                                 "active": "on"})
    assert form.status_code == 200, kind
    assert not Endpoint.objects.exists()


def test_an_endpoint_saved_before_the_check_fails_its_attempt_with_the_reason_and_is_not_retried_forever():
    delivery = delivered_once("http://xn--zz.com/hooks")
    assert delivery.status == Delivery.Status.PENDING and delivery.attempts == 1
    assert delivery.last_error.startswith("Attempt 1: Invalid URL: ")
