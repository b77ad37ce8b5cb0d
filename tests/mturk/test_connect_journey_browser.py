"""Issue 24, a researcher's Connect study in headless Chromium, as `make run` leaves it: no
CLOUDRESEARCH_API_KEY. The researcher plans pay, publishes and is told that nothing was sent and
what to set; a participant arrives by the study link, writes a caption and gets the completion
code; the researcher downloads the approvals and bonuses CSV for Connect's dashboard and finds the
participant in it, though nothing was ever synced.

Screenshots of each page land in the test's tmp_path.
"""

import csv
import io
import os
from decimal import Decimal
from urllib.parse import urlencode

import pytest

from annotation.models import Assignment, Caption, Stage
from mturk.models import AuditLog, CrowdStudy
from tests.frontend_support import caption_unit
from tests.mturk_wire import make_researcher

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROJECT = "ee2a7726-0745-4952-8646-00ba758d57a9"
PARTICIPANT, CONNECT_ASSIGNMENT = "6512bd43d9caa6e02c990b0a", "CRA-6512bd43"
CAPTION = "A white cup of coffee with latte art in the shape of a heart, on a white saucer, steam rising."


@pytest.fixture
def researcher(browser, live_server):
    make_researcher()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/admin/")
    yield page
    context.close()


@pytest.fixture
def participant(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


def run_action(page, study, description):
    page.locator(f'input[name="_selected_action"][value="{study.pk}"]').check()
    page.locator('select[name="action"]').select_option(label=description)
    page.get_by_role("button", name="Go").click()


def messages(page):
    return page.locator("ul.messagelist li").all_inner_texts()


def test_a_connect_study_without_its_key_from_pay_plan_to_the_payments_csv(
        researcher, participant, live_server, settings, tmp_path):
    settings.CLOUDRESEARCH_API_KEY = ""
    settings.PUBLIC_BASE_URL = live_server.url
    unit = caption_unit()
    study = CrowdStudy.objects.create(
        platform="cloudresearch", stage=Stage.CAPTION, family=unit.family,
        name="VisIT captions on Connect", external_id=PROJECT, completion_code="CRDONE7",
        estimated_seconds=90, budget_usd=Decimal("50.00"), worker_countries="",
        min_approval_rate=0, min_approved_hits=0, auto_approval_days=14)
    page = researcher
    studies = f"{live_server.url}/admin/mturk/crowdstudy/"

    # Before anything is clicked, the study's page says nothing reaches Connect and what to set.
    page.goto(f"{studies}{study.pk}/change/")
    notice = " ".join(messages(page))
    assert "CLOUDRESEARCH_API_KEY is not set, so nothing is sent to CloudResearch Connect" in notice
    page.screenshot(path=str(tmp_path / "1-study-page.png"), full_page=True)

    # Plan pay: the reward comes from the estimated time and the target wage.
    page.goto(studies)
    run_action(page, study, "Plan pay and set the reward from the target wage")
    page.get_by_text("reward set to $").wait_for()
    study.refresh_from_db()
    assert study.reward_usd > 0

    # Publish: the form says what will happen, and the outcome says nothing was sent.
    run_action(page, study, "Publish a batch")
    page.get_by_role("heading", name="Publish a batch").wait_for()
    intro = page.locator("#content p").first.inner_text()
    assert "CloudResearch Connect: nothing is sent." in intro and "CLOUDRESEARCH_API_KEY" in intro
    page.screenshot(path=str(tmp_path / "2-publish-form.png"), full_page=True)
    page.get_by_label("Tasks:").fill("10")
    page.get_by_role("button", name="Publish").click()
    page.get_by_text("Recorded 10 place(s)").wait_for()
    said = " ".join(messages(page))
    page.screenshot(path=str(tmp_path / "3-published.png"), full_page=True)
    assert "published" not in said.lower()
    assert "Recorded 10 place(s)" in said
    assert "Nothing was sent to CloudResearch Connect: open 10 more place(s) on its own site" in said
    assert "CLOUDRESEARCH_API_KEY is not set either" in said
    row = AuditLog.objects.get(action="publish")
    assert (row.ok, row.sent_to_platform) == (True, False)

    # The participant arrives from Connect, writes the caption and is handed the code.
    returned = []
    participant.route("https://connect.cloudresearch.com/**", lambda route: (
        returned.append(route.request.url),
        route.fulfill(status=200, content_type="text/html", body="<title>Connect</title>done"),
    ))
    query = urlencode({"participantId": PARTICIPANT, "assignmentId": CONNECT_ASSIGNMENT,
                       "projectId": PROJECT})
    participant.goto(f"{live_server.url}/work/{Stage.CAPTION}/?{query}")
    participant.fill("textarea[name=caption-0]", CAPTION)
    participant.screenshot(path=str(tmp_path / "4-participant-caption.png"), full_page=True)
    participant.keyboard.press("Control+Enter")
    participant.locator("[data-completion-code]").wait_for()
    assert participant.locator("[data-completion-code]").inner_text() == "CRDONE7"
    participant.screenshot(path=str(tmp_path / "5-completion-code.png"), full_page=True)
    participant.wait_for_url("https://connect.cloudresearch.com/**", timeout=10_000)
    assert returned == ["https://connect.cloudresearch.com/participant/project/CRDONE7/complete"]
    assert Caption.objects.count() == 1
    assert Assignment.objects.get().platform_assignment_id == CONNECT_ASSIGNMENT

    # Nothing was synced (there is no key), yet the payments file lists the participant.
    page.goto(studies)
    with page.expect_download() as download:
        run_action(page, study, "Download the approvals and bonuses for Connect's dashboard (CSV)")
    path = tmp_path / "connect-payments.csv"
    download.value.save_as(path)
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert rows == [["participantId", "assignmentId", "status", "message", "bonus"],
                    [PARTICIPANT, CONNECT_ASSIGNMENT, "Approve", "", ""]]
    assert not AuditLog.objects.filter(action="sync").exists()
    assert page.errors == [] and participant.errors == []
