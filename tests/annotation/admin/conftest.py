"""The researcher's admin in headless Chromium, signed in as a superuser, for the browser tests here."""

import pytest
from django.contrib.auth import get_user_model

PASSWORD = "a-long-test-password"


def signed_in_page(browser, live_server, username, password):
    """A page of its own browser context, signed in to the admin as `username`; `page.errors`
    collects script errors and failed requests."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # A missing favicon is the browser's own request, not the page's.
    page.on("response", lambda response: errors.append(f"{response.status} {response.url}")
            if response.status >= 400 and not response.url.endswith("/favicon.ico") else None)
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/admin/")
    page.errors = errors
    return page


@pytest.fixture
def researcher_page(browser, live_server):
    get_user_model().objects.create_superuser("researcher", "researcher@example.org", PASSWORD)
    page = signed_in_page(browser, live_server, "researcher", PASSWORD)
    context = page.context
    yield page
    context.close()


@pytest.fixture(autouse=True)
def _each_admin_test_asks_afresh_whether_a_worker_answers(fresh_cache):
    return None
