"""A study's submissions and committed spend are one computation (mturk.selectors.study_figures),
which the study's page, the `study.completed` event and its e-mail all render (issue 39): from the
platform's record once a sync brought it, else from the work submitted through the study link,
saying it is not yet synced."""

import html
import json
from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Stage, Worker
from mturk.selectors import study_figures
from mturk.services import syncing
from tests.frontend_support import study, verification_unit
from tests.mturk_wire import make_researcher
from tests.webhook_support import deliver_due
from webhooks.models import Delivery

pytestmark = pytest.mark.django_db

JSON = {"Accept": "application/json"}


def prolific_link(pid, session):
    return f"/work/{Stage.VERIFICATION}/?" + urlencode({"PROLIFIC_PID": pid, "STUDY_ID": "STUDY123",
                                                        "SESSION_ID": session})


def submit_through_the_link(pid, session):
    browser = Client()
    page = browser.get(prolific_link(pid, session), follow=True)
    assert page.context["assignment"] is not None
    result = browser.post("/work/submit/", {"token": page.context["token"], "verdict": "correct"},
                          headers=JSON).json()
    assert result["ok"]


@pytest.fixture
def prolific_study(prolific, settings):
    settings.NOTIFY_EMAILS = ["lead@example.org"]
    for _ in range(2):
        verification_unit()
    prolific_study = study(platform=Worker.Platform.PROLIFIC, stage=Stage.VERIFICATION)
    prolific_study.reward_usd = Decimal("0.75")
    prolific_study.save()
    return prolific_study


def study_page(study):
    browser = Client()
    browser.force_login(make_researcher())
    page = browser.get(reverse("admin:mturk_crowdstudy_change", args=[study.pk]))
    listing = browser.get(reverse("admin:mturk_crowdstudy_changelist"))
    assert page.status_code == listing.status_code == 200
    return html.unescape(page.content.decode()), html.unescape(listing.content.decode())


def test_the_event_its_email_and_the_study_page_count_the_submissions_made_through_the_link(
        prolific_study, mailoutbox):
    submit_through_the_link("P1", "S1")
    submit_through_the_link("P2", "S2")  # the stage's last unit: the study completes

    (event,) = Delivery.objects.filter(event="study.completed", channel=Delivery.Channel.EMAIL)
    data = event.payload["data"]
    # Two participants' work at $0.75, with Prolific's assumed 33.3% fee on the batch.
    expected = ("2 submissions (submitted through the study link here; not yet synced from Prolific); "
                "$2.00 committed")
    assert data["summary"] == study_figures(prolific_study).summary == expected
    assert (data["submissions"], data["approved"], data["submissions_source"], data["committed_usd"]) == (
        2, None, "not synced", "2.00")

    deliver_due()
    (mail,) = mailoutbox
    assert f"summary: {expected}" in mail.body and "submissions: 2" in mail.body

    page, listing = study_page(prolific_study)
    assert expected in page
    assert "$2.00" in listing and "2 (not yet synced)" in listing


def test_once_synced_the_figures_are_the_platforms_record_on_every_place(prolific_study, prolific):
    submit_through_the_link("P1", "S1")
    for sid, pid in [("S1", "P1"), ("S3", "P3")]:  # P3 submitted on Prolific, not through our link
        prolific.submissions[sid] = {"id": sid, "participant_id": pid, "study_id": "STUDY123",
                                     "status": "AWAITING REVIEW", "completed_at": "2024-05-01T10:00:00Z"}
    syncing.sync_study(study=prolific_study)

    figures = study_figures(prolific_study)
    assert (figures.source, figures.submissions, figures.approved, figures.submitted_here) == ("platform", 2, 0, 1)
    assert figures.summary.startswith("2 submissions on Prolific (0 approved; synced ")
    assert figures.summary.endswith("$2.00 committed")
    submit_through_the_link("P2", "S2")
    event = json.loads(json.dumps(Delivery.objects.get(event="study.completed").payload))["data"]
    figures = study_figures(prolific_study)
    assert event["summary"] == figures.summary
    assert "2 submissions on Prolific" in event["summary"] and "1 more submitted here since: sync to count them" in (
        event["summary"])
    page, _ = study_page(prolific_study)
    assert figures.summary in page


def test_in_house_work_is_counted_here_with_no_platform_to_sync():
    in_house = study(platform=Worker.Platform.LOCAL, stage=Stage.VERIFICATION, external_id="")
    figures = study_figures(in_house)
    assert figures.summary == "0 submissions (in-house: stored here, no platform to sync); $0.00 committed"
