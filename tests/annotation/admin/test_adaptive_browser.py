"""Ask until decided in headless Chromium: a researcher turns it on for a family's verification on
the family's page, and the workflow page says what it bought."""

import os

import pytest
from django.contrib.auth import get_user_model

from annotation.collection import references, verification
from annotation.crowdwork import queue
from annotation.models import Instance, Reference, Stage
from tests.factories import CaptionFactory, InstanceFactory, WorkerFactory, launch

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-test-password"


def test_a_researcher_turns_ask_until_decided_on_and_the_workflow_shows_what_it_bought(browser, live_server):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    family = instance.family
    launch(family, Stage.VERIFICATION, overlap=3, verification_rule="majority")
    reference = references.store_reference(instance=instance, text="Three sheep.", source=Reference.Source.MANUAL)
    for _ in range(2):  # two of the three verifiers agree already
        worker = WorkerFactory()
        lease = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
        verification.submit_verification(assignment_id=lease.pk, worker=worker, is_correct=True)

    get_user_model().objects.create_superuser("researcher", "researcher@example.org", PASSWORD)
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/change/")
    adaptive = page.locator('input[name="stage_configs-0-adaptive"]')
    assert "stop asking once enough verifiers agree" in page.content()
    adaptive.check()
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(f"{live_server.url}/admin/annotation/instructionfamily/")
    assert "1 decision(s) made" in page.locator(".messagelist").inner_text()

    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/workflow/")
    step = page.locator('[data-step="verification"]').inner_text()
    assert "ask until decided (2 agreeing of up to 3)" in step
    assert "2 answers bought of 3 at a fixed overlap (33% fewer); 1 of 1 decided" in step
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.CORRECT
    page.screenshot(path="/tmp/adaptive.png", full_page=True)
