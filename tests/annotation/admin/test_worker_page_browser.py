"""A researcher in headless Chromium finds a worker in the Workers list, opens their page, reads
the flags with their evidence and follows a review link to that worker's answers."""

import os

import pytest
from django.contrib.auth import get_user_model

from tests.worker_page_support import crowd

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-test-password"
SCREENSHOT = "/tmp/worker_page.png"


@pytest.fixture
def researcher_page(browser, live_server):
    get_user_model().objects.create_superuser("researcher", "researcher@example.org", PASSWORD)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda response: errors.append(f"{response.status} {response.url}")
            if response.status >= 400 and not response.url.endswith("/favicon.ico") else None)
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/admin/")
    page.errors = errors
    yield page
    context.close()


def test_a_researcher_opens_a_worker_s_page_from_the_workers_list_and_sees_flags_and_review_links(
        researcher_page, live_server):
    the_crowd = crowd()
    worker = the_crowd.too_fast
    page = researcher_page
    page.get_by_role("link", name="Workers").first.click()
    page.locator("#searchbar").fill(worker.external_id)
    page.locator("#searchbar").press("Enter")
    page.get_by_role("link", name="Time, gold, agreement, flags and review").click()
    page.wait_for_url(f"{live_server.url}/admin/annotation/worker/{worker.pk}/page/")

    flag = page.locator('.worker-flag[data-flag="too_fast"]')
    assert "Too fast" in flag.inner_text()
    assert "median 3 s per task against the stage's 50 s" in flag.inner_text()
    assert page.locator("tr[data-stage='verification']").inner_text().split("\t")[1:4] == ["20", "0", "0"]
    page.screenshot(path=SCREENSHOT, full_page=True)

    flag.get_by_role("link", name="Review these answers").click()
    page.wait_for_url(f"**/admin/annotation/answer/?worker__id__exact={worker.pk}&unit__stage__exact=verification")
    assert "20 answers to review" in page.content()
    page.go_back()
    assert page.get_by_role("button", name="Review the provisional answers").is_visible()
    assert page.errors == []
