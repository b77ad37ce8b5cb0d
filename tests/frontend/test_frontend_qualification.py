"""Page 5, the qualification test; live gold items in live work; a worker's qualification state
and payment review on page 6. Through Django's test client."""

from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from annotation.models import (
    Assignment,
    GoldAnswer,
    GoldItem,
    QualificationAttempt,
    Stage,
    Verification,
    Worker,
    WorkerQualification,
)
from frontend import tokens
from mturk.models import Submission
from tests.frontend_support import (
    qualification_test,
    right_answers,
    study,
    unit_url,
    verification_unit,
)

pytestmark = pytest.mark.django_db

JSON = {"Accept": "application/json"}


def open_test(client, unit, **query):
    """An MTurk worker opens a HIT of a stage they lack the qualification for."""
    response = client.get(unit_url(unit, **query))
    assert response.status_code == 302, response.content
    assert response["Location"].startswith(f"/work/qualify/{unit.stage}/?q=")
    page = client.get(response["Location"])
    assert page.status_code == 200, page.content
    return page


def test_a_worker_without_the_qualification_is_sent_to_the_test_not_told_nothing_to_do():
    qualification_test()
    unit = verification_unit()
    page = open_test(Client(), unit)
    assert not Assignment.objects.exists()
    html = page.content.decode()
    assert "5 sample tasks" in html
    assert html.count('data-item="') == 5
    assert "Is the response correct?" in html and "There are three cups." in html
    # The known answers and the researchers' notes are not on the page before submitting.
    assert "The caption shows two cups" not in html
    assert page["Content-Security-Policy"].startswith("default-src 'self'")


def test_the_test_is_submitted_once_then_feedback_score_and_a_way_to_the_tasks():
    qualification_test()
    unit = verification_unit()
    client = Client()
    page = open_test(client, unit, worker_id="AQUAL1")
    token = page.context["token"]
    attempt = QualificationAttempt.objects.get()
    answers = right_answers(attempt, wrong=1)
    incomplete = dict(list(answers.items())[:3])
    refused = Client().post(f"/work/qualify/{Stage.VERIFICATION}/", {"token": token, **incomplete},
                            headers=JSON)
    assert refused.status_code == 400 and "2 left" in refused.json()["error"]
    done = Client().post(f"/work/qualify/{Stage.VERIFICATION}/", {"token": token, **answers},
                         headers=JSON)
    assert done.status_code == 200, done.content
    result = client.get(done.json()["next"])
    html = result.content.decode()
    assert "You passed the qualification test" in html
    assert "80% right" in html and "80% needed" in html
    assert html.count("data-feedback") == 5
    assert html.count("data-expected") == 1
    assert "Researcher's note: The caption shows two cups." in html
    # Again: the stored result, not a second scoring.
    again = Client().post(f"/work/qualify/{Stage.VERIFICATION}/", {"token": token, **answers},
                          headers=JSON)
    assert again.status_code == 200 and GoldAnswer.objects.count() == 5
    # The continue link is the HIT the worker came from; now it leases the unit.
    continue_url = result.context["next_url"]
    assert continue_url.startswith(f"/work/unit/{unit.pk}/?")
    task = client.get(continue_url)
    assert task.status_code == 200 and task.context["assignment"].unit == unit


def test_failing_shows_the_right_answers_and_when_to_try_again():
    qualification_test()
    unit = verification_unit()
    page = open_test(Client(), unit)
    attempt = QualificationAttempt.objects.get()
    response = Client().post(f"/work/qualify/{Stage.VERIFICATION}/",
                             {"token": page.context["token"], **right_answers(attempt, wrong=3)})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Not passed this time" in html and "40% right" in html
    assert html.count("data-expected") == 3
    assert "Continue to the tasks" not in html
    assert "You can take the test again after" in html
    # Coming back to the HIT, they are sent to the test page, which says when.
    back = Client().get(unit_url(unit), follow=True)
    assert "again after" in back.content.decode()
    assert not Assignment.objects.exists()


