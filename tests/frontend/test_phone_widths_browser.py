"""Every annotator page fits a 390-pixel phone: nothing to scroll sideways for. The pages are
enumerated from the annotator's URL patterns, and the test fails when a page it does not open is
added, so a new page is held to it the day it is added."""

import os
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.urls import get_resolver, resolve

from annotation.models import Stage
from frontend import annotator_urls
from tests.frontend_support import (
    caption_unit,
    instruction_unit,
    pairwise_unit,
    preview_url,
    qualification_test,
    verification_unit,
)

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
# Posted to by a page, never opened: a save, a give-back, the lease's heartbeat, the study's finish, signing out.
NOT_PAGES = {"submit", "give_back", "heartbeat", "finish", "logout"}
PASSWORD = "annotate-me-42"


def test_every_annotator_page_fits_a_phone(browser, live_server):
    units = {Stage.INSTRUCTION_GENERATION: instruction_unit(), Stage.CAPTION: caption_unit(photos=("coffee", "camera")),
             Stage.VERIFICATION: verification_unit(photos=("astronaut", "camera")), Stage.PAIRWISE: pairwise_unit()}
    qualification_test(Stage.CAPTION)
    get_user_model().objects.create_user("ann", password=PASSWORD)
    page = browser.new_context(viewport=PHONE).new_page()
    opened, wide = set(), {}

    def check(path):
        response = page.goto(live_server.url + path)
        assert response.status == 200, (path, response.status)
        opened.add(resolve(urlsplit(page.url).path).url_name)
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[path] = width

    check("/")
    check("/work/login/?next=/work/")
    page.get_by_label("User name").fill("ann")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/work/")
    check("/work/")
    for stage in units:
        # An in-house annotator's next task of each stage, as they take it.
        check(f"/work/{stage}/")
    check(f"/work/qualify/{Stage.CAPTION}/")
    check("/work/me/")
    for unit in units.values():
        # What MTurk shows of each HIT before it is accepted.
        check(preview_url(unit))
    page.context.close()

    annotator_pages = {pattern.name for pattern in get_resolver(annotator_urls).url_patterns} - NOT_PAGES
    assert annotator_pages <= opened, f"pages this test does not open: {annotator_pages - opened}"
    assert wide == {}
