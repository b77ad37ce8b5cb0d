"""Issue 36 in headless Chromium: an in-house annotator whose vote was rejected sees it on "Your
work" as rejected, with the reviewer's reason inert, at desktop width and at 390 px."""

import os

import pytest
from django.contrib.auth import get_user_model

from annotation.crowdwork import review
from annotation.crowdwork.standing import local_worker
from tests.factories import WorkerFactory
from tests.frontend.test_annotator_moving_on_browser import log_in
from tests.frontend.test_frontend_browser import assert_accessible, shoot
from tests.frontend.test_worker_page_review import REASON, vote
from tests.frontend_support import verification_unit

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_rejected_vote_reads_as_rejected_with_the_reason_on_your_work(page, live_server):
    verification_unit()
    log_in(page, live_server)
    ann = local_worker(get_user_model().objects.get(username="ann"))
    review.reject_work(assignments=[vote(ann)], reason=REASON)
    vote(WorkerFactory())

    page.goto(f"{live_server.url}/work/me/")
    outcome = page.locator("td[data-rejected]")
    assert outcome.inner_text().startswith("Rejected\nThe reviewer’s reason: Marked \"Correct\" in two seconds")
    assert "<script>window.__xss=1</script>" in outcome.inner_text()
    assert page.evaluate("window.__xss") is None and page.errors == []
    assert "Agreed with the final verdict" not in page.content()
    shoot(page, "worker-rejected")
    assert_accessible(page)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shoot(page, "worker-rejected-phone")