def test_a_prolific_participant_takes_the_test_then_continues_in_the_study():
    qualification_test()
    verification_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.VERIFICATION, external_id="ST1")
    client = Client()
    query = urlencode({"PROLIFIC_PID": "PP9", "STUDY_ID": "ST1", "SESSION_ID": "SE1"})
    page = client.get(f"/work/{Stage.VERIFICATION}/?{query}", follow=True)
    assert page.redirect_chain[-1][0].startswith(f"/work/qualify/{Stage.VERIFICATION}/")
    attempt = QualificationAttempt.objects.get()
    done = client.post(f"/work/qualify/{Stage.VERIFICATION}/",
                       {"token": page.context["token"], **right_answers(attempt)}, headers=JSON)
    result = client.get(done.json()["next"])
    task = client.get(result.context["next_url"])
    assert task.status_code == 200
    assert task.context["study"].external_id == "ST1"
    assert task.context["assignment"].platform_assignment_id == "SE1"


def test_the_test_is_reachable_by_a_study_link_and_by_a_signed_in_annotator():
    qualification_test()
    study(platform=Worker.Platform.CLOUDRESEARCH, stage=Stage.VERIFICATION, external_id="PRJ1")
    query = urlencode({"participantId": "CR1", "projectId": "PRJ1", "assignmentId": "A1"})
    page = Client().get(f"/work/qualify/{Stage.VERIFICATION}/?{query}", follow=True)
    assert page.status_code == 200 and page.context["items"]
    user = get_user_model().objects.create_user("ann", password="pw-ann-12345")
    client = Client()
    client.force_login(user)
    assert client.get(f"/work/qualify/{Stage.VERIFICATION}/").status_code == 200
    assert Client().get(f"/work/qualify/{Stage.VERIFICATION}/").status_code == 302


def test_a_forged_or_foreign_test_token_is_refused():
    qualification_test()
    worker = Worker.objects.create(platform=Worker.Platform.MTURK, external_id="AVICTIM")
    forged = tokens.sign_session(tokens.StudySession(worker_id=worker.pk, study_id=1))
    assert Client().get(f"/work/qualify/{Stage.VERIFICATION}/?q={forged}").status_code == 403
    other_stage = tokens.sign_qualification(
        tokens.QualificationPass(worker_id=worker.pk, stage=Stage.CAPTION))
    assert Client().get(f"/work/qualify/{Stage.VERIFICATION}/?q={other_stage}").status_code == 403
    assert Client().post(f"/work/qualify/{Stage.VERIFICATION}/", {"token": forged},
                         headers=JSON).status_code == 403


def test_a_stage_without_a_test_has_no_test_page():
    assert Client().get(f"/work/qualify/{Stage.CAPTION}/?workerId=AW1").status_code == 404


# --- live gold items ----------------------------------------------------------------------------


def qualified(worker_id="AGOLD", **fields):
    qualification = qualification_test(live_gold_every=1, **fields)
    worker = Worker.objects.create(platform=Worker.Platform.MTURK, external_id=worker_id)
    WorkerQualification.objects.create(qualification=qualification, worker=worker,
                                       test_score="1.000")
    return qualification, worker


