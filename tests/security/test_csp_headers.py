"""Every page carries a Content-Security-Policy that keeps images to known hosts (issue 10, finding 7)."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

METADATA_IMAGE = "https://169.254.169.254/latest/meta-data/x.png"


def _directives(response):
    policy = response["Content-Security-Policy"]
    return {name: rest.split() for name, _, rest in
            (part.strip().partition(" ") for part in policy.split(";"))}


@pytest.fixture
def admin_client(db):
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    return client


@pytest.mark.parametrize("path", [
    "/admin/login/", "/admin/", "/admin/annotation/imageasset/", "/dashboard/", "/api/", "/api/docs/",
    "/work/login/", "/no-such-page/",
])
def test_every_page_limits_images_and_scripts_to_known_origins(admin_client, settings, path):
    settings.IMAGE_MEDIA_ORIGINS = ["https://media.example.org"]
    response = admin_client.get(path)

    directives = _directives(response)
    allowed_images = {"'self'", "blob:", "data:", "https://media.example.org",
                      *(f"https://{host}" for host in settings.IMAGE_URL_ALLOWED_HOSTS)}
    assert set(directives["img-src"]) <= allowed_images
    assert directives["script-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["default-src"] == ["'self'"]


def test_the_admin_may_not_be_framed_by_anyone(admin_client):
    assert _directives(admin_client.get("/admin/"))["frame-ancestors"] == ["'none'"]


@pytest.mark.browser
def test_chromium_loads_no_off_list_image_on_admin_pages_and_reports_no_other_violation(
        browser, live_server, admin_client, settings):
    """The policy holds in a real browser, and the admin and Swagger UI still work under it."""
    session = admin_client.cookies[settings.SESSION_COOKIE_NAME].value
    context = browser.new_context()
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session,
                          "url": live_server.url}])
    page = context.new_page()
    fetched, violations = [], []
    page.on("requestfinished", lambda request: fetched.append(request.url))
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)

    page.goto(f"{live_server.url}/admin/annotation/imageasset/")
    assert page.locator("#changelist").is_visible()
    page.goto(f"{live_server.url}/api/docs/")
    page.locator(".swagger-ui .info .title").wait_for()
    assert not violations, violations

    # An image a worker's link would inject is blocked by the policy, not fetched.
    page.goto(f"{live_server.url}/admin/")
    blocked = page.evaluate("""url => new Promise(resolve => {
        document.addEventListener('securitypolicyviolation', e => resolve(e.blockedURI));
        const img = document.createElement('img'); img.src = url; document.body.append(img);
    })""", METADATA_IMAGE)
    context.close()

    assert re.match(r"https://169\.254\.169\.254", blocked)
    assert not any("169.254.169.254" in url for url in fetched)
