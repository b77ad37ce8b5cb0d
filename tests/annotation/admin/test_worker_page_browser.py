"""A researcher in headless Chromium finds a worker in the Workers list, opens their page, reads
the flags with their evidence and follows a review link to that worker's answers."""

import os

import pytest

from tests.worker_page_support import crowd

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOT = "/tmp/worker_page.png"


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