def test_a_live_gold_item_looks_like_the_stages_task_and_is_not_stored_as_work():
    qualified()
    unit = verification_unit()
    client = Client()
    url = unit_url(unit, worker_id='AGOLD')
    gold = client.get(url)
    assert gold.status_code == 200
    assert gold.templates[0].name == "annotator/verification.html"
    assert gold.context["reference"]["text"] in ("There are two cups.", "There are three cups.")
    reload = client.get(url)
    assert (reload.context["instance"], reload.context["reference"]) == (
        gold.context["instance"], gold.context["reference"])
    assert not Assignment.objects.exists()
    item = GoldItem.objects.get(content__response=gold.context["reference"]["text"],
                                content__instruction=gold.context["instance"]["instruction"])
    verdict = item.answer
    response = Client().post("/work/submit/", {"token": gold.context["token"], "verdict": verdict,
                                               "problem": "response"}, headers=JSON)
    assert response.status_code == 200, response.content
    assert response.json() == {"ok": True, "next": url}
    answer = GoldAnswer.objects.get()
    assert (answer.item, answer.correct, answer.source) == (item, True, GoldAnswer.Source.LIVE)
    assert not Verification.objects.exists() and not Assignment.objects.exists()
    # A second click stores nothing more; then the HIT's own unit, never two gold items in a row.
    Client().post("/work/submit/", {"token": gold.context["token"], "verdict": verdict},
                  headers=JSON)
    assert GoldAnswer.objects.count() == 1
    task = client.get(url)
    assert task.context["assignment"].unit == unit
    assert WorkerQualification.objects.get().live_answers == 1


def test_a_gold_answer_is_checked_like_a_real_one():
    qualified()
    unit = verification_unit()
    gold = Client().get(unit_url(unit, worker_id='AGOLD'))
    response = Client().post("/work/submit/", {"token": gold.context["token"],
                                               "verdict": "incorrect"}, headers=JSON)
    assert response.status_code == 400
    assert "where the problem is" in response.json()["error"]
    assert not GoldAnswer.objects.exists()


def test_a_worker_paused_below_the_bar_is_told_so_on_the_next_request():
    qualification, _ = qualified(live_min_answers=2, live_window=2)
    for _ in range(3):
        verification_unit()
    study(platform=Worker.Platform.CLOUDRESEARCH, stage=Stage.VERIFICATION, external_id="PRJ2")
    client = Client()
    query = urlencode({"participantId": "AGOLD-CR", "projectId": "PRJ2"})
    next_url = f"/work/{Stage.VERIFICATION}/?{query}"
    client.get(next_url, follow=True)  # the first arrival binds the participant to this browser
    WorkerQualification.objects.create(
        qualification=qualification, test_score="1.000",
        worker=Worker.objects.get(platform=Worker.Platform.CLOUDRESEARCH, external_id="AGOLD-CR"))
    for _ in range(2):
        page = client.get(next_url)
        assert "reference" in page.context
        item = GoldItem.objects.get(content__response=page.context["reference"]["text"],
                                    content__instruction=page.context["instance"]["instruction"])
        wrong = "incorrect" if item.answer == "correct" else "correct"
        result = client.post("/work/submit/", {"token": page.context["token"], "verdict": wrong,
                                               "problem": "response"}, headers=JSON).json()
        next_url = result["next"]
        if GoldAnswer.objects.count() < 2:
            # Between two gold items comes a real task, which the worker does.
            task = client.get(next_url)
            assert task.context["assignment"] is not None
            client.post("/work/submit/", {"token": task.context["token"], "verdict": "correct"},
                        headers=JSON)
    paused = client.get(next_url)
    html = paused.content.decode()
    assert "Your work on these tasks is paused" in html
    assert "0% were right, below the 60% needed" in html
    assert "Get my code for the work I did" in html
    assert not Assignment.objects.filter(status=Assignment.Status.LEASED).exists()


def test_in_house_annotators_get_no_gold_items():
    qualification_test(live_gold_every=1)
    unit = verification_unit()
    client = Client()
    client.force_login(get_user_model().objects.create_user("ann", password="pw-ann-12345"))
    page = client.get(f"/work/{Stage.VERIFICATION}/")
    assert page.context["assignment"].unit == unit


# --- page 6 -----------------------------------------------------------------------------------


