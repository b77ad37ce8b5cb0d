"""A study participant who was shown the completion code is finished (issue 24, finding 5): the
study link, opened again, shows the code again and leases nothing. Their platform submission
(Prolific's SESSION_ID, Connect's assignmentId) is complete and paid as it stands; only a new
session that the platform confirms is theirs is a new submission, and gets tasks again."""

from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from django.test import Client

from annotation.models import Assignment, Stage, Worker
from tests.frontend_support import study, verification_unit

pytestmark = pytest.mark.django_db

CODE = "C0DE42"
STAGE = Stage.VERIFICATION
JSON = {"Accept": "application/json"}


@pytest.fixture(autouse=True)
def no_confirmations_remembered():
    cache.clear()


def prolific_link(session_id="SESSION1", pid="P1"):
    return f"/work/{STAGE}/?" + urlencode({"PROLIFIC_PID": pid, "STUDY_ID": "STUDY123",
                                           "SESSION_ID": session_id})


def connect_link(assignment_id="CRASG1", participant="CR1"):
    return f"/work/{STAGE}/?" + urlencode({"participantId": participant, "projectId": "PRJ1",
                                           "assignmentId": assignment_id})


def do_one_task(browser, url):
    page = browser.get(url, follow=True)
    assert page.status_code == 200 and page.context["assignment"] is not None
    result = browser.post("/work/submit/", {"token": page.context["token"], "verdict": "correct"},
                          headers=JSON).json()
    assert result["ok"]
    return page.context["session_token"], result["next"]


def leased():
    return Assignment.objects.filter(status=Assignment.Status.LEASED).count()


def assert_code_again(response):
    html = response.content.decode()
    assert response.status_code == 200, html[:300]
    assert "You have finished this study" in html and CODE in html
    assert "gives no more tasks" in html
    assert 'name="token"' not in html and response.context.get("assignment") is None
    assert leased() == 0


@pytest.fixture
def prolific_study():
    for _ in range(4):
        verification_unit()
    return study(platform=Worker.Platform.PROLIFIC, stage=STAGE)


def test_a_participant_who_pressed_finish_and_reopens_the_study_link_sees_the_code_and_no_task(
        prolific_study):
    browser = Client()
    session_token, next_url = do_one_task(browser, prolific_link())
    finished = browser.post("/work/finish/", {"session": session_token})
    assert CODE in finished.content.decode() and "gives no more tasks" in finished.content.decode()

    assert_code_again(browser.get(prolific_link()))
    # The page after their last answer, and the link without its session id, are the same study.
    assert_code_again(browser.get(next_url))
    assert_code_again(browser.get(prolific_link(session_id="")))
    assert Assignment.objects.filter(status=Assignment.Status.SUBMITTED).count() == 1
    from mturk.models import StudyCompletion

    assert StudyCompletion.objects.get().platform_session_id == "SESSION1"


def test_a_participant_given_the_code_by_an_empty_queue_is_not_handed_work_launched_later():
    verification_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=STAGE)
    browser = Client()
    _, next_url = do_one_task(browser, prolific_link())
    done = browser.get(next_url)
    assert CODE in done.content.decode()

    verification_unit()  # the researchers add work after the participant got their code
    assert_code_again(browser.get(prolific_link()))
    assert_code_again(browser.get(next_url))


def test_a_connect_participant_who_finished_is_finished_too():
    for _ in range(3):
        verification_unit()
    study(platform=Worker.Platform.CLOUDRESEARCH, stage=STAGE, external_id="PRJ1")
    browser = Client()
    session_token, _ = do_one_task(browser, connect_link())
    browser.post("/work/finish/", {"session": session_token})
    assert_code_again(browser.get(connect_link()))


def test_a_new_session_the_platform_cannot_confirm_shows_the_code_again(prolific_study, prolific):
    browser = Client()
    session_token, _ = do_one_task(browser, prolific_link())
    browser.post("/work/finish/", {"session": session_token})

    # An id typed into the link: Prolific has no such submission of this participant.
    assert_code_again(browser.get(prolific_link(session_id="TYPED")))
    assert [request[1] for request in prolific.requests] == ["/api/v1/submissions/TYPED/"]


def test_a_new_session_without_a_platform_to_ask_shows_the_code_again(prolific_study, settings):
    settings.PROLIFIC_API_TOKEN = ""  # the embedded default: no platform credentials
    browser = Client()
    session_token, _ = do_one_task(browser, prolific_link())
    browser.post("/work/finish/", {"session": session_token})
    assert_code_again(browser.get(prolific_link(session_id="SESSION2")))


def test_a_new_submission_prolific_confirms_gets_tasks_and_earns_its_code_with_its_own_work(
        prolific_study, prolific):
    browser = Client()
    session_token, _ = do_one_task(browser, prolific_link())
    browser.post("/work/finish/", {"session": session_token})
    prolific.submissions["SESSION2"] = {"id": "SESSION2", "participant_id": "P1",
                                        "study_id": "STUDY123", "status": "ACTIVE"}

    page = browser.get(prolific_link(session_id="SESSION2"))
    assert page.context["assignment"].platform_assignment_id == "SESSION2"
    second_session = page.context["session_token"]
    early = browser.post("/work/finish/", {"session": second_session})
    assert "No code yet" in early.content.decode() and CODE not in early.content.decode()

    do_one_task(browser, prolific_link(session_id="SESSION2"))
    assert CODE in browser.post("/work/finish/", {"session": second_session}).content.decode()
    assert_code_again(browser.get(prolific_link(session_id="SESSION2")))
    from mturk.models import StudyCompletion

    assert sorted(StudyCompletion.objects.values_list("platform_session_id", flat=True)) == [
        "SESSION1", "SESSION2"]
