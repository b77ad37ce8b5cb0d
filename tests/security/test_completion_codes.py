"""Issue 10.3: a completion code goes only to the browser that did the work.

A Prolific PROLIFIC_PID or a CloudResearch participantId in a study link is no secret. The first
browser to arrive with it is bound to it (its session); another browser arriving with the same id
is a fresh claim the platform must confirm (Prolific: the SESSION_ID is that participant's
submission in this study; Connect: the assignmentId is that participant's in the project) before
it sees any of that participant's work or their code.
"""

from urllib.parse import urlencode

import pytest
from django.test import Client

from annotation.models import Assignment, Stage, Verification, Worker
from frontend import tokens
from tests.frontend_support import caption_unit, study, verification_unit

pytestmark = pytest.mark.django_db

CODE = "C0DE42"
STAGE = Stage.VERIFICATION
JSON = {"Accept": "application/json"}


def prolific_link(pid, session_id="SESSION1"):
    return f"/work/{STAGE}/?" + urlencode({"PROLIFIC_PID": pid, "STUDY_ID": "STUDY123",
                                           "SESSION_ID": session_id})


def connect_link(participant, assignment_id="CRASG1"):
    return f"/work/{STAGE}/?" + urlencode({"participantId": participant, "projectId": "PRJ1",
                                           "assignmentId": assignment_id})


def do_one_task(browser, link):
    """A participant's browser arrives, verifies one response and gets the next page's link."""
    page = browser.get(link, follow=True)
    assert page.status_code == 200 and page.context["assignment"] is not None
    result = browser.post("/work/submit/", {"token": page.context["token"], "verdict": "correct"},
                          headers=JSON).json()
    assert result["ok"]
    return page.context["session_token"], result["next"]


def assert_nothing_given(response):
    html = response.content.decode()
    assert response.status_code == 403
    assert CODE not in html
    assert 'name="token"' not in html and 'name="session"' not in html and "/work/me/" not in html


@pytest.fixture
def prolific_study():
    for _ in range(3):
        verification_unit()
    return study(platform=Worker.Platform.PROLIFIC, stage=STAGE)


def test_someone_elses_prolific_pid_opens_nothing_and_yields_no_code(prolific_study):
    session_token, next_url = do_one_task(Client(), prolific_link("VICTIM"))
    before = sorted(Assignment.objects.values_list("pk", "status", "worker_id"))

    attacker = Client()
    assert_nothing_given(attacker.get(prolific_link("VICTIM", session_id="ATTACKERSESSION")))
    assert_nothing_given(attacker.get(next_url))
    assert_nothing_given(attacker.post("/work/finish/", {"session": session_token}))
    assert sorted(Assignment.objects.values_list("pk", "status", "worker_id")) == before


def test_the_browser_that_did_the_work_gets_the_code(prolific_study):
    victim = Client()
    session_token, next_url = do_one_task(victim, prolific_link("VICTIM"))
    assert victim.get(next_url).status_code == 200
    finished = victim.post("/work/finish/", {"session": session_token})
    assert finished.status_code == 200 and CODE in finished.content.decode()


def test_a_fresh_claim_with_someone_elses_pid_and_ones_own_session_is_refused_by_prolific(
        prolific_study, prolific):
    do_one_task(Client(), prolific_link("VICTIM"))
    prolific.submissions["ATTACKERSESSION"] = {"id": "ATTACKERSESSION", "participant_id": "ATTACKER",
                                               "study_id": "STUDY123", "status": "ACTIVE"}
    attack = Client().get(prolific_link("VICTIM", session_id="ATTACKERSESSION"))
    assert_nothing_given(attack)
    assert [request[1] for request in prolific.requests] == ["/api/v1/submissions/ATTACKERSESSION/"]


def test_the_participant_in_a_second_browser_is_confirmed_by_prolific(prolific_study, prolific):
    session_token, _ = do_one_task(Client(), prolific_link("VICTIM"))
    prolific.submissions["SESSION1"] = {"id": "SESSION1", "participant_id": "VICTIM",
                                        "study_id": "STUDY123", "status": "ACTIVE"}
    laptop = Client()
    assert laptop.get(prolific_link("VICTIM")).status_code == 200
    finished = laptop.post("/work/finish/", {"session": session_token})
    assert CODE in finished.content.decode()


def test_someone_elses_connect_participant_id_opens_nothing(connect):
    for _ in range(2):
        verification_unit()
    study(platform=Worker.Platform.CLOUDRESEARCH, stage=STAGE, external_id="PRJ1")
    session_token, next_url = do_one_task(Client(), connect_link("VICTIM"))
    connect.assignments["ATTACKERASG"] = {"assignmentId": "ATTACKERASG", "participantId": "ATTACKER",
                                          "projectId": "PRJ1", "status": "Pending"}
    attacker = Client()
    assert_nothing_given(attacker.get(connect_link("VICTIM", assignment_id="ATTACKERASG")))
    assert_nothing_given(attacker.post("/work/finish/", {"session": session_token}))
    assert Verification.objects.count() == 1
    connect.assignments["CRASG1"] = {"assignmentId": "CRASG1", "participantId": "VICTIM",
                                     "projectId": "PRJ1", "status": "Pending"}
    phone = Client()
    assert phone.get(connect_link("VICTIM")).status_code == 200


def test_the_qualification_test_does_not_open_for_someone_elses_pid(prolific_study):
    from tests.frontend_support import qualification_test

    qualification_test()
    Client().get(prolific_link("VICTIM"), follow=True)  # the victim arrives first and is sent to the test
    response = Client().get(f"/work/qualify/{STAGE}/?" + urlencode(
        {"PROLIFIC_PID": "VICTIM", "STUDY_ID": "STUDY123", "SESSION_ID": "X"}))
    assert response.status_code == 403


def test_a_participant_bound_in_the_session_before_the_cookie_keeps_their_study():
    caption_unit()
    found = study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)
    worker = Worker.objects.create(platform=Worker.Platform.PROLIFIC, external_id="P-EARLIER")
    browser = Client()
    session = browser.session
    session["crowdbench.participants"] = [worker.pk]
    session.save()
    resumed = browser.get(f"/work/{Stage.CAPTION}/?continue=" + tokens.sign_session(
        tokens.StudySession(worker_id=worker.pk, study_id=found.pk, platform_session_id="S")))
    assert resumed.status_code == 200 and resumed.context["assignment"].worker == worker