def test_worker_page_shows_qualification_state_and_payment_review():
    qualification, worker = qualified()
    unit = verification_unit()
    crowd_study = study(platform=Worker.Platform.MTURK, stage=Stage.VERIFICATION, external_id="S")
    WorkerQualification.objects.filter(worker=worker).update(live_accuracy="0.750")
    assignment = Assignment.objects.create(unit=unit, worker=worker, platform_assignment_id="3ASG",
                                           lease_expires_at="2030-01-01T00:00Z")
    submission = Submission.objects.create(
        study=crowd_study, worker=worker, platform_assignment_id="3ASG",
        review=Submission.Review.REJECTED, feedback="The answers did not match the images.")
    submission.assignments.add(assignment)
    # The synced submission is MTurk's word that assignment 3ASG is this worker's.
    link = tokens.sign_worker(worker.pk, assignment_id=assignment.pk)
    html = Client().get(f"/work/me/?w={link}").content.decode()
    assert 'data-qualification-status="qualified"' in html
    assert "You are qualified." in html and "75%" in html and "100%" in html
    assert "Rejected" in html and "The answers did not match the images." in html


def test_worker_page_offers_the_test_to_a_worker_who_has_not_taken_it():
    qualification_test()
    worker = Worker.objects.create(platform=Worker.Platform.PROLIFIC, external_id="P1")
    page = Client().get(f"/work/me/?w={tokens.sign_worker(worker.pk)}")
    html = page.content.decode()
    assert 'data-qualification-status="not_taken"' in html
    link = page.context["qualifications"][0]["test_url"]
    assert Client().get(link).status_code == 200


@pytest.mark.parametrize(("platform", "query", "where"), [
    (Worker.Platform.PROLIFIC, {"PROLIFIC_PID": "PP9", "STUDY_ID": "ST1", "SESSION_ID": "SE1"},
     "return the study on Prolific, so that your place goes to someone else"),
    (Worker.Platform.CLOUDRESEARCH, {"participantId": "CR9", "projectId": "ST1", "assignmentId": "A1"},
     "return the study on CloudResearch, so that your place goes to someone else"),
])
def test_a_study_participant_who_fails_is_told_to_return_the_study_on_their_platform(
        platform, query, where):
    qualification_test(retake_after_hours=24)
    verification_unit()
    study(platform=platform, stage=Stage.VERIFICATION, external_id="ST1")
    client = Client()
    page = client.get(f"/work/{Stage.VERIFICATION}/?{urlencode(query)}", follow=True)
    attempt = QualificationAttempt.objects.get()
    result = client.post(f"/work/qualify/{Stage.VERIFICATION}/",
                         {"token": page.context["token"], **right_answers(attempt, wrong=3)})
    html = result.content.decode()
    assert "Not passed this time" in html
    assert f"there is no work for you here now. Please {where}." in html
    assert not Assignment.objects.exists()


def test_an_mturk_worker_who_fails_is_told_to_return_the_hit_and_one_who_may_retake_is_told_both():
    qualification_test(retake_after_hours=0)
    unit = verification_unit()
    page = open_test(Client(), unit)
    attempt = QualificationAttempt.objects.get()
    result = Client().post(f"/work/qualify/{Stage.VERIFICATION}/",
                           {"token": page.context["token"], **right_answers(attempt, wrong=3)})
    html = result.content.decode()
    assert "Take the test again" in html
    assert ("If you do not take it again now, please press “Return” on MTurk, so that the HIT goes "
            "to someone else.") in html


def test_an_in_house_annotator_who_fails_is_not_sent_to_a_platform():
    qualification_test(retake_after_hours=24)
    client = Client()
    client.force_login(get_user_model().objects.create_user("ann", password=None))
    page = client.get(f"/work/qualify/{Stage.VERIFICATION}/")
    attempt = QualificationAttempt.objects.get()
    result = client.post(f"/work/qualify/{Stage.VERIFICATION}/",
                         {"token": page.context["token"], **right_answers(attempt, wrong=3)})
    html = result.content.decode()
    assert "Not passed this time" in html and "data-give-back" not in html
